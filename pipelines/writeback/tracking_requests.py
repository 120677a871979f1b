"""Create tracking requests in bulk, exactly once per normalized row.

Per row: local validation (free) → skip when the row's idempotency key already has an `accepted`
outcome → for an `unknown` outcome (the connection failed after the POST was sent, or a 5xx) first look
for the request on the service (GET /tracking_requests?filter[request_number]=…) → POST. Every outcome
is stored in `writeback.tracking_request_outcomes` and every write in `writeback.audit_log`. The create
bucket is respected by the client's limiter (each attempt draws from `create_tracking_request`).
"""

from __future__ import annotations

import logging
from collections import Counter
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import (
    ApiError,
    MalformedResponseError,
    UpstreamError,
    ValidationError,
    WriteOutcomeUnknownError,
)
from pipelines.settings import PAGE_SIZE
from pipelines.writeback.inputs import TrackingRow, parse_tracking_rows
from pipelines.writeback.lookups import PartyResolver, fetch_carriers
from pipelines.writeback.store import WritebackStore, error_summary

logger = logging.getLogger(__name__)

ACCEPTED, REJECTED, INVALID, UNKNOWN, FAILED = "accepted", "rejected", "invalid", "unknown", "failed"
SKIPPED, WOULD_SEND = "skipped", "would_send"


@dataclass
class RowResult:
    """What happened to one input row."""

    row_index: int
    request_number: str
    row_key: str
    status: str
    tracking_request_id: str | None = None
    http_status: int | None = None
    errors: list[dict[str, Any]] = field(default_factory=list)


@dataclass
class BatchReport:
    """Per-row results plus counts per status."""

    results: list[RowResult]

    @property
    def counts(self) -> dict[str, int]:
        """How many rows ended in each status."""
        return dict(Counter(r.status for r in self.results))


def _api_errors(exc: ApiError) -> list[dict[str, Any]]:
    """The service's error objects as stored dicts: pointer, column (last pointer segment), detail, code."""
    out = []
    for e in exc.errors:
        pointer = e.pointer or (f"parameter {e.parameter}" if e.parameter else None)
        out.append({"pointer": pointer, "column": (e.pointer or "").rsplit("/", 1)[-1] or None,
                    "detail": e.detail or e.title, "code": e.code})
    return out or [{"pointer": None, "column": None, "detail": error_summary(exc), "code": None}]


def _matches(found: Mapping[str, Any], row: TrackingRow, customer_id: str | None) -> bool:
    attrs = found.get("attributes") or {}
    if (attrs.get("request_type") or row.request_type) != row.request_type:
        return False
    if row.scac and (attrs.get("scac") or row.scac).upper() != row.scac:
        return False
    refs = attrs.get("ref_numbers") or []
    if row.ref_numbers and refs and sorted(refs) != sorted(row.ref_numbers):
        return False
    customer = (((found.get("relationships") or {}).get("customer") or {}).get("data") or {}).get("id")
    return not (customer_id and customer and customer != customer_id)


def reconcile(client: OceanTrackingClient, row: TrackingRow, customer_id: str | None,
              claimed: set[str]) -> str | None:
    """The id of a tracking request on the service that this row already created (not yet attributed to
    another row), found by listing its request_number; None when there is none."""
    params = {"filter[request_number]": row.request_number, "page[size]": PAGE_SIZE}
    for page in client.paginate("/tracking_requests", params):
        for found in page.get("data") or []:
            if found.get("id") not in claimed and _matches(found, row, customer_id):
                return found["id"]
    return None


def create_tracking_requests(
    rows: Iterable[Mapping[str, Any]],
    client: OceanTrackingClient,
    store: WritebackStore | None,
    *,
    dry_run: bool = False,
) -> BatchReport:
    """Validate, then create each valid row's tracking request once; returns per-row results.

    In a dry run only reads are sent (shipping lines, parties), nothing is written to the service or
    to the outcome tables, and valid rows are reported as `would_send`.
    """
    parsed = parse_tracking_rows(rows, fetch_carriers(client))
    parties = PartyResolver(client, store, dry_run=dry_run)
    claimed = store.claimed_tracking_ids() if store is not None else set()
    results = []
    for row in parsed:
        result = _one(row, client, store, parties, claimed, dry_run)
        logger.info("row %d %s: %s", row.row_index, row.request_number, result.status)
        results.append(result)
    return BatchReport(results)


def _one(row: TrackingRow, client: OceanTrackingClient, store: WritebackStore | None, parties: PartyResolver,
         claimed: set[str], dry_run: bool) -> RowResult:
    result = RowResult(row.row_index, row.request_number, row.row_key, INVALID, errors=list(row.problems))
    if row.problems:
        if store is not None and not dry_run:
            store.record_tracking_outcome(row.as_record(), INVALID, errors=row.problems)
        return result
    previous = store.tracking_outcome(row.row_key) if store is not None else None
    if previous and previous["status"] == ACCEPTED:
        result.status, result.tracking_request_id = SKIPPED, previous["tracking_request_id"]
        return result
    try:
        customer_id = row.customer_id or (parties.resolve(row.customer_name) if row.customer_name else None)
    except ApiError as exc:
        result.status, result.http_status, result.errors = FAILED, exc.status, _api_errors(exc)
        _record(store, row, result, dry_run)
        return result
    if dry_run:
        result.status = WOULD_SEND
        return result
    target = f"tracking_request:{row.request_type}:{row.request_number}"
    if previous and previous["status"] == UNKNOWN:
        try:
            found = reconcile(client, row, customer_id, claimed)
        except ApiError as exc:
            result.status, result.http_status, result.errors = UNKNOWN, exc.status, _api_errors(exc)
            return result
        store.audit("reconcile_tracking_request", target, "found" if found else "absent", http_status=200)
        if found:
            claimed.add(found)
            result.status, result.tracking_request_id = ACCEPTED, found
            _record(store, row, result, dry_run)
            return result
    body: dict[str, Any] = {"data": {"type": "tracking_request", "attributes": row.attributes()}}
    if customer_id:
        body["data"]["relationships"] = {"customer": {"data": {"id": customer_id, "type": "party"}}}
    try:
        document = client.post("/tracking_requests", body)
    except ValidationError as exc:
        result.status, result.http_status, result.errors = REJECTED, exc.status, _api_errors(exc)
    except (WriteOutcomeUnknownError, UpstreamError, MalformedResponseError) as exc:
        # the request may have been applied: never re-POST before reconciling (next run does it)
        result.status, result.http_status, result.errors = UNKNOWN, exc.status, _api_errors(exc)
    except ApiError as exc:
        result.status, result.http_status, result.errors = FAILED, exc.status, _api_errors(exc)
    else:
        result.status, result.http_status = ACCEPTED, 201
        result.tracking_request_id = ((document or {}).get("data") or {}).get("id")
        if result.tracking_request_id:
            claimed.add(result.tracking_request_id)
    if store is not None:
        summary = "; ".join(f"{e.get('pointer') or ''} {e.get('detail')}".strip() for e in result.errors) or None
        store.audit("create_tracking_request", target, result.status, http_status=result.http_status, error=summary)
    _record(store, row, result, dry_run)
    return result


def _record(store: WritebackStore | None, row: TrackingRow, result: RowResult, dry_run: bool) -> None:
    if store is not None and not dry_run:
        store.record_tracking_outcome(row.as_record(), result.status, tracking_request_id=result.tracking_request_id,
                                      http_status=result.http_status, errors=result.errors)
