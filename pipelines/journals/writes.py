"""The write-back journal: outcomes per row, the upload journal, the audit log. Its own SQLite file (WAL), or,
when `OCEAN_TRACKING_WRITEBACK_JOURNAL` is a PostgreSQL URL, its own schema `ocean_tracking_writeback` of that
database, so a batch in one pod and a rerun in another read one journal (`pipelines.journals`: the
same statements and semantics on both).

A named account has a journal of its own: its own file (`settings.writeback_journal_path(warehouse, account)`,
`writeback_journal_<account>.sqlite`) or its own schema in the database (`ocean_tracking_writeback_<account>`),
since the journal is the exactly-once record and another account's identical row is not done yet; its outcomes
are published into its own warehouse schema (`Account.writeback_schema`, `writeback_<account>`).

Everything a rerun needs to write exactly once lives here: an intent is recorded (and committed) before
every write that is not idempotent, its outcome after. A batch (`writeback_session`) is the journal's only
batch while it runs, on any host (`WritebackStore.batch`: a lock file beside a SQLite journal, a session
advisory lock on PostgreSQL): two processes given the same batch at once would otherwise both find a row
unsent and both send it, or settle the other's intent in flight as never sent. The journal is not the
analysts' warehouse, so a batch never holds the warehouse's write lock; `publish` copies the outcomes into
the warehouse's `writeback` schema for analysts, in one short transaction at the end of a batch (from
PostgreSQL too: the rows are read with psycopg2 and written the same way).

A SQLite journal is attached as the schema `writeback`, so the tables read the same there
(`writeback.audit_log`) as in the warehouse; bare table names (`rows("select ... from audit_log")`) read
either backend. Nothing stored is a secret: errors come from `ApiError` (which never carries headers or the
key); the only short-lived credential, a direct-upload URL, is kept just until its bytes are stored and then
cleared.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipelines.errors import ApiError, InputError
from pipelines.journals import is_server_location, open_backend
from pipelines.settings import (
    WRITEBACK_JOURNAL_ENV,
    WRITEBACK_SCHEMA,
    Account,
    writeback_journal_location,
    writeback_journal_path,
)
from pipelines.warehouse.store import WarehouseStore

SCHEMA = WRITEBACK_SCHEMA
ACCEPTED, PENDING, UNKNOWN = "accepted", "pending", "unknown"  # the outcomes that hold a number (`held_numbers`)
SINGLE_ACCOUNT = Account()  # the one account of a setup without accounts (the default argument)
POSTGRES_SCHEMA = "ocean_tracking_writeback"  # never `writeback`: the journal's database may hold a warehouse


def postgres_schema(account: Account | None = None) -> str:
    """The PostgreSQL schema of an account's journal (the one account's, or a named account's own
    `ocean_tracking_writeback_<account>`)."""
    return (account or Account()).suffixed(POSTGRES_SCHEMA)


# `{schema}`: where the journal's tables are (SQLite: the attached `writeback`; PostgreSQL: `postgres_schema(account)`)
_DDL = (
    """create table if not exists {schema}.audit_log (
        logged_at text not null, action text not null, target text not null, outcome text not null,
        http_status integer, error_summary text)""",
    """create table if not exists {schema}.tracking_request_outcomes (
        row_key text primary key, row_index integer, request_number text, request_type text,
        scac text, status text not null, tracking_request_id text, http_status integer,
        errors text, updated_at text not null, intent_at text)""",
    """create table if not exists {schema}.document_uploads (
        file_key text primary key, path text, name text, byte_size integer, checksum text,
        shipment_id text, container_id text, step text not null, blob_id text, signed_id text,
        upload_url text, upload_headers text, document_id text, last_error text,
        updated_at text not null, intent_at text)""",
)
HELD_NUMBERS_PER_QUERY = 500  # numbers in one `in (...)` list (SQLite allows 32,766 variables)
PUBLISHED_TABLES = ("audit_log", "tracking_request_outcomes", "document_uploads")
# never copied to the warehouse: a pending direct-upload URL is a short-lived credential
UNPUBLISHED_COLUMNS = {"upload_url", "upload_headers"}
INTEGER_COLUMNS = {"row_index", "http_status", "byte_size"}
TIME_COLUMNS = {"logged_at", "updated_at", "intent_at"}

UPLOAD_COLUMNS = (
    "file_key", "path", "name", "byte_size", "checksum", "shipment_id", "container_id", "step", "blob_id",
    "signed_id", "upload_url", "upload_headers", "document_id", "last_error", "intent_at",
)
TRACKING_COLUMNS = (
    "row_key", "row_index", "request_number", "request_type", "scac", "status", "tracking_request_id",
    "http_status", "errors", "intent_at",
)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def error_summary(error: BaseException) -> str:
    """One short line for an error: the ApiError text (pointers included), else the exception type+text."""
    text = str(error) if isinstance(error, ApiError) else f"{type(error).__name__}: {error}"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


def _dicts(cursor: Any) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


def _upsert(table: str, columns: Sequence[str], key: str, unless: str | None = None) -> str:
    """Insert a whole row, or replace every column of the row with the same `key` (both databases' spelling);
    with `unless`, a condition on the stored row (as `stored.<column>`), a row it holds for is left as it is."""
    updates = ", ".join(f"{c} = excluded.{c}" for c in columns if c != key)
    keep = f" where not ({unless})" if unless else ""
    return (f"insert into {table} as stored ({', '.join(columns)}) values ({', '.join('?' for _ in columns)}) "
            f"on conflict ({key}) do update set {updates}{keep}")


class WritebackStore:
    """Reads and writes the journal; every write is committed at once (a crash loses nothing recorded).

    `location` is a SQLite file or a PostgreSQL URL (default: `settings.writeback_journal_location(account=
    account)`); `account` is whose journal it is: on PostgreSQL its schema (`postgres_schema`), and the warehouse
    schema `publish` writes (`Account.writeback_schema`)."""

    def __init__(self, location: str | Path | None = None, *, timeout: float | None = None,
                 account: Account | None = None) -> None:
        self.account = account if account is not None else Account()
        location = location if location is not None else writeback_journal_location(account=self.account)
        self._db = open_backend(location, _DDL, what="write-back journal", setting=WRITEBACK_JOURNAL_ENV,
                                sqlite_schema=SCHEMA, postgres_schema=postgres_schema(self.account), timeout=timeout,
                                if_lost="rows it recorded could then be sent again")
        self.path: Path | None = self._db.path
        self._schema = self._db.schema

    def __repr__(self) -> str:
        return f"WritebackStore({self._db.describe()!r})"

    def close(self) -> None:
        """Close the journal."""
        self._db.close()

    def rows(self, sql: str, params: Sequence[Any] = ()) -> list[tuple]:
        """The rows of one query on the journal (`?` placeholders; bare table names read either backend): for
        checks and tests, which then read a SQLite and a PostgreSQL journal alike."""
        return self._db.execute(sql, params).fetchall()

    @contextmanager
    def batch(self, timeout: float | None = None) -> Iterator[None]:
        """Be the journal's one batch for the block, on any host (see the module docstring); waits (up to
        `timeout`, default the lock timeout, naming the holder) while another batch runs."""
        with self._db.exclusive("batch", f"the batch lock of the write-back journal {self._db.describe()}",
                                timeout=timeout):
            yield

    # ---- audit ------------------------------------------------------------------------------------

    def audit(
        self, action: str, target: str, outcome: str, *, http_status: int | None = None, error: str | None = None
    ) -> None:
        """Append one write (or reconciliation) to `writeback.audit_log`: who was touched, what came back."""
        self._db.execute(
            f"insert into {self._schema}.audit_log values (?, ?, ?, ?, ?, ?)",
            [_now(), action, target, outcome, http_status, error],
        )

    # ---- tracking requests ------------------------------------------------------------------------

    def tracking_outcome(self, row_key: str) -> dict[str, Any] | None:
        """The recorded outcome of a normalized row (by idempotency key), or None if never sent."""
        rows = _dicts(self._db.execute(
            f"select * from {self._schema}.tracking_request_outcomes where row_key = ?", [row_key]
        ))
        return rows[0] if rows else None

    def held_numbers(self, numbers: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """Of `numbers` ((request_type, request_number), a batch's), each → the outcome that says it must not
        be sent again: the row that created its tracking request (`accepted`), else an intent not settled yet
        (`pending`, `unknown`). Read once a batch, which the batch lock keeps every other batch out of; found
        by the number, not the key, so rows recorded under any key (a journal written when the key was a hash
        of the whole row) count. Only the batch's numbers are read, never the journal's whole history."""
        wanted = set(numbers)
        statuses = (ACCEPTED, PENDING, UNKNOWN)
        held: dict[tuple[str, str], dict[str, Any]] = {}
        requested = sorted({number for _, number in wanted})
        for start in range(0, len(requested), HELD_NUMBERS_PER_QUERY):
            chunk = requested[start:start + HELD_NUMBERS_PER_QUERY]
            records = _dicts(self._db.execute(
                f"select * from {self._schema}.tracking_request_outcomes where status in (?, ?, ?)"
                f" and request_number in ({', '.join('?' for _ in chunk)}) order by updated_at",
                [*statuses, *chunk],
            ))  # fmt: skip
            for record in records:
                number = (record["request_type"], record["request_number"])
                if number in wanted and (number not in held or record["status"] == ACCEPTED):
                    held[number] = record
        return held

    def tracking_outcomes_in(self, *statuses: str) -> list[dict[str, Any]]:
        """Every recorded row in one of `statuses` (e.g. the intents a crash left pending), oldest first."""
        marks = ", ".join("?" for _ in statuses)
        return _dicts(self._db.execute(
            f"select * from {self._schema}.tracking_request_outcomes where status in ({marks}) order by updated_at",
            list(statuses),
        ))

    def claimed_tracking_ids(self) -> set[str]:
        """Tracking request ids already attributed to some row (reconciliation never claims one twice)."""
        rows = self._db.execute(
            f"select tracking_request_id from {self._schema}.tracking_request_outcomes where tracking_request_id is not null"
        ).fetchall()
        return {r[0] for r in rows}

    def record_tracking_outcome(self, row: Mapping[str, Any], status: str, *, tracking_request_id: str | None = None,
                                http_status: int | None = None, errors: list[dict] | None = None,
                                intent_at: str | None = None) -> None:
        """Upsert the outcome of one row (keyed by its idempotency key); committed before this returns. An
        `accepted` outcome is final: the row that created a tracking request stays its record, whatever is
        recorded for the key after it."""
        values = [row["row_key"], row.get("row_index"), row.get("request_number"), row.get("request_type"),
                  row.get("scac"), status, tracking_request_id, http_status, json.dumps(errors or []), intent_at]
        self._db.execute(_upsert(f"{self._schema}.tracking_request_outcomes", [*TRACKING_COLUMNS, "updated_at"],
                                 "row_key", unless=f"stored.status = '{ACCEPTED}'"), [*values, _now()])

    # ---- document uploads -------------------------------------------------------------------------

    def upload(self, file_key: str) -> dict[str, Any] | None:
        """The journal entry of one file (by its key), or None if it was never started."""
        rows = _dicts(self._db.execute(f"select * from {self._schema}.document_uploads where file_key = ?", [file_key]))
        if not rows:
            return None
        entry = rows[0]
        entry["upload_headers"] = json.loads(entry["upload_headers"]) if entry["upload_headers"] else None
        return entry

    def uploads_at(self, *steps: str) -> list[dict[str, Any]]:
        """Every journal entry at one of `steps` (e.g. a document creation a crash left pending)."""
        marks = ", ".join("?" for _ in steps)
        keys = self._db.execute(
            f"select file_key from {self._schema}.document_uploads where step in ({marks}) order by updated_at",
            list(steps),
        ).fetchall()
        return [entry for (key,) in keys if (entry := self.upload(key)) is not None]

    def save_upload(self, entry: Mapping[str, Any]) -> None:
        """Upsert a journal entry (the whole row: step, ids, the pending URL or None); committed at once."""
        values = [entry.get(c) for c in UPLOAD_COLUMNS]
        headers_at = UPLOAD_COLUMNS.index("upload_headers")
        values[headers_at] = json.dumps(values[headers_at]) if values[headers_at] is not None else None
        self._db.execute(_upsert(f"{self._schema}.document_uploads", [*UPLOAD_COLUMNS, "updated_at"], "file_key"),
                         [*values, _now()])

    def claimed_document_ids(self) -> set[str]:
        """Document ids already attributed to some file (reconciliation never claims one twice)."""
        rows = self._db.execute(
            f"select document_id from {self._schema}.document_uploads where document_id is not null"
        ).fetchall()
        return {r[0] for r in rows}

    # ---- publishing -------------------------------------------------------------------------------

    def publish(self, warehouse: WarehouseStore) -> dict[str, int]:
        """Copy the journal's tables into the account's warehouse schema (`writeback`, a named account's
        `writeback_<account>`) for analysts (upload URLs left out), replacing the previous copy in one
        transaction; rows per table. Waits while another process writes the warehouse (see `pipelines.warehouse.locks`)."""
        tables = {}
        for name in PUBLISHED_TABLES:
            cursor = self._db.execute(f"select * from {self._schema}.{name}")
            columns = [d[0] for d in cursor.description if d[0] not in UNPUBLISHED_COLUMNS]
            rows = _dicts(cursor)
            schema = pa.schema([(c, pa.int64() if c in INTEGER_COLUMNS else pa.string()) for c in columns])
            tables[name] = pa.Table.from_pylist([{c: row[c] for c in columns} for row in rows], schema=schema)
        with warehouse.writing(), warehouse.connect() as con:
            con.begin()
            schema_name = self.account.writeback_schema
            con.execute(f"create schema if not exists {schema_name}")
            for name, table in tables.items():
                typed = ", ".join(
                    f"{c}::timestamptz as {c}" if c in TIME_COLUMNS else f"{c}::json as {c}" if c == "errors" else c
                    for c in table.column_names
                )
                con.register("journal_rows", table)
                con.execute(f"create or replace table {schema_name}.{name} as select {typed} from journal_rows")
                con.unregister("journal_rows")
            con.commit()
        return {name: table.num_rows for name, table in tables.items()}


def _journal_beside(warehouse: WarehouseStore, account: Account) -> Path:
    """The account's SQLite journal that goes with `warehouse` (the default account's is
    `warehouse.journal_path`)."""
    if account.name is None:
        return warehouse.journal_path
    return writeback_journal_path(warehouse.duckdb_file if not warehouse.is_lake else None, account)


@contextmanager
def writeback_session(
    warehouse: WarehouseStore, *, dry_run: bool, journal: str | Path | None = None, account: Account = SINGLE_ACCOUNT
) -> Iterator[tuple[duckdb.DuckDBPyConnection | None, WritebackStore]]:
    """The warehouse, read-only, for lookups (None before the first sync) and the journal (by default the
    configured PostgreSQL one, else the file that goes with the warehouse), for one batch, which holds the
    journal's batch lock (`WritebackStore.batch`; a dry run writes nothing and takes none); afterwards the
    journal's outcomes are published into the warehouse (not after a dry run). The CLI commands and the
    Dagster ops both run their batches inside one. `account` is whose batch it is: its own journal (file or
    PostgreSQL schema) and its own published schema (see the module docstring); lookups read its dataset
    (`account.dataset_name`)."""
    if journal is None:
        configured = writeback_journal_location(account=account)
        journal = configured if is_server_location(configured) else _journal_beside(warehouse, account)
    store = WritebackStore(journal, account=account)
    lookups = ExitStack()
    wrote_nothing = dry_run
    if not dry_run:
        try:
            lookups.enter_context(store.batch())
        except BaseException:  # another batch held it too long: nothing was done, nothing to publish
            store.close()
            raise
    try:
        session = lookups.enter_context(warehouse.connect(read_only=True)) if warehouse.exists() else None
        yield session, store
    except InputError:
        wrote_nothing = True  # refused before any request: nothing to publish
        raise
    finally:
        lookups.close()  # before publishing: one process cannot hold a DuckDB file read-only and read-write
        # (the batch lock is released with it: publishing copies whatever the journal holds then)
        try:
            if not wrote_nothing:
                store.publish(warehouse)
        finally:
            store.close()
