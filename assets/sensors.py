"""A sensor that follows pending tracking requests until the service resolves them.

The warehouse says which tracking requests were `pending` at the last load; one cheap list call
(`/tracking_requests?filter[status]=pending`, one page per 100 pending) says which still are. Those
no longer pending became `created` (a shipment appeared) or `failed`: a run loads them together with
the shipments and their containers, events and maps. The run key is a digest of the resolved ids, so
one state fires once; the cursor remembers the last digest for the UI and for restarts.

With several accounts (`assets.accounts`) each account is followed on its own, with its key and its dataset:
one run request per account whose requests resolved (its partition), and the cursor holds each account's
last digest (`{"emea": "...", "apac": "..."}`).
"""

import hashlib
import json
from collections.abc import Callable

import dagster as dg
import duckdb

from assets.accounts import SINGLE_ACCOUNT, account_partitions, per_account
from assets.ingest import asset_key
from assets.resources import OceanTrackingApi, Warehouse
from pipelines.settings import Account
from pipelines.warehouse import table_exists

PAGE_SIZE = 100
FOLLOW_UP_KEYS = [
    asset_key(table)
    for table in (
        "tracking_requests",
        "shipments",
        "shipment_eta_history",
        "containers",
        "container_charge_history",
        "transport_events",
        "terminals",
        "ports",
        "vessels",
        "map_features",
    )
]
follow_up_job = dg.define_asset_job(
    "load_resolved_tracking_requests",
    selection=dg.AssetSelection.assets(*FOLLOW_UP_KEYS),
    description="Tracking requests that left `pending`, with the shipments they created.",
)


def pending_in_warehouse(warehouse: Warehouse) -> set[str]:
    """Ids of tracking requests whose loaded status is `pending` (empty before the first load)."""
    if not warehouse.store().exists():
        return set()
    with warehouse.connect(read_only=True) as con:
        if not table_exists(con, warehouse.dataset_name, "tracking_requests"):
            return set()
        rows = con.execute(
            f"select id from {warehouse.dataset_name}.tracking_requests where status = 'pending'"
        ).fetchall()
    return {row[0] for row in rows}


def pending_at_service(api: OceanTrackingApi, account: Account = SINGLE_ACCOUNT) -> set[str]:
    """Ids the service still reports as pending for `account` (one request per 100 pending)."""
    ids: set[str] = set()
    with api.client(account) as client:
        params = {"filter[status]": "pending", "page[size]": PAGE_SIZE}
        for document in client.paginate("/tracking_requests", params=params):
            ids.update(row["id"] for row in document.get("data") or [] if row.get("type") == "tracking_request")
    return ids


def resolved_digest(ids: set[str]) -> str:
    """A stable short digest of a set of ids: the run key of the state it describes."""
    return hashlib.sha256(",".join(sorted(ids)).encode()).hexdigest()[:16]


@dg.sensor(
    name="pending_tracking_requests_sensor",
    job=follow_up_job,
    minimum_interval_seconds=300,
    description=(
        "Loads tracking requests (and the shipments they created) once the service resolves them. "
        "Reads pending ids from the warehouse; spends one request per 100 pending per tick, nothing "
        "when none are pending."
    ),
)
def pending_tracking_requests_sensor(
    context: dg.SensorEvaluationContext, warehouse: Warehouse, ocean_tracking_api: OceanTrackingApi
):
    """Request a follow-up load when some loaded-as-pending tracking requests are no longer pending (for
    each account)."""
    if account_partitions is None:
        return follow_up_request(warehouse, ocean_tracking_api, SINGLE_ACCOUNT, context.cursor, context.update_cursor)
    digests: dict[str, str] = json.loads(context.cursor) if context.cursor else {}

    def follow(account: Account) -> dg.RunRequest | dg.SkipReason:
        return follow_up_request(warehouse, ocean_tracking_api, account, digests.get(str(account.name)),
                                 lambda digest: digests.__setitem__(str(account.name), digest))

    answer = per_account(context, follow)
    context.update_cursor(json.dumps(digests, sort_keys=True))
    return answer


def follow_up_request(
    warehouse: Warehouse, ocean_tracking_api: OceanTrackingApi, account: Account, last_digest: str | None,
    remember: Callable[[str], None],
) -> dg.RunRequest | dg.SkipReason:
    """The follow-up of one account: a load when some of its pending tracking requests resolved since the
    state `last_digest` describes; the new state's digest is handed to `remember` (the cursor)."""
    try:
        pending = pending_in_warehouse(warehouse.for_account(account))
    except duckdb.IOException as error:  # a run holds DuckDB's write lock: try next tick
        return dg.SkipReason(f"warehouse busy: {error.__class__.__name__}")
    if not pending:
        return dg.SkipReason("no pending tracking requests in the warehouse")
    resolved = pending - pending_at_service(ocean_tracking_api, account)
    if not resolved:
        return dg.SkipReason(f"{len(pending)} tracking request(s) still pending")
    digest = resolved_digest(resolved)
    if last_digest == digest:
        return dg.SkipReason("this resolved set was already requested; waiting for the load")
    remember(digest)
    return dg.RunRequest(
        run_key=f"resolved-{digest}",
        tags={"ocean_tracking/resolved_tracking_requests": str(len(resolved))},
    )
