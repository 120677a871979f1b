"""What a page of `/shipments` holds, and what a complete listing no longer holds; what a page's rows become
(a container's charge version, a custom field's value as JSON text, the ids a page names of another table).

A page (`Page`), as the source's transformers see it: which shipment each container and event belongs to,
and which shipments changed since they were loaded (their "bundle": the shipment, its containers and their
included events, digested as the page brought them).

The roster (`shipment_departures`, `deleted_rows`): the service has no "deleted" feed. A shipment that leaves
the account (deleted, or moved to another account) simply stops being listed by `/shipments`, and a custom
field value deleted by a user stops being listed by `/custom_fields`. Both lists are read whole (the shipments
every sync, the custom fields on their cadence), so once a listing completes, what the warehouse holds and the
listing lacks is gone:

- shipments are kept (their history is the account's history) and flagged in `departed_shipments`, one row
  per shipment gone now, with when the sync noticed; a shipment listed again drops out of that table
  through dlt's `hard_delete` merge hint, as a resolved `sync_issues` row does;
- custom field values are deleted from `custom_fields` (dlt `hard_delete`): a value the user deleted is
  no value, and keeping it would show a purchase order number the shipment no longer has.

A listing that would retire more than `MAX_DEPARTED_SHARE` of what the warehouse holds at once is not
trusted: a service answering a short list without an error must not empty the account. The sync logs one
warning and retires nothing; the next complete listing decides again.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import dlt
import orjson

from pipelines.api.client import OceanTrackingClient
from pipelines.settings import PAGE_SIZE
from pipelines.source import TABLES
from pipelines.source.bookkeeping import FetchLog, digest, loaded_rows


@dataclass(frozen=True)
class Page:
    """One page of `/shipments` as the transformers get it: every row by type (what decides the requests:
    maps due, references named), the shipment each container and included event belongs to, and the
    shipments whose bundle changed since the fetch log's record."""

    rows: dict[str, list[dict]]
    owners: dict[tuple[str, str], str]
    changed_shipments: frozenset[str]
    # Set on the closing page only, which has no rows: every shipment id the complete listing showed.
    listed_shipment_ids: frozenset[str] | None = None
    # Set on the one page of a map refresh, which has no rows: the `(container id, phase)` pairs whose
    # route maps the map-freshness scheduler chose (`pipelines.source.map_schedule.plan_maps`).
    scheduled_maps: tuple[tuple[str, str], ...] | None = None

    @classmethod
    def closing(cls, listed_shipment_ids: set[str]) -> Page:
        """The page after the last one: no rows, and the ids of every shipment the listing showed (what is
        not among them has left the account, `pipelines.source.pages`)."""
        return cls({}, {}, frozenset(), frozenset(listed_shipment_ids))

    def changed_rows(self, type_: str) -> list[dict]:
        """The rows of `type_` (shipment, container, transport_event) worth loading: those of changed
        shipments, and those that belong to no shipment of the page (such as events fetched apart)."""
        rows = self.rows.get(type_, [])
        if type_ == "shipment":
            return [row for row in rows if row["id"] in self.changed_shipments]
        return [
            row for row in rows
            if (owner := self.owners.get((type_, row["id"]))) is None or owner in self.changed_shipments
        ]


def owners_of(page: dict[str, list[dict]]) -> dict[tuple[str, str], str]:
    """The shipment each container and included event of the page belongs to (by the container's
    `shipment_id`, else the shipment's `containers_ids`; an event by its container, else its `shipment_id`)."""
    owners: dict[tuple[str, str], str] = {}
    for shipment in page.get("shipment", []):
        for container_id in shipment.get("containers_ids") or ():
            owners[("container", container_id)] = shipment["id"]
    for container in page.get("container", []):
        if container.get("shipment_id"):
            owners[("container", container["id"])] = container["shipment_id"]
    for event in page.get("transport_event", []):
        owner = owners.get(("container", event.get("container_id"))) or event.get("shipment_id")
        if owner:
            owners[("transport_event", event["id"])] = owner
    return owners


def changed_bundles(page: dict[str, list[dict]], owners: dict[tuple[str, str], str], log: FetchLog) -> frozenset[str]:
    """The shipments of the page whose bundle (the shipment, its containers and their included events)
    differs from the fetch log's digest, each recorded. Computed before any event is fetched apart, so
    the digest is of what the service sent on the page."""
    members: dict[str, list[dict]] = {shipment["id"]: [shipment] for shipment in page.get("shipment", [])}
    for type_ in ("container", "transport_event"):
        for row in page.get(type_, []):
            owner = owners.get((type_, row["id"]))
            if owner in members:
                members[owner].append(row)
    digests = [(shipment_id, digest(rows)) for shipment_id, rows in members.items()]
    changed = set()
    for (shipment_id, value), is_changed in zip(digests, log.changed("shipment", digests), strict=True):
        if is_changed:
            log.record("shipment", shipment_id, value)
            changed.add(shipment_id)
    return frozenset(changed)


def every_page(client: OceanTrackingClient, path: str) -> list[dict[str, Any]]:
    """Every page of a list, read to the end before any is used, so a failure midway leaves nothing half-read."""
    return list(client.paginate(path, {"page[size]": PAGE_SIZE}))


logger = logging.getLogger(__name__)

DEPARTED_TABLE = "departed_shipments"
MAX_DEPARTED_SHARE = 0.5
# Below this many, a departure is believable whatever the share (a small account deleting a few shipments).
ALWAYS_BELIEVED = 10


def loaded_values(table: str, column: str, pipeline: dlt.Pipeline | None = None) -> set[str]:
    """The distinct non-null values of `column` in `table` at the pipeline's destination; empty when the
    table was never loaded (`pipelines.source.bookkeeping`)."""
    sql = f"select distinct {column} as value from {table} where {column} is not null"
    return {row["value"] for row in loaded_rows(pipeline or dlt.current.pipeline(), sql, table)}


def believable(gone: set[str], held: set[str], what: str) -> bool:
    """Whether retiring `gone` out of the `held` rows is believable; one warning when it is not."""
    if len(gone) <= max(ALWAYS_BELIEVED, MAX_DEPARTED_SHARE * len(held)):
        return True
    logger.warning(
        "The service listed %d fewer %s than the warehouse holds (%d), more than %.0f%% at once; nothing "
        "was retired this sync. If they really left the account, the next complete sync retires them only "
        "once the share is believable: remove them by hand.", len(gone), what, len(held), MAX_DEPARTED_SHARE * 100,
    )
    return False


def shipment_departures(listed: Iterable[str], now: datetime | None = None) -> list[dict[str, Any]]:
    """After a complete `/shipments` listing: rows for `departed_shipments`, shipments that left the
    account since the last sync (held, not listed) and those listed again (dropped from the table)."""
    listed = set(listed)
    held = loaded_values("shipments", "id")
    departed_before = loaded_values(DEPARTED_TABLE, "shipment_id")
    gone = held - listed - departed_before
    if gone and not believable(gone, held, "shipments"):
        gone = set()
    stamp = now or datetime.now(UTC)
    rows = [{"shipment_id": shipment_id, "left_account_at": stamp, "listed_again": False} for shipment_id in sorted(gone)]
    rows += [{"shipment_id": shipment_id, "listed_again": True} for shipment_id in sorted(departed_before & listed)]
    if gone:
        logger.info("%d shipment(s) left the account; flagged in %s", len(gone), DEPARTED_TABLE)
    return rows


def deleted_rows(table: str, listed: Iterable[str], what: str) -> list[dict[str, Any]]:
    """After a complete listing of `table`'s rows: a `{"id", "deleted": True}` row for each id the
    warehouse holds and the listing lacks, for a `hard_delete` column named `deleted`."""
    held = loaded_values(table, "id")
    gone = held - set(listed)
    if gone and not believable(gone, held, what):
        return []
    return [{"id": item_id, "deleted": True} for item_id in sorted(gone)]


def charge_version(container: dict[str, Any]) -> dict[str, Any]:
    """A container's `container_charge_history` row: its last free days, availability, and its holds and fees
    as canonical text (`name:status` and `type amount currency`, sorted, `; `-separated), so only a change of
    what they say makes a new version."""
    deadlines = container.get("import_deadlines") or {}
    holds = sorted(f"{hold.get('name')}:{hold.get('status')}" for hold in container.get("holds_at_pod_terminal") or [])
    fees = sorted(f"{fee.get('type')} {fee.get('amount')} {fee.get('currency_code')}"
                  for fee in container.get("fees_at_pod_terminal") or [])  # fmt: skip
    return {"container_id": container["id"], "pickup_lfd": container.get("pickup_lfd"),
            "pickup_lfd_terminal": deadlines.get("pickup_lfd_terminal"), "pickup_lfd_line": deadlines.get("pickup_lfd_line"),
            "pickup_lfd_rail": deadlines.get("pickup_lfd_rail"), "inland_lfd": container.get("ind_facility_lfd_on"),
            "available_for_pickup": container.get("available_for_pickup"),
            "holds": "; ".join(holds) or None, "fees": "; ".join(fees) or None}  # fmt: skip


def referencing_ids(page: dict[str, list[dict]], table: str) -> set[str]:
    """Ids of `table` the page's rows name, through the references the registry declares to it."""
    ids = set()
    for source in TABLES.values():
        if source.jsonapi_type is None:
            continue
        for reference in source.references:
            if reference.parent == table and reference.parent_column == "id" and reference.where is None:
                ids.update(value for row in page.get(source.jsonapi_type, []) if (value := row.get(reference.column)))
    return ids


def value_as_json_text(row: dict[str, Any]) -> dict[str, Any]:
    """A value is any JSON (string, number, boolean, list, object): it is loaded as its JSON text, one
    column whatever the type, which the models read back as JSON (`stg_custom_fields`)."""
    if row.get("value") is not None:
        row["value"] = orjson.dumps(row["value"]).decode()
    return row
