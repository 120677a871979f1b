"""Jobs and schedules: a daily full sync, and a refresh of tracking requests + maps at a cadence
computed from the rate budget (`pipelines.source.map_schedule`) at each tick, so loading the definitions
reads nothing. The refresh stands down while webhooks are live (`assets.webhooks`).

With several accounts (`assets.accounts`) both schedules request one run per account at a tick (its partition,
tagged with the account): the full sync every account, the refresh each account whose own plan (its size,
its budget, its receiver) is on cadence at that hour."""

from collections.abc import Iterator
from datetime import datetime

import dagster as dg
import duckdb

from assets.accounts import account_partitions, per_account
from assets.ingest import asset_key
from assets.resources import Warehouse
from assets.webhooks import receiver_alive
from pipelines.settings import Account
from pipelines.source.map_schedule import REFRESH_MINUTE, AccountSize, RefreshPlan, account_size, plan_refresh

FULL_SYNC_CRON = "0 2 * * *"
HOURLY_CRON = f"{REFRESH_MINUTE} * * * *"  # off the hour, away from the daily full sync at 02:00
REFRESH_KEYS = [asset_key("tracking_requests"), asset_key("map_features")]
# Assumed until a warehouse exists: a mid-size account (the plan is recomputed at every tick).
ASSUMED_SIZE = AccountSize(shipments=1000, containers_at_sea=1000, containers_before_departure=500)

full_sync_job = dg.define_asset_job(
    "full_sync",
    # every asset and its checks but the lake's maintenance, which has its own schedule
    selection=dg.AssetSelection.all() - dg.AssetSelection.groups("maintenance"),
    description="Everything: the whole account through the ingest graph, then the models and maps.",
)

refresh_job = dg.define_asset_job(
    "refresh_tracking_and_maps",
    selection=dg.AssetSelection.assets(*REFRESH_KEYS),
    description=(
        "Tracking requests (incremental) and the route maps that are due. map_features hangs off the "
        "shipment page stream, so a refresh spends ceil(shipments/100) pages + the maps due."
    ),
)


def current_plan(warehouse: Warehouse, fallback: AccountSize = ASSUMED_SIZE) -> tuple[RefreshPlan, str]:
    """The refresh plan for the account as loaded now, and where the sizes came from.

    The warehouse is read read-only; when it does not exist yet or a run holds a DuckDB file's write
    lock, the assumed size is used (the next tick reads it again)."""
    try:
        store = warehouse.store()
        if not store.exists():
            raise FileNotFoundError(store.place)
        if not store.is_lake:
            duckdb.connect(str(store.duckdb_file), read_only=True).close()  # held: fall back, do not wait
        with warehouse.connect(read_only=True) as con:
            return plan_refresh(account_size(con, warehouse.dataset_name)), "warehouse"
    except (duckdb.Error, OSError):
        return plan_refresh(fallback), "assumed size"


@dg.schedule(
    name="refresh_tracking_and_maps_schedule",
    job=refresh_job,
    cron_schedule=HOURLY_CRON,
    execution_timezone="UTC",
    description=(
        "Ticks hourly and runs at the cadence the rate budget allows for the account as loaded at that "
        "tick (hourly for small accounts, every 2, 3, 4, ... hours as the account grows); off-cadence "
        "ticks are skipped with the plan as the reason."
    ),
)
def refresh_schedule(context: dg.ScheduleEvaluationContext, warehouse: Warehouse):
    """Plan the refresh from the warehouse at this tick and run it when the hour is on the cadence; stand
    down while a webhook receiver is alive (notifications and the map scheduler keep the account fresh).
    Each account is planned on its own."""
    return per_account(context, lambda account: refresh_request(context, warehouse, account))


def refresh_request(context: dg.ScheduleEvaluationContext, warehouse: Warehouse,
                    account: Account) -> dg.RunRequest | dg.SkipReason:
    """The refresh schedule for one account: its run when the hour is on its cadence and its receiver is down."""
    if receiver_alive(account=account):
        return dg.SkipReason("Webhooks are live: notifications refresh what changes and the map-freshness "
                             "sensor the maps; the daily full sync stays the safety net.")
    plan, source = current_plan(warehouse.for_account(account))
    tick: datetime = context.scheduled_execution_time
    if tick.hour % plan.hours != 0:
        return dg.SkipReason(f"Off cadence ({source}): {plan.explain()}")
    return dg.RunRequest(
        run_key=f"refresh-{tick.isoformat()}",
        tags={"ocean_tracking/refresh_every_hours": str(plan.hours)},
    )


def full_sync_per_account(context: dg.ScheduleEvaluationContext) -> Iterator[dg.RunRequest | dg.SkipReason]:
    """With accounts: one full sync per account at the tick, each its partition (a run key per account,
    as Dagster asks of a tick requesting several runs)."""
    tick: datetime = context.scheduled_execution_time
    answer = per_account(context, lambda _: dg.RunRequest(run_key=f"full-sync-{tick.isoformat()}"))
    yield from answer if isinstance(answer, list) else [answer]  # a plain execution_fn's list is not unpacked


full_sync_schedule = dg.ScheduleDefinition(
    name="full_sync_daily",
    job=full_sync_job,
    cron_schedule=FULL_SYNC_CRON,
    execution_timezone="UTC",
    description="Daily full sync of the whole account (all assets and checks) at 02:00 UTC.",
    # without accounts, Dagster's own one run a tick
    execution_fn=None if account_partitions is None else full_sync_per_account,
)
