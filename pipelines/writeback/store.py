"""The write-back journal: its own SQLite file (WAL), outcomes per row, the upload journal, the audit log.

Everything a rerun needs to write exactly once lives here: an intent is recorded (and committed) before
every write that is not idempotent, its outcome after. The journal is its own small file, not the
analysts' warehouse, so a batch never holds the warehouse's write lock; `publish` copies the outcomes into
the warehouse's `writeback` schema for analysts, in one short transaction at the end of a batch.

The journal file is attached as the schema `writeback`, so the tables read the same here
(`writeback.audit_log`) as in the warehouse. Nothing stored is a secret: errors come from `ApiError`
(which never carries headers or the key); the only short-lived credential, a direct-upload URL, is kept
just until its bytes are stored and then cleared.
"""

from __future__ import annotations

import json
import sqlite3
from collections.abc import Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa

from pipelines.errors import ApiError, InputError
from pipelines.settings import WRITEBACK_SCHEMA, writeback_journal_path
from pipelines.warehouse.journals import open_journal
from pipelines.warehouse.store import WarehouseStore

SCHEMA = WRITEBACK_SCHEMA

_DDL = (
    f"""create table if not exists {SCHEMA}.audit_log (
        logged_at text not null, action text not null, target text not null, outcome text not null,
        http_status integer, error_summary text)""",
    f"""create table if not exists {SCHEMA}.tracking_request_outcomes (
        row_key text primary key, row_index integer, request_number text, request_type text,
        scac text, status text not null, tracking_request_id text, http_status integer,
        errors text, updated_at text not null, intent_at text)""",
    f"""create table if not exists {SCHEMA}.document_uploads (
        file_key text primary key, path text, name text, byte_size integer, checksum text,
        shipment_id text, container_id text, step text not null, blob_id text, signed_id text,
        upload_url text, upload_headers text, document_id text, last_error text,
        updated_at text not null, intent_at text)""",
)
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


def _dicts(cursor: sqlite3.Cursor) -> list[dict[str, Any]]:
    names = [d[0] for d in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]


class WritebackStore:
    """Reads and writes the journal; every write is committed at once (a crash loses nothing recorded)."""

    def __init__(self, path: str | Path | None = None, *, timeout: float | None = None) -> None:
        self.path = Path(path) if path is not None else writeback_journal_path()
        self.con = open_journal(self.path, _DDL, what="write-back journal", schema=SCHEMA, timeout=timeout,
                                if_lost="rows it recorded could then be sent again")

    def close(self) -> None:
        """Close the journal file."""
        self.con.close()

    # ---- audit ------------------------------------------------------------------------------------

    def audit(
        self, action: str, target: str, outcome: str, *, http_status: int | None = None, error: str | None = None
    ) -> None:
        """Append one write (or reconciliation) to `writeback.audit_log`: who was touched, what came back."""
        self.con.execute(
            f"insert into {SCHEMA}.audit_log values (?, ?, ?, ?, ?, ?)",
            [_now(), action, target, outcome, http_status, error],
        )

    # ---- tracking requests ------------------------------------------------------------------------

    def tracking_outcome(self, row_key: str) -> dict[str, Any] | None:
        """The recorded outcome of a normalized row (by idempotency key), or None if never sent."""
        rows = _dicts(self.con.execute(
            f"select * from {SCHEMA}.tracking_request_outcomes where row_key = ?", [row_key]
        ))
        return rows[0] if rows else None

    def tracking_outcomes_in(self, *statuses: str) -> list[dict[str, Any]]:
        """Every recorded row in one of `statuses` (e.g. the intents a crash left pending), oldest first."""
        marks = ", ".join("?" for _ in statuses)
        return _dicts(self.con.execute(
            f"select * from {SCHEMA}.tracking_request_outcomes where status in ({marks}) order by updated_at",
            list(statuses),
        ))

    def claimed_tracking_ids(self) -> set[str]:
        """Tracking request ids already attributed to some row (reconciliation never claims one twice)."""
        rows = self.con.execute(
            f"select tracking_request_id from {SCHEMA}.tracking_request_outcomes where tracking_request_id is not null"
        ).fetchall()
        return {r[0] for r in rows}

    def record_tracking_outcome(self, row: Mapping[str, Any], status: str, *, tracking_request_id: str | None = None,
                                http_status: int | None = None, errors: list[dict] | None = None,
                                intent_at: str | None = None) -> None:
        """Upsert the outcome of one row (keyed by its idempotency key); committed before this returns."""
        values = [row["row_key"], row.get("row_index"), row.get("request_number"), row.get("request_type"),
                  row.get("scac"), status, tracking_request_id, http_status, json.dumps(errors or []), intent_at]
        marks = ", ".join("?" for _ in TRACKING_COLUMNS)
        self.con.execute(
            f"insert or replace into {SCHEMA}.tracking_request_outcomes ({', '.join(TRACKING_COLUMNS)}, updated_at)"
            f" values ({marks}, ?)",
            [*values, _now()],
        )

    # ---- document uploads -------------------------------------------------------------------------

    def upload(self, file_key: str) -> dict[str, Any] | None:
        """The journal entry of one file (by its key), or None if it was never started."""
        rows = _dicts(self.con.execute(f"select * from {SCHEMA}.document_uploads where file_key = ?", [file_key]))
        if not rows:
            return None
        entry = rows[0]
        entry["upload_headers"] = json.loads(entry["upload_headers"]) if entry["upload_headers"] else None
        return entry

    def uploads_at(self, *steps: str) -> list[dict[str, Any]]:
        """Every journal entry at one of `steps` (e.g. a document creation a crash left pending)."""
        marks = ", ".join("?" for _ in steps)
        keys = self.con.execute(
            f"select file_key from {SCHEMA}.document_uploads where step in ({marks}) order by updated_at", list(steps)
        ).fetchall()
        return [entry for (key,) in keys if (entry := self.upload(key)) is not None]

    def save_upload(self, entry: Mapping[str, Any]) -> None:
        """Upsert a journal entry (the whole row: step, ids, the pending URL or None); committed at once."""
        values = [entry.get(c) for c in UPLOAD_COLUMNS]
        headers_at = UPLOAD_COLUMNS.index("upload_headers")
        values[headers_at] = json.dumps(values[headers_at]) if values[headers_at] is not None else None
        marks = ", ".join("?" for _ in UPLOAD_COLUMNS)
        self.con.execute(
            f"insert or replace into {SCHEMA}.document_uploads ({', '.join(UPLOAD_COLUMNS)}, updated_at)"
            f" values ({marks}, ?)",
            [*values, _now()],
        )

    def claimed_document_ids(self) -> set[str]:
        """Document ids already attributed to some file (reconciliation never claims one twice)."""
        rows = self.con.execute(
            f"select document_id from {SCHEMA}.document_uploads where document_id is not null"
        ).fetchall()
        return {r[0] for r in rows}

    # ---- publishing -------------------------------------------------------------------------------

    def publish(self, warehouse: WarehouseStore) -> dict[str, int]:
        """Copy the journal's tables into the warehouse's `writeback` schema for analysts (upload URLs left
        out), replacing the previous copy in one transaction; rows per table. Waits while another process
        writes the warehouse (see `pipelines.warehouse.locks`)."""
        tables = {}
        for name in PUBLISHED_TABLES:
            rows = _dicts(self.con.execute(f"select * from {SCHEMA}.{name}"))
            columns = [d[1] for d in self.con.execute(f"pragma {SCHEMA}.table_info({name})").fetchall()
                       if d[1] not in UNPUBLISHED_COLUMNS]
            schema = pa.schema([(c, pa.int64() if c in INTEGER_COLUMNS else pa.string()) for c in columns])
            tables[name] = pa.Table.from_pylist([{c: row[c] for c in columns} for row in rows], schema=schema)
        with warehouse.writing(), warehouse.connect() as con:
            con.begin()
            con.execute(f"create schema if not exists {SCHEMA}")
            for name, table in tables.items():
                typed = ", ".join(
                    f"{c}::timestamptz as {c}" if c in TIME_COLUMNS else f"{c}::json as {c}" if c == "errors" else c
                    for c in table.column_names
                )
                con.register("journal_rows", table)
                con.execute(f"create or replace table {SCHEMA}.{name} as select {typed} from journal_rows")
                con.unregister("journal_rows")
            con.commit()
        return {name: table.num_rows for name, table in tables.items()}


@contextmanager
def writeback_session(
    warehouse: WarehouseStore, *, dry_run: bool, journal: str | Path | None = None
) -> Iterator[tuple[duckdb.DuckDBPyConnection | None, WritebackStore]]:
    """The warehouse, read-only, for lookups (None before the first sync) and the journal (by default the
    one that goes with the warehouse), for one batch; afterwards the journal's outcomes are published into
    the warehouse (not after a dry run). The CLI commands and the Dagster ops both run their batches
    inside one."""
    store = WritebackStore(journal if journal is not None else warehouse.journal_path)
    lookups = ExitStack()
    wrote_nothing = dry_run
    try:
        session = lookups.enter_context(warehouse.connect(read_only=True)) if warehouse.exists() else None
        yield session, store
    except InputError:
        wrote_nothing = True  # refused before any request: nothing to publish
        raise
    finally:
        lookups.close()  # before publishing: one process cannot hold a DuckDB file read-only and read-write
        try:
            if not wrote_nothing:
                store.publish(warehouse)
        finally:
            store.close()
