"""A tracking-request row, normalized and checked locally (`parse_tracking_rows`), before any request: so a
bad row costs nothing from the create bucket. The checks: a blank number, an unknown request_type, the
SCAC's shape, a known carrier and its support for the request type, the ISO 6346 check digit of container
numbers, and a number given twice in the batch (`TrackingRow.number`: what the service tracks once).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.writeback.inputs import (
    FIRST_ROW,
    TRACKING_REQUEST_COLUMNS,
    cell,
    check_columns,
    is_uuid,
    row_name,
    split_list,
)

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
