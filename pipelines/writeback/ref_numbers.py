"""Set ref_numbers on shipments and containers, addressed by id or by number.

Rows name their target by `shipment_id` / `container_id`, or by `container_number` /
`bill_of_lading_number` (resolved through the loaded warehouse tables `ocean_tracking.containers.number`
and `ocean_tracking.shipments.bill_of_lading_number`). PATCH replaces the whole list, so it is idempotent;
a row is skipped when the warehouse or, failing that, a GET already shows exactly the wanted list.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError
from pipelines.writeback.inputs import cell, is_uuid, split_list
from pipelines.writeback.lookups import resolve_in_warehouse, warehouse_refs
from pipelines.writeback.store import WritebackStore, error_summary

PATCHED, UNCHANGED, WOULD_PATCH, INVALID, FAILED = "patched", "unchanged", "would_patch", "invalid", "failed"


@dataclass
class PatchResult:
    """What happened to one row."""

    row_index: int
    kind: str | None
    target_id: str | None
    ref_numbers: list[str]
    status: str
    http_status: int | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class PatchReport:
    """Per-row results plus counts per status."""

    results: list[PatchResult]

    @property
    def counts(self) -> dict[str, int]:
        """How many rows ended in each status."""
        return dict(Counter(r.status for r in self.results))


def resolve_target(row: Mapping[str, Any], con: duckdb.DuckDBPyConnection | None) -> tuple[str, str] | str:
    """(kind, id) of the row's target, or a problem text. Ids are taken as given; numbers are looked up
    in the warehouse (a number the warehouse does not know is reported, never guessed)."""
    for kind, id_column, number_columns in (
        ("shipment", "shipment_id", ("bill_of_lading_number", "bill_of_lading")),
        ("container", "container_id", ("container_number",)),
    ):
        ident = cell(row, id_column)
        if ident:
            return (kind, ident) if is_uuid(ident) else f"{id_column} {ident!r} is not a UUID"
        number = cell(row, *number_columns)
        if number:
            found = resolve_in_warehouse(con, kind, number)
            if found is None:
                return f"{kind} {number!r} is not in the warehouse (sync first, or give its id)"
            return kind, found[0]
    return "no target: give shipment_id, container_id, container_number or bill_of_lading_number"


def _current_refs(client: OceanTrackingClient, kind: str, id_: str) -> list[str] | None:
    document = client.get(f"/{kind}s/{id_}")
    refs = ((document.get("data") or {}).get("attributes") or {}).get("ref_numbers")
    return [str(r) for r in refs] if isinstance(refs, list) else None


def patch_ref_numbers(
    rows: Iterable[Mapping[str, Any]],
    client: OceanTrackingClient,
    store: WritebackStore | None,
    con: duckdb.DuckDBPyConnection | None,
    *,
    dry_run: bool = False,
) -> PatchReport:
    """PATCH each row's ref_numbers unless the target already has exactly that list; `con` is the
    warehouse connection used to resolve numbers and to skip without a request."""
    results = []
    for index, row in enumerate(rows):
        refs = split_list(row.get("ref_numbers"))
        target = resolve_target(row, con)
        if isinstance(target, str):
            results.append(PatchResult(index, None, None, refs, INVALID, errors=[target]))
            continue
        kind, id_ = target
        results.append(_patch_one(index, kind, id_, refs, client, store, con, dry_run))
    return PatchReport(results)


def _patch_one(index: int, kind: str, id_: str, refs: list[str], client: OceanTrackingClient,
               store: WritebackStore | None, con: duckdb.DuckDBPyConnection | None, dry_run: bool) -> PatchResult:
    result = PatchResult(index, kind, id_, refs, FAILED)
    try:
        current = warehouse_refs(con, kind, id_)
        if current != refs:  # the warehouse may be stale (e.g. patched since the last sync): ask the service
            current = _current_refs(client, kind, id_)
        if current == refs:
            result.status = UNCHANGED
            return result
        if dry_run:
            result.status = WOULD_PATCH
            return result
        client.patch(f"/{kind}s/{id_}", {"data": {"type": kind, "attributes": {"ref_numbers": refs}}})
        result.status, result.http_status = PATCHED, 200
    except ApiError as exc:
        result.http_status, result.errors = exc.status, [error_summary(exc)]
    if store is not None and result.status in (PATCHED, FAILED):
        store.audit(f"patch_{kind}_ref_numbers", f"{kind}:{id_}", result.status, http_status=result.http_status,
                    error="; ".join(result.errors) or None)
    return result
