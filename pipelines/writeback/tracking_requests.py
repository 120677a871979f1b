"""Create tracking requests in bulk, exactly once per number, across batches, hosts and crashes.

A number is what the service tracks once: the request type and the number as the service normalises it
(`TrackingRow.number`: case and spaces do not matter). Whatever else a row says, a number the journal says
was created (`accepted`, by any earlier batch, on any host sharing the journal) is `skipped`, and the
journal keeps the row that created it: that outcome is final. A second row with the same number in one
batch is reported `invalid` (a duplicate of the first) and recorded nowhere; an invalid row is recorded
only when its number was never created nor is waiting to be settled.

Per row: local validation (free) → skip when the number already has an `accepted` outcome → record the
intent (`pending`, stamped with the service's clock) and commit it → POST → record the outcome. A run killed between the intent and the outcome leaves the row `pending`; a POST whose answer
was lost (dropped connection, 5xx) leaves it `unknown`. Before sending anything new, every batch settles
those: it lists the tracking requests with the row's number and SCAC created since the intent
(`filter[request_number]`, `filter[scac]`, `filter[created_at][start]`, which the service offers) and
claims the one found; when there is none the POST never took effect and the row is sent again. The same
settling runs once more at the end of a batch, so a lost answer does not stay `unknown`.

Every outcome is stored in the journal (`writeback.tracking_request_outcomes`) and every write and
reconciliation in `writeback.audit_log`. The create bucket is respected by the client's limiter (each
attempt draws from `create_tracking_request`).

A row is normalized and checked locally (`parse_tracking_rows`), before any request: so a bad row costs nothing
from the create bucket. The checks: a blank number, an unknown request_type, the SCAC's shape, a known carrier
and its support for the request type, the ISO 6346 check digit of container numbers, and a number given twice
in the batch (`TrackingRow.number`: what the service tracks once). """

from __future__ import annotations

import hashlib
import json
import logging
import re
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
from pipelines.journals.writes import ACCEPTED, PENDING, UNKNOWN, WritebackStore, error_summary
from pipelines.settings import PAGE_SIZE
from pipelines.writeback import (
    FIRST_ROW,
    INTENT_MARGIN,
    TRACKING_REQUEST_COLUMNS,
    PartyResolver,
    cell,
    check_columns,
    fetch_carriers,
    is_uuid,
    row_name,
    split_list,
)

logger = logging.getLogger(__name__)

REJECTED, INVALID, FAILED = "rejected", "invalid", "failed"
ABSENT = "absent"  # an intent settled: never created (PENDING: intent recorded, outcome not known yet)
UNSETTLED = (PENDING, UNKNOWN)
SKIPPED, WOULD_SEND = "skipped", "would_send"
NOT_DONE = {INVALID, REJECTED, UNKNOWN, FAILED}  # a batch with one of these rows did not fully succeed

REQUEST_TYPES = ("bill_of_lading", "booking_number", "container")
SUPPORT_FLAG = {
    "bill_of_lading": "bill_of_lading_tracking_support",
    "booking_number": "booking_number_tracking_support",
    "container": "container_number_tracking_support",
}
_SCAC = re.compile(r"[A-Z]{2,4}")


def iso6346_valid(number: str) -> bool:
    """True when `number` is 4 letters + 7 digits whose last digit is the ISO 6346 check digit."""
    number = number.upper()
    if len(number) != 11 or not number[:4].isalpha() or not number[4:].isdigit():
        return False
    values, n = {}, 10
    for letter in "ABCDEFGHIJKLMNOPQRSTUVWXYZ":
        if n % 11 == 0:
            n += 1
        values[letter] = n
        n += 1
    total = sum((values[ch] if ch.isalpha() else int(ch)) * (2**i) for i, ch in enumerate(number[:10]))
    return total % 11 % 10 == int(number[10])


def normalize_number(number: str, request_type: str) -> str:
    """Upper case, spaces removed (and dashes too for container numbers, as the service does)."""
    text = "".join(number.split()).upper()
    return text.replace("-", "") if request_type == "container" else text


@dataclass
class TrackingRow:
    """One normalized tracking-request row (numbered from `FIRST_ROW`), its idempotency key and local
    problems; `duplicate_of` is the earlier row of this batch with the same number, if any."""

    row_index: int
    request_number: str
    request_type: str
    scac: str | None
    ref_numbers: list[str]
    shipment_tags: list[str]
    customer_id: str | None
    customer_name: str | None
    problems: list[dict[str, str]] = field(default_factory=list)
    duplicate_of: int | None = None

    @property
    def number(self) -> tuple[str, str]:
        """What the service tracks once: the request type and the number as the service normalises it
        (case, spaces). Whatever else a row says (SCAC, ref_numbers, tags, customer) names the same
        tracking request, so a second row with this number, in the batch or in a later one, creates nothing."""
        return self.request_type, self.request_number

    @property
    def row_key(self) -> str:
        """Idempotency key, the journal's key of the number's outcome: sha256 of `number`."""
        payload = json.dumps(list(self.number), separators=(",", ":"))
        return hashlib.sha256(payload.encode()).hexdigest()[:32]

    def as_record(self) -> dict[str, Any]:
        """The fields stored with an outcome."""
        return {"row_key": self.row_key, "row_index": self.row_index, "request_number": self.request_number,
                "request_type": self.request_type, "scac": self.scac}

    def attributes(self) -> dict[str, Any]:
        """The `attributes` of the POST /tracking_requests body (auto-detect when the SCAC is blank)."""
        attrs: dict[str, Any] = {"request_type": self.request_type, "request_number": self.request_number}
        if self.scac:
            attrs["scac"] = self.scac
        else:
            attrs["auto_detect_vocc_scac"] = True
        if self.ref_numbers:
            attrs["ref_numbers"] = self.ref_numbers
        if self.shipment_tags:
            attrs["shipment_tags"] = self.shipment_tags
        return attrs


def _problem(column: str, detail: str, code: str) -> dict[str, str]:
    return {"column": column, "pointer": f"/data/attributes/{column}", "detail": detail, "code": code}


def parse_tracking_rows(
    rows: Iterable[Mapping[str, Any]], carriers: Mapping[str, Mapping[str, Any]] | None
) -> list[TrackingRow]:
    """Normalize and validate rows, numbered from `FIRST_ROW`; `carriers` maps SCAC (and alternative SCACs)
    to shipping-line attributes (from GET /shipping_lines), or None to check only the SCAC's shape. A row
    whose `number` an earlier row of the batch has is a `duplicate` of that row. Raises InputError when the
    columns are not those of `TRACKING_REQUEST_COLUMNS` (a misnamed column would be read as blank)."""
    rows = check_columns(rows, TRACKING_REQUEST_COLUMNS)
    parsed: list[TrackingRow] = []
    first_with: dict[tuple[str, str], int] = {}
    for index, raw in enumerate(rows, FIRST_ROW):
        rtype = cell(raw, "request_type").lower()
        number = normalize_number(cell(raw, "request_number"), rtype)
        scac = cell(raw, "scac").upper() or None
        customer = cell(raw, "customer")
        customer_id = cell(raw, "customer_id") or (customer if is_uuid(customer) else "")
        customer_name = cell(raw, "customer_name", "customer_company_name") or (
            customer if customer and not is_uuid(customer) else "")
        row = TrackingRow(index, number, rtype, scac, split_list(raw.get("ref_numbers")),
                          split_list(raw.get("shipment_tags")), customer_id or None, customer_name or None)
        if not number:
            row.problems.append(_problem("request_number", "Request number can't be blank", "blank"))
        if rtype not in REQUEST_TYPES:
            row.problems.append(_problem("request_type", f"Request type '{rtype}' is not one of "
                                         f"{', '.join(REQUEST_TYPES)}", "inclusion"))
        if scac is not None:
            row.problems += _scac_problems(scac, rtype, carriers)
        if rtype == "container" and number and not iso6346_valid(number):
            row.problems.append(_problem("request_number", f"'{number}' is not a container number with a valid "
                                         "ISO 6346 check digit", "check_digit"))
        if customer_id and not is_uuid(customer_id):
            row.problems.append({"column": "customer_id", "pointer": "/data/relationships/customer",
                                 "detail": "customer_id must be a party UUID", "code": "invalid"})
        if number and row.number in first_with:
            row.duplicate_of = first_with[row.number]
            row.problems.append(_problem("request_number", f"duplicate of {row_name(rows, row.duplicate_of)} in "
                                         "this batch", "duplicate"))
        elif number:
            first_with[row.number] = index
        parsed.append(row)
    return parsed


def _scac_problems(scac: str, rtype: str, carriers: Mapping[str, Mapping[str, Any]] | None) -> list[dict]:
    if not _SCAC.fullmatch(scac):
        return [_problem("scac", f"Scac '{scac}' is not 2-4 letters", "invalid")]
    if carriers is None:
        return []
    line = carriers.get(scac)
    if line is None:
        return [_problem("scac", f"Scac '{scac}' is not a known shipping line", "not_recognized")]
    flag = SUPPORT_FLAG.get(rtype)
    if flag and line.get(flag) is False:
        return [_problem("scac", f"Scac '{scac}' does not support {rtype} tracking", "not_supported")]
    return []


@dataclass
class RowResult:
    """What happened to one input row (numbered from `FIRST_ROW`)."""

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


def intent_stamp(client: OceanTrackingClient) -> str | None:
    """When an intent is recorded, in the service's clock (its latest `Date`, less a second); None before
    the service has answered anything (reconciling then cannot bound by creation time)."""
    seen = client.server_time()
    return (seen - INTENT_MARGIN).isoformat() if seen is not None else None


def reconcile(client: OceanTrackingClient, record: Mapping[str, Any], claimed: set[str]) -> str | None:
    """The id of the tracking request an earlier intent of this row created, or None when it created none.

    Looks only at requests with the row's number, type and SCAC created at or after the intent, and never
    at one already attributed to another row: someone else's earlier request is never claimed."""
    params = {"filter[request_number]": record["request_number"], "page[size]": PAGE_SIZE}
    if record.get("scac"):
        params["filter[scac]"] = record["scac"]
    if record.get("intent_at"):
        params["filter[created_at][start]"] = record["intent_at"]
    for page in client.paginate("/tracking_requests", params):
        for found in page.get("data") or []:
            attrs = found.get("attributes") or {}
            if (
                found.get("id") not in claimed
                and attrs.get("request_type", record["request_type"]) == record["request_type"]
                and (not record.get("scac") or (attrs.get("scac") or record["scac"]).upper() == record["scac"])
            ):
                return found["id"]
    return None


def settle_pending(client: OceanTrackingClient, store: WritebackStore, claimed: set[str]) -> dict[str, str]:
    """Settle every row a crash or a lost answer left `pending` or `unknown`: `accepted` with the request
    found on the service, else `absent` (safe to send again). Returns the new status per row key; a row
    whose reconciliation failed keeps its status and is not sent."""
    settled = {}
    for record in store.tracking_outcomes_in(*UNSETTLED):
        target = f"tracking_request:{record['request_type']}:{record['request_number']}"
        try:
            found = reconcile(client, record, claimed)
        except ApiError as exc:
            store.audit("reconcile_tracking_request", target, FAILED, http_status=exc.status, error=error_summary(exc))
            continue
        store.audit("reconcile_tracking_request", target, "found" if found else "absent", http_status=200)
        status = ACCEPTED if found else ABSENT
        if found:
            claimed.add(found)
        store.record_tracking_outcome(record, status, tracking_request_id=found, http_status=record["http_status"],
                                      errors=json.loads(record["errors"] or "[]"), intent_at=record["intent_at"])
        settled[record["row_key"]] = status
    return settled


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
    if store is not None and not dry_run:
        settle_pending(client, store, claimed)
    held = store.held_numbers(row.number for row in parsed) if store is not None else {}
    results = []
    for row in parsed:
        result = _one(row, client, store, parties, claimed, held.get(row.number), dry_run)
        logger.info("row %d %s: %s", row.row_index, row.request_number, result.status)
        results.append(result)
    if store is not None and not dry_run and any(r.status == UNKNOWN for r in results):
        settled = settle_pending(client, store, claimed)
        for result in (r for r in results if r.status == UNKNOWN):
            if settled.get(result.row_key) == ACCEPTED:
                outcome = store.tracking_outcome(result.row_key) or {}
                result.status, result.tracking_request_id = ACCEPTED, outcome.get("tracking_request_id")
            elif settled.get(result.row_key) == ABSENT:
                result.status = FAILED  # the service holds nothing for it: a rerun sends it again
    return BatchReport(results)


def _one(row: TrackingRow, client: OceanTrackingClient, store: WritebackStore | None, parties: PartyResolver,
         claimed: set[str], previous: Mapping[str, Any] | None, dry_run: bool) -> RowResult:
    """One row: `previous` is the journal's outcome that holds its number (`WritebackStore.held_numbers`)."""
    result = RowResult(row.row_index, row.request_number, row.row_key, INVALID, errors=list(row.problems))
    if row.duplicate_of is not None:
        return result  # reported, never recorded: the journal's record of the number is its first row's
    if row.problems:
        if store is not None and not dry_run and previous is None:  # never over a created or unsettled number
            store.record_tracking_outcome(row.as_record(), INVALID, errors=row.problems)
        return result
    if previous and previous["status"] == ACCEPTED:
        result.status, result.tracking_request_id = SKIPPED, previous["tracking_request_id"]
        return result
    if previous and previous["status"] in UNSETTLED:
        # its earlier intent could not be reconciled (the service did not answer): sending could duplicate
        result.status = UNKNOWN
        result.errors = [{"pointer": None, "column": None, "code": "unsettled",
                          "detail": "an earlier attempt may have created it and the service could not be asked; "
                                    "run the batch again to reconcile before anything is re-sent"}]
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
    intent_at = intent_stamp(client)
    if store is not None:
        store.record_tracking_outcome(row.as_record(), PENDING, intent_at=intent_at)
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
    _record(store, row, result, dry_run, intent_at=intent_at)
    return result


def _record(store: WritebackStore | None, row: TrackingRow, result: RowResult, dry_run: bool,
            intent_at: str | None = None) -> None:
    if store is not None and not dry_run:
        store.record_tracking_outcome(row.as_record(), result.status, tracking_request_id=result.tracking_request_id,
                                      http_status=result.http_status, errors=result.errors, intent_at=intent_at)
