"""Write-back: create tracking requests (`tracking_requests`), patch ref_numbers (`ref_numbers`), upload
documents (`documents`), each journaled (`pipelines.journals.writes`). Here, what every batch reads: its input rows, and the
lookups it needs once.

Input rows: a CSV file or a DuckDB table, checked against the columns its command expects, before any
request is sent; and the helpers that read a row's cells.

Reading (`read_rows`) refuses a bad input with one `InputError` whose message is a single line naming the
file, the line and the column where that applies, and what to do: a missing file, a folder, a file that is
not UTF-8 text (binary, Latin-1), an empty file, a first line that is not the expected header (a column
missing, misnamed, duplicated or not expected: a README given as the CSV fails here), a malformed CSV line,
a line with more or fewer fields than the header (e.g. an unquoted comma), a field over 128 KB (Python's
`csv.field_size_limit`), and values a spreadsheet would run as a formula (`looks_like_formula`) unless
`allow_formulas=True` (`--allow-formulas`). A DuckDB table goes through the same column and formula checks.

The CSV format is RFC 4180: comma-separated, one header line, a field containing commas, quotes or line
breaks enclosed in double quotes with any quote inside doubled, UTF-8 (a byte order mark is fine). Header
names are case-sensitive. A list inside one cell (`ref_numbers`, `shipment_tags`) is separated by `;`
(`PO-1;PO-2`) or written as a JSON list (`["PO-1", "PO-2"]`); a DuckDB LIST column is taken as it is.

Rows are numbered from `FIRST_ROW`, 1, the first row below the header: row N is line N+1 of a CSV file
(later, when a blank line or a quoted line break comes before it; messages then name the line too) and row
N of a table. Results, the journal's `row_index` and every message use that one numbering.

A tracking-request row's normalization and local checks are in `tracking_requests`.

Lookups (`fetch_carriers`, `PartyResolver`, `resolve_in_warehouse`): shipping lines (GET /shipping_lines),
parties (GET /parties, POST when missing) and warehouse ids for container / bill of lading numbers.
"""

from __future__ import annotations

import codecs
import csv
import difflib
import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path
from typing import IO, Any

import duckdb

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError, InputError, WriteOutcomeUnknownError
from pipelines.journals.writes import WritebackStore, error_summary
from pipelines.settings import DATASET_NAME, PAGE_SIZE

LIST_SEPARATOR = ";"
_UUID = re.compile(r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}")
_TABLE = re.compile(r"[A-Za-z_][A-Za-z0-9_]*(\.[A-Za-z_][A-Za-z0-9_]*)?")
_SNIFF_BYTES = 8192
#: the number of the first row below the header (see the module docstring)
FIRST_ROW = 1
# The service's Date has whole seconds: an intent is stamped a second early so nothing created after it is
# missed; anything earlier is someone else's write and is never claimed.
INTENT_MARGIN = timedelta(seconds=1)
ROW_NUMBERING = (f"rows are numbered from {FIRST_ROW}: row {FIRST_ROW} is the first row below the header (line "
                 f"{FIRST_ROW + 1} of a CSV file)")


class Rfc4180(csv.Dialect):
    """RFC 4180 CSV, strictly: a stray quote or an unclosed quoted field is an error, not a guess."""

    delimiter = ","
    quotechar = '"'
    doublequote = True
    escapechar = None
    skipinitialspace = False
    lineterminator = "\r\n"
    quoting = csv.QUOTE_MINIMAL
    strict = True


@dataclass(frozen=True)
class Columns:
    """The header one kind of input must have. Each `required` entry is a group of alternative names, at
    least one of which must be a column; `optional` names may be columns; any other column is an error
    (an ignored misnamed column would, for ref_numbers, have erased data). `lists` are the columns that
    hold a list in one cell."""

    what: str
    required: tuple[tuple[str, ...], ...]
    optional: tuple[str, ...] = ()
    lists: tuple[str, ...] = ()

    @property
    def names(self) -> tuple[str, ...]:
        """Every accepted column name, required ones first."""
        return tuple(dict.fromkeys([*(n for group in self.required for n in group), *self.optional]))

    @property
    def only_optional(self) -> tuple[str, ...]:
        """The optional names that are not also an alternative of a required group."""
        return tuple(n for n in self.optional if not any(n in group for group in self.required))

    def describe(self) -> str:
        """The expected header in words, for error messages."""
        text = f"expected header: {self._required()} (required)"
        if self.only_optional:
            text += f", {', '.join(self.only_optional)} (optional)"
        if self.lists:
            text += f"; {self._list_rule()}"
        return text

    def help(self) -> str:
        """The columns for a command's --help, a fact a line: required, optional, and how a list in one cell
        is written."""
        lines = ["columns of the header line (names are case-sensitive):", f"  required: {self._required()}"]
        if self.only_optional:
            lines.append(f"  optional: {', '.join(self.only_optional)}")
        if self.lists:
            lines.append(f"  {self._list_rule()}")
        return "\n".join(lines)

    def _required(self) -> str:
        return ", ".join(group[0] if len(group) == 1 else "one or more of " + "|".join(group)
                         for group in self.required)

    def _list_rule(self) -> str:
        return (f"a list in one cell ({', '.join(self.lists)}) is separated by '{LIST_SEPARATOR}' "
                f"(PO-1{LIST_SEPARATOR}PO-2) or written as a JSON list")


TRACKING_REQUEST_COLUMNS = Columns(
    "tracking requests", (("request_number",), ("request_type",)),
    ("scac", "ref_numbers", "shipment_tags", "customer", "customer_id", "customer_name", "customer_company_name"),
    lists=("ref_numbers", "shipment_tags"),
)
_TARGETS = ("shipment_id", "container_id", "container_number", "bill_of_lading_number", "bill_of_lading")
REF_NUMBER_COLUMNS = Columns("ref numbers", (("ref_numbers",), _TARGETS), lists=("ref_numbers",))
#: the upload-documents manifest, as `documents.items_from_source` reads it
MANIFEST_COLUMNS = Columns("document manifest", (("file", "path"),), ("name", *_TARGETS))


class InputRows(list):
    """The rows of one input (dicts, column → value), plus its header, where the header is
    (`refs.csv line 1`, `table batch`), where each row came from (`refs.csv line 4`) and, for a CSV file,
    the line each row starts on."""

    def __init__(self, rows: Iterable[dict[str, Any]] = (), *, header: Sequence[str] = (),
                 header_place: str = "input", places: Sequence[str] = (), lines: Sequence[int] = ()) -> None:
        super().__init__(rows)
        self.header, self.header_place, self.places = list(header), header_place, list(places)
        self.lines = list(lines)


def row_name(rows: Sequence[Any], number: int) -> str:
    """How a message names row `number` (counted from `FIRST_ROW`) of `rows`: `row 2`, with its place when
    it came from a CSV file (`row 2 (refs.csv line 3)`): after a blank line or a quoted line break the line
    is not the row's number plus one."""
    if isinstance(rows, InputRows) and rows.lines:
        return f"row {number} ({rows.places[number - FIRST_ROW]})"
    return f"row {number}"


def read_rows(source: str | Path, con: duckdb.DuckDBPyConnection | None = None, *,
              columns: Columns | None = None, allow_formulas: bool = False) -> InputRows:
    """Rows of a CSV file (header line; every value a string) or of a DuckDB table `[schema.]name`.

    A path that exists is read as CSV; anything else must look like a table name and is read from `con`
    (the warehouse), so a batch can be prepared in SQL next to the synced data. With `columns`, the header
    is checked before any row is read; formula-like values are refused unless `allow_formulas`. Any
    problem raises `InputError` (see the module docstring), so a bad input never reaches the service.
    """
    path, label = Path(source), str(source)
    if path.is_dir():
        raise InputError(f"{label}: is a folder, not a CSV file; give the path of the CSV file")
    if path.is_file():
        rows = _read_csv(path, label, columns)
    elif path.exists():
        raise InputError(f"{label}: is not a regular file; give the path of a CSV file")
    else:
        rows = _read_table(label, con, columns)
    if not allow_formulas:
        _refuse_formulas(rows)
    return rows


def check_header(header: Sequence[str], columns: Columns, where: str) -> None:
    """Raise InputError when `header` is not what `columns` expects: a missing, misnamed (with a
    suggestion), duplicated, unnamed or unexpected column; `where` names the file and line (or table)."""
    names = [str(n) for n in header]
    known = set(columns.names)
    if names and not known & set(names):
        first = ",".join(names)
        hint = " (it looks ';'-separated: save it comma-separated)" if len(names) == 1 and ";" in first else ""
        raise InputError(f"{where}: not a {columns.what} CSV: the first line {_short(first, 60)} is not the "
                         f"header{hint}; {columns.describe()}")
    problems = []
    unnamed = [str(i) for i, n in enumerate(names, 1) if not n]
    if unnamed:
        problems.append(f"column {', '.join(unnamed)} has no name")
    duplicated = [n for n in dict.fromkeys(names) if n and names.count(n) > 1]
    if duplicated:
        problems.append(f"duplicate column {', '.join(duplicated)}")
    missing = [group for group in columns.required if not any(n in names for n in group)]
    unexpected = [n for n in dict.fromkeys(names) if n and n not in known]
    if unexpected:
        wanted = [n for group in missing for n in group]  # a misnamed column most likely meant a missing one
        problems.append("unexpected column " + ", ".join(_suggest(n, wanted, columns.names) for n in unexpected))
    if missing:
        problems.append(f"missing column {', '.join('|'.join(group) for group in missing)}")
    if problems:
        raise InputError(f"{where}: {'; '.join(problems)}; {columns.describe()}")


def check_columns(rows: Iterable[Mapping[str, Any]], columns: Columns) -> list[Mapping[str, Any]]:
    """The rows as a list, once their columns are what `columns` expects: the header of rows from
    `read_rows`, else every key any row has (rows built in code). Raises InputError otherwise."""
    if isinstance(rows, InputRows):
        check_header(rows.header, columns, rows.header_place)
        return rows
    listed = list(rows)
    if listed:
        check_header(list(dict.fromkeys(k for row in listed for k in row)), columns, "input rows")
    return listed


def _suggest(name: str, *candidates: Sequence[str]) -> str:
    """`name`, with the first close match among the candidate lists (tried in order) as a suggestion."""
    for known in candidates:
        folded = {k.casefold(): k for k in known}
        close = [folded[name.casefold()]] if name.casefold() in folded else difflib.get_close_matches(
            name, known, 1, 0.5)
        if close:
            return f"{name} (did you mean {close[0]}?)"
    return name


def _short(value: Any, limit: int = 40) -> str:
    text = str(value)
    return repr(text if len(text) <= limit else text[: limit - 1] + "…")


def _read_csv(path: Path, label: str, columns: Columns | None) -> InputRows:
    try:
        with path.open("rb") as raw:
            head = raw.read(_SNIFF_BYTES)
        if b"\0" in head:
            raise InputError(f"{label}: is a binary file, not CSV text (a spreadsheet, PDF or archive?); "
                             "export it as CSV (UTF-8)")
        with path.open(newline="", encoding="utf-8-sig") as handle:
            rows = _parse_csv(handle, label, columns)
    except UnicodeDecodeError:
        line, byte = _first_bad_byte(path)
        raise InputError(f"{label} line {line}: is not UTF-8 text (byte 0x{byte:02x}; Latin-1 or Windows-1252?); "
                         "save it as UTF-8 (Excel: 'CSV UTF-8')") from None
    except OSError as exc:
        raise InputError(f"{label}: cannot be read ({exc.strerror or exc}); check the path and its "
                         "permissions") from None
    if rows is None:
        expected = columns.describe() if columns else "expected a header line"
        raise InputError(f"{label}: the file is empty; {expected}")
    return rows


def _parse_csv(handle: IO[str], label: str, columns: Columns | None) -> InputRows | None:
    """The rows of an open CSV file, or None when it holds no header (empty or blank lines only)."""
    reader = csv.reader(handle, dialect=Rfc4180)
    rows: InputRows | None = None
    start = 1  # the line the next record starts on (a quoted field may span lines)
    try:
        for record in reader:
            line, start = start, reader.line_num + 1
            if not any(value.strip() for value in record):
                continue  # a blank line, or one of commas only
            if rows is None:
                header = [name.strip() for name in record]
                if columns is not None:
                    check_header(header, columns, f"{label} line {line}")
                rows = InputRows(header=header, header_place=f"{label} line {line}")
                continue
            if len(record) != len(rows.header):
                raise InputError(_field_count_problem(f"{label} line {line}", len(record), len(rows.header)))
            rows.append({k: v for k, v in zip(rows.header, record, strict=True) if k})
            rows.places.append(f"{label} line {line}")
            rows.lines.append(line)
    except csv.Error as exc:
        if "field larger than field limit" in str(exc):
            raise InputError(f"{label} line {start}: a field is over {csv.field_size_limit() // 1024} KB, the "
                             "limit; is a quote never closed? Enclose a field in double quotes only as a whole "
                             "and double any quote inside it") from None
        raise InputError(f"{label} line {start}: malformed CSV ({exc}); a field containing commas, quotes "
                         "or line breaks goes in double quotes as a whole, with any quote inside doubled "
                         '("say ""hi""")') from None
    return rows


def _field_count_problem(where: str, count: int, expected: int) -> str:
    if count > expected:
        return (f"{where}: {count} fields but the header has {expected} (fields from column {expected + 1} on "
                "have no column); is a value with a comma unquoted? Enclose it in double quotes (\"a,b\"); a "
                f"list in one cell is separated by '{LIST_SEPARATOR}' (PO-1{LIST_SEPARATOR}PO-2)")
    return (f"{where}: {count} fields but the header has {expected}; every line needs one field per "
            "column (leave a value empty as in a,,c)")


def _first_bad_byte(path: Path) -> tuple[int, int]:
    """(line, byte value) of the first byte that is not UTF-8; newline bytes never occur inside a UTF-8
    sequence, so decoding line by line finds the right line."""
    decoder = codecs.getincrementaldecoder("utf-8")()
    with path.open("rb") as handle:
        for line, data in enumerate(handle, 1):
            try:
                decoder.decode(data)
            except UnicodeDecodeError as exc:
                return line, data[exc.start]
    return 1, 0


def _read_table(name: str, con: duckdb.DuckDBPyConnection | None, columns: Columns | None) -> InputRows:
    schema, _, table = name.rpartition(".")
    # checked in the catalog first: for a name it does not know, DuckDB would scan a Python variable of
    # that name instead (replacement scans), e.g. `refs.csv` → this module's `csv`
    if con is None or not _TABLE.fullmatch(name) or not con.execute(
            "select count(*) from information_schema.tables where table_name = ? and table_schema = "
            "coalesce(nullif(?, ''), current_schema())", [table, schema]).fetchone()[0]:
        raise InputError(f"{name}: no such file, nor a table of that name in the warehouse; give the path of a "
                         "CSV file, or a [schema.]table in the warehouse")
    try:
        cursor = con.execute(f"select * from {name}")
    except duckdb.Error as exc:
        first = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
        raise InputError(f"table {name}: cannot be read ({first})") from None
    header = [d[0] for d in cursor.description]
    if columns is not None:
        check_header(header, columns, f"table {name}")
    rows = InputRows((dict(zip(header, row, strict=True)) for row in cursor.fetchall()), header=header,
                     header_place=f"table {name}")
    rows.places = [f"table {name} row {i}" for i in range(FIRST_ROW, FIRST_ROW + len(rows))]
    return rows


def looks_like_formula(value: str) -> bool:
    """True when a spreadsheet would run `value` as a formula once it is exported to a CSV and opened
    (CSV injection, after OWASP): it starts with a tab or a carriage return, or, leading spaces aside,
    with `=` or `@`, or with `+` or `-` not followed by a digit. So `-5`, `+1-555` and `2024-01` are plain
    values; `=HYPERLINK(…)`, `@SUM(…)`, `-cmd`, `+A1` and a lone `-` are refused."""
    if value[:1] in ("\t", "\r"):
        return True
    text = value.strip()
    if text[:1] in ("=", "@"):
        return True
    return text[:1] in ("+", "-") and not text[1:2].isdigit()


def _formula_values(value: Any) -> list[str]:
    """The strings of a cell a formula could hide in: the cell itself and each item of a list in it."""
    if isinstance(value, str):
        return [value, *split_list(value)] if value else []
    if isinstance(value, list | tuple):
        return [str(v) for v in value if v is not None]
    return []


def _refuse_formulas(rows: InputRows) -> None:
    found = [(place, name, text) for row, place in zip(rows, rows.places, strict=True)
             for name, value in row.items() for text in _formula_values(value) if looks_like_formula(text)]
    if not found:
        return
    place, name, text = found[0]
    places = list(dict.fromkeys(f"{p} column {n}" for p, n, _ in found))
    more = f" (also {', '.join(places[1:4])}{' and more' if len(places) > 4 else ''})" if len(places) > 1 else ""
    raise InputError(f"{place} column {name}: {_short(text)} would run as a formula in a spreadsheet{more}; "
                     "remove the leading = + - @ (or tab), or pass --allow-formulas to send such values as "
                     "they are")


def split_list(value: Any) -> list[str]:
    """A list in one cell → stripped, non-empty strings, order kept: `;`-separated text, a JSON list
    (`["a", "b"]`) or a list (DuckDB LIST). `;` is the one separator, so a comma stays part of a value."""
    if value is None:
        return []
    if isinstance(value, str):
        text = value.strip()
        if text.startswith("["):
            try:
                value = json.loads(text)
            except ValueError:
                value = text.split(LIST_SEPARATOR)
        else:
            value = text.split(LIST_SEPARATOR)
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


def fetch_carriers(client: OceanTrackingClient) -> dict[str, dict[str, Any]]:
    """SCAC (and every alternative SCAC) → shipping-line attributes, from one walk of GET /shipping_lines."""
    carriers: dict[str, dict[str, Any]] = {}
    for page in client.paginate("/shipping_lines"):
        for line in page.get("data") or []:
            attrs = line.get("attributes") or {}
            for scac in [attrs.get("scac"), *(attrs.get("alternative_scacs") or [])]:
                if scac:
                    carriers.setdefault(str(scac).upper(), attrs)
    return carriers


class PartyResolver:
    """Company name → party id: the party list is fetched once; a missing party is created (POST /parties)
    once per batch, and in a dry run only reported."""

    def __init__(self, client: OceanTrackingClient | None, store: WritebackStore | None, *, dry_run: bool) -> None:
        self.client, self.store, self.dry_run = client, store, dry_run
        self._by_name: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._by_name is None:
            self._by_name = {}
            if self.client is not None:
                for page in self.client.paginate("/parties", {"page[size]": PAGE_SIZE}):
                    for party in page.get("data") or []:
                        name = (party.get("attributes") or {}).get("company_name")
                        if name:
                            self._by_name.setdefault(name.strip().casefold(), party["id"])
        return self._by_name

    def resolve(self, company_name: str) -> str | None:
        """The party id for a company name, creating the party when needed (None in a dry run)."""
        key = company_name.strip().casefold()
        known = self._load()
        if key in known or self.dry_run or self.client is None:
            return known.get(key)
        body = {"data": {"type": "party", "attributes": {"company_name": company_name.strip()}}}
        target = f"party:{company_name.strip()}"
        try:
            document = self.client.post("/parties", body)
        except WriteOutcomeUnknownError as exc:
            # the party may exist now: list again before deciding to send a second POST
            self._audit("create_party", target, "unknown", exc)
            self._by_name = None
            if key in self._load():
                return self._by_name[key]  # type: ignore[index]
            document = self.client.post("/parties", body)
        except ApiError as exc:
            self._audit("create_party", target, "failed", exc)
            raise
        party_id = ((document or {}).get("data") or {}).get("id")
        known[key] = party_id
        if self.store is not None:
            self.store.audit("create_party", target, "created", http_status=201)
        return party_id

    def _audit(self, action: str, target: str, outcome: str, exc: ApiError) -> None:
        if self.store is not None:
            self.store.audit(action, target, outcome, http_status=exc.status, error=error_summary(exc))


def resolve_in_warehouse(
    con: duckdb.DuckDBPyConnection | None, kind: str, number: str, dataset: str = DATASET_NAME
) -> tuple[str, list[str] | None] | None:
    """(id, ref_numbers) of a container (by number) or shipment (by bill of lading number) in the loaded
    warehouse tables, or None when the table or the row is missing."""
    if con is None:
        return None
    table, column = ("containers", "number") if kind == "container" else ("shipments", "bill_of_lading_number")
    try:
        row = con.execute(
            f"select id, cast(ref_numbers as varchar) from {dataset}.{table} "
            f"where upper(replace({column}, ' ', '')) = ? order by id limit 1",
            ["".join(number.split()).upper()],
        ).fetchone()
    except duckdb.Error:
        return None
    return (row[0], _json_list(row[1])) if row else None


def _json_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else None
