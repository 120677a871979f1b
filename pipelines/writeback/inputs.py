"""Input rows for write-back: a CSV file or a DuckDB table, normalized and validated locally.

Local validation runs before any request so a bad row costs nothing from the create bucket: blank
number, unknown request_type, SCAC shape / known carrier / support for the request type, the ISO 6346
check digit of container numbers, and duplicates within the batch.
"""

from __future__ import annotations

import csv
import hashlib
import json
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb

REQUEST_TYPES = ("bill_of_lading", "booking_number", "container")
SUPPORT_FLAG = {
    "bill_of_lading": "bill_of_lading_tracking_support",
    "booking_number": "booking_number_tracking_support",
    "container": "container_number_tracking_support",
}
_SCAC = re.compile(r"[A-Z]{2,4}")
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")


def read_rows(source: str | Path, con: duckdb.DuckDBPyConnection | None = None) -> list[dict[str, Any]]:
    """Rows of a CSV file (header row; every value a string) or of a DuckDB table `[schema.]name`.

    A path that exists is read as CSV; anything else must look like a table name and is read from `con`
    (the warehouse), so a batch can be prepared in SQL next to the synced data.
    """
    path = Path(source)
    if path.is_file():
        with path.open(newline="", encoding="utf-8-sig") as handle:
            return [{k.strip(): (v or "") for k, v in row.items() if k} for row in csv.DictReader(handle)]
    text = str(source)
    if con is None or not _TABLE.fullmatch(text):
        raise FileNotFoundError(f"{text!r} is neither a CSV file nor a [schema.]table name")
    cur = con.execute(f"select * from {text}")
    names = [d[0] for d in cur.description]
    return [dict(zip(names, row, strict=True)) for row in cur.fetchall()]


def split_list(value: Any) -> list[str]:
    """A `;`-separated CSV cell or a list (DuckDB LIST/JSON) → stripped, non-empty strings, order kept."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = text.split(";")
        else:
            value = text.split(";")
    return [str(v).strip() for v in value if v is not None and str(v).strip()]


def cell(row: Mapping[str, Any], *names: str) -> str:
    """The first non-blank of several column names, stripped ('' when none)."""
    for name in names:
        value = row.get(name)
        if value is not None and str(value).strip():
            return str(value).strip()
    return ""


def is_uuid(text: str) -> bool:
    """True for a canonical UUID string (the service's ids)."""
    return bool(_UUID.fullmatch(text))


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
    """One normalized tracking-request row, its idempotency key and local problems."""

    row_index: int
    request_number: str
    request_type: str
    scac: str | None
    ref_numbers: list[str]
    shipment_tags: list[str]
    customer_id: str | None
    customer_name: str | None
    problems: list[dict[str, str]] = field(default_factory=list)

    @property
    def row_key(self) -> str:
        """Idempotency key: sha256 of the normalized row (same content → same key → never sent twice)."""
        payload = json.dumps(
            [self.request_type, self.request_number, self.scac or "", self.ref_numbers, self.shipment_tags,
             self.customer_id or "", (self.customer_name or "").casefold()],
            separators=(",", ":"),
        )
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
    """Normalize and validate rows; `carriers` maps SCAC (and alternative SCACs) to shipping-line
    attributes (from GET /shipping_lines), or None to check only the SCAC's shape."""
    parsed: list[TrackingRow] = []
    seen: dict[tuple[str, str, str], int] = {}
    for index, raw in enumerate(rows):
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
        identity = (rtype, number, scac or "")
        if number and identity in seen:
            row.problems.append(_problem("request_number", f"duplicate of row {seen[identity]} in this batch",
                                         "duplicate"))
        else:
            seen.setdefault(identity, index)
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
