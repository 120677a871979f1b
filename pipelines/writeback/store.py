"""The `writeback` schema in the warehouse DuckDB file: outcomes per row, the upload journal, the audit log.

Everything a rerun needs to stay idempotent lives here, next to the data it was derived from. Nothing
stored is a secret: errors come from `ApiError` (which never carries headers or the key); the only
short-lived credential, a direct-upload URL, is kept just until its bytes are stored and then cleared.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from datetime import UTC, datetime
from typing import Any

import duckdb

from pipelines.errors import ApiError
from pipelines.settings import WRITEBACK_SCHEMA

SCHEMA = WRITEBACK_SCHEMA

_DDL = (
    f"create schema if not exists {SCHEMA}",
    f"""create table if not exists {SCHEMA}.audit_log (
        logged_at timestamptz not null, action varchar not null, target varchar not null, outcome varchar not null,
        http_status integer, error_summary varchar)""",
    f"""create table if not exists {SCHEMA}.tracking_request_outcomes (
        row_key varchar primary key, row_index integer, request_number varchar, request_type varchar,
        scac varchar, status varchar not null, tracking_request_id varchar, http_status integer,
        errors json, updated_at timestamptz not null)""",
    f"""create table if not exists {SCHEMA}.document_uploads (
        file_key varchar primary key, path varchar, name varchar, byte_size bigint, checksum varchar,
        shipment_id varchar, container_id varchar, step varchar not null, blob_id varchar, signed_id varchar,
        upload_url varchar, upload_headers json, document_id varchar, last_error varchar,
        updated_at timestamptz not null)""",
)

UPLOAD_COLUMNS = (
    "file_key", "path", "name", "byte_size", "checksum", "shipment_id", "container_id", "step", "blob_id",
    "signed_id", "upload_url", "upload_headers", "document_id", "last_error",
)


def _now() -> datetime:
    return datetime.now(UTC)


def error_summary(error: BaseException) -> str:
    """One short line for an error: the ApiError text (pointers included), else the exception type+text."""
    text = str(error) if isinstance(error, ApiError) else f"{type(error).__name__}: {error}"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


class WritebackStore:
    """Reads and writes the `writeback` tables on one DuckDB connection (created on first use)."""

    def __init__(self, con: duckdb.DuckDBPyConnection) -> None:
        self.con = con
        for statement in _DDL:
            con.execute(statement)

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
        cur = self.con.execute(
            f"select * from {SCHEMA}.tracking_request_outcomes where row_key = ?", [row_key]
        )
        row = cur.fetchone()
        return dict(zip([d[0] for d in cur.description], row, strict=True)) if row else None

    def claimed_tracking_ids(self) -> set[str]:
        """Tracking request ids already attributed to some row (reconciliation never claims one twice)."""
        rows = self.con.execute(
            f"select tracking_request_id from {SCHEMA}.tracking_request_outcomes where tracking_request_id is not null"
        ).fetchall()
        return {r[0] for r in rows}

    def record_tracking_outcome(self, row: Mapping[str, Any], status: str, *, tracking_request_id: str | None = None,
                                http_status: int | None = None, errors: list[dict] | None = None) -> None:
        """Upsert the outcome of one row (keyed by its idempotency key)."""
        self.con.execute(
            f"insert or replace into {SCHEMA}.tracking_request_outcomes values (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            [row["row_key"], row.get("row_index"), row.get("request_number"), row.get("request_type"),
             row.get("scac"), status, tracking_request_id, http_status, json.dumps(errors or []), _now()],
        )

    # ---- document uploads -------------------------------------------------------------------------

    def upload(self, file_key: str) -> dict[str, Any] | None:
        """The journal entry of one file (by its key), or None if it was never started."""
        cur = self.con.execute(f"select * from {SCHEMA}.document_uploads where file_key = ?", [file_key])
        row = cur.fetchone()
        if not row:
            return None
        entry = dict(zip([d[0] for d in cur.description], row, strict=True))
        entry["upload_headers"] = json.loads(entry["upload_headers"]) if entry["upload_headers"] else None
        return entry

    def save_upload(self, entry: Mapping[str, Any]) -> None:
        """Upsert a journal entry (the whole row: step, ids, the pending URL or None)."""
        values = [entry.get(c) for c in UPLOAD_COLUMNS]
        headers_at = UPLOAD_COLUMNS.index("upload_headers")
        values[headers_at] = json.dumps(values[headers_at]) if values[headers_at] is not None else None
        marks = ", ".join("?" for _ in range(len(UPLOAD_COLUMNS) + 1))
        self.con.execute(f"insert or replace into {SCHEMA}.document_uploads values ({marks})", [*values, _now()])

    def claimed_document_ids(self) -> set[str]:
        """Document ids already attributed to some file (reconciliation never claims one twice)."""
        rows = self.con.execute(
            f"select document_id from {SCHEMA}.document_uploads where document_id is not null"
        ).fetchall()
        return {r[0] for r in rows}
