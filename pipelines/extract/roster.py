"""What left the account: rows the warehouse holds that a complete listing no longer shows.

The service has no "deleted" feed. A shipment that leaves the account (deleted, or moved to another
account) simply stops being listed by `/shipments`, and a custom field value deleted by a user stops being
listed by `/custom_fields`. Both lists are read whole every sync, so once a listing completes, what the
warehouse holds and the listing lacks is gone:

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
from datetime import UTC, datetime
from typing import Any

import dlt

from pipelines.extract.loaded import loaded_rows

logger = logging.getLogger(__name__)

DEPARTED_TABLE = "departed_shipments"
DEPARTED_COLUMNS: dict[str, dict[str, Any]] = {
    "shipment_id": {"data_type": "text", "nullable": False},
    "left_account_at": {"data_type": "timestamp", "nullable": True},
    "listed_again": {"data_type": "bool", "nullable": True, "hard_delete": True},
}
MAX_DEPARTED_SHARE = 0.5
# Below this many, a departure is believable whatever the share (a small account deleting a few shipments).
ALWAYS_BELIEVED = 10


def loaded_values(table: str, column: str, pipeline: dlt.Pipeline | None = None) -> set[str]:
    """The distinct non-null values of `column` in `table` at the pipeline's destination; empty when the
    table was never loaded (`pipelines.extract.loaded`)."""
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
