"""Add (or, asked to, set) ref_numbers on shipments and containers, addressed by id or by number.

Rows name their target by `shipment_id` / `container_id`, or by `container_number` /
`bill_of_lading_number` (resolved to an id through the loaded warehouse tables
`ocean_tracking.containers.number` and `ocean_tracking.shipments.bill_of_lading_number`; the warehouse is
used for nothing else). The columns are checked first (`REF_NUMBER_COLUMNS`): a missing or misnamed
`ref_numbers` column is an `InputError` before any request, never an empty list.

Nothing is erased that was not asked for: by default a row's numbers are ADDED to the target's current
list (order kept, a number already there is not added again); `replace=True` (`--replace`) sets exactly
the row's list; an empty list clears the list only with `replace=True` and `confirm_clear=True`
(`--confirm-clear`), otherwise the row is invalid. The current list comes from a GET of the target right
before its PATCH, never from the warehouse copy (which may be stale), so rows for the same target build on
each other. A row whose result equals the current list sends no PATCH (`unchanged`), so a rerun writes
nothing. A dry run sends the GETs, no PATCH, and reports each row's before → after. The API has no
conditional PATCH: a change someone makes between our GET and our PATCH of the same target is overwritten.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError, MalformedResponseError
from pipelines.journals.writes import WritebackStore, error_summary
from pipelines.settings import DATASET_NAME
from pipelines.writeback import (
    FIRST_ROW,
    REF_NUMBER_COLUMNS,
    cell,
    check_columns,
    is_uuid,
    resolve_in_warehouse,
    split_list,
)

PATCHED, UNCHANGED, WOULD_PATCH, INVALID, FAILED = "patched", "unchanged", "would_patch", "invalid", "failed"
NOT_DONE = {INVALID, FAILED}  # a batch with one of these rows did not fully succeed


@dataclass
class PatchResult:
    """What happened to one row (numbered from `FIRST_ROW`): `before` is the target's list as the GET
    returned it (None when not read), `ref_numbers` the list set or to be set (for an invalid row, the list the row gave)."""

    row_index: int
    kind: str | None
    target_id: str | None
    ref_numbers: list[str]
    status: str
    http_status: int | None = None
    errors: list[str] = field(default_factory=list)
    before: list[str] | None = None


@dataclass
class PatchReport:
    """Per-row results plus counts per status."""

    results: list[PatchResult]

    @property
    def counts(self) -> dict[str, int]:
        """How many rows ended in each status."""
        return dict(Counter(r.status for r in self.results))


def resolve_target(row: Mapping[str, Any], con: duckdb.DuckDBPyConnection | None, *,
                   dataset: str = DATASET_NAME) -> tuple[str, str] | str:
    """(kind, id) of the row's target, or a problem text. Ids are taken as given; numbers are looked up
    in the warehouse, in the account's `dataset` (a number it does not know is reported, never guessed)."""
    for kind, id_column, number_columns in (
        ("shipment", "shipment_id", ("bill_of_lading_number", "bill_of_lading")),
        ("container", "container_id", ("container_number",)),
    ):
        ident = cell(row, id_column)
        if ident:
            return (kind, ident) if is_uuid(ident) else f"{id_column} {ident!r} is not a UUID"
        number = cell(row, *number_columns)
        if number:
            found = resolve_in_warehouse(con, kind, number, dataset)
            if found is None:
                return f"{kind} {number!r} is not in the warehouse (sync first, or give its id)"
            return kind, found[0]
    return "no target: give shipment_id, container_id, container_number or bill_of_lading_number"


def merge_refs(current: Sequence[str], given: Sequence[str], *, replace: bool = False) -> list[str]:
    """The list to set: `given` as it is with `replace`, else `current` followed by each given number
    that is not in it yet (order kept), so adding never drops or repeats a number."""
    if replace:
        return list(given)
    merged = list(current)
    for ref in given:
        if ref not in merged:
            merged.append(ref)
    return merged


def patch_ref_numbers(
    rows: Iterable[Mapping[str, Any]],
    client: OceanTrackingClient,
    store: WritebackStore | None,
    con: duckdb.DuckDBPyConnection | None,
    *,
    dry_run: bool = False,
    replace: bool = False,
    confirm_clear: bool = False,
    dataset: str = DATASET_NAME,
) -> PatchReport:
    """Add each row's ref_numbers to its target's current list (with `replace`, set exactly the row's
    list), sending a PATCH only when the list changes; `con` is the warehouse, used only to resolve numbers
    to ids in the account's `dataset` (`Account.dataset_name`). Every row is checked locally before the first request; wrong columns raise `InputError`."""
    rows = check_columns(rows, REF_NUMBER_COLUMNS)
    planned = [_plan(number, row, con, replace, confirm_clear, dataset)
               for number, row in enumerate(rows, FIRST_ROW)]
    return PatchReport([result if result.status == INVALID else _patch_one(result, client, store, replace, dry_run)
                        for result in planned])


def _plan(number: int, row: Mapping[str, Any], con: duckdb.DuckDBPyConnection | None, replace: bool,
          confirm_clear: bool, dataset: str) -> PatchResult:
    """Row `number`'s target and list, or the row as invalid; no request."""
    refs = split_list(row.get("ref_numbers"))
    target = resolve_target(row, con, dataset=dataset)
    if isinstance(target, str):
        return PatchResult(number, None, None, refs, INVALID, errors=[target])
    result = PatchResult(number, *target, refs, WOULD_PATCH)
    if not refs and not (replace and confirm_clear):
        result.status = INVALID
        result.errors = ["ref_numbers is empty: with --replace that would clear the list; add --confirm-clear "
                         "to clear it" if replace else
                         "ref_numbers is empty: nothing to add; to clear the list give --replace --confirm-clear"]
    return result


def _current_refs(client: OceanTrackingClient, kind: str, id_: str) -> list[str]:
    path = f"/{kind}s/{id_}"
    refs = ((client.get(path).get("data") or {}).get("attributes") or {}).get("ref_numbers")
    if refs is None:
        return []
    if not isinstance(refs, list):
        raise MalformedResponseError(f"ref_numbers is a {type(refs).__name__}, not a list", method="GET", path=path)
    return [str(r) for r in refs]


def _patch_one(result: PatchResult, client: OceanTrackingClient, store: WritebackStore | None, replace: bool,
               dry_run: bool) -> PatchResult:
    kind, id_ = result.kind, result.target_id
    try:
        result.before = _current_refs(client, kind, id_)
        result.ref_numbers = merge_refs(result.before, result.ref_numbers, replace=replace)
        if result.ref_numbers == result.before:
            result.status = UNCHANGED
        elif not dry_run:
            client.patch(f"/{kind}s/{id_}", {"data": {"type": kind, "attributes": {"ref_numbers": result.ref_numbers}}})
            result.status, result.http_status = PATCHED, 200
    except ApiError as exc:
        result.status, result.http_status, result.errors = FAILED, exc.status, [error_summary(exc)]
    if store is not None and not dry_run and result.status in (PATCHED, FAILED):
        store.audit(f"patch_{kind}_ref_numbers", f"{kind}:{id_}", result.status, http_status=result.http_status,
                    error="; ".join(result.errors) or None)
    return result
