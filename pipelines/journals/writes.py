"""The write-back journal: outcomes per row, the upload journal, the audit log. Its own SQLite file (WAL), or,
when `OCEAN_TRACKING_WRITEBACK_JOURNAL` is a PostgreSQL URL, its own schema `ocean_tracking_writeback` of that
database, so a batch in one pod and a rerun in another read one journal (`pipelines.journals`: the same tables
and statements, SQLAlchemy Core, on both).

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
PostgreSQL too).

Nothing stored is a secret: errors come from `ApiError` (which never carries headers or the key); the only
short-lived credential, a direct-upload URL, is kept just until its bytes are stored and then cleared (and
never published, nor shown in an error: the journals' statements never show their parameters).
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Mapping
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import duckdb
import pyarrow as pa
from sqlalchemy import (
    BigInteger,
    Column,
    Executable,
    Index,
    Integer,
    MetaData,
    Table,
    Text,
    bindparam,
    insert,
    select,
    text,
)

from pipelines.errors import ApiError, InputError
from pipelines.journals import CHUNK, JournalDatabase, is_server_location
from pipelines.settings import (
    WRITEBACK_JOURNAL_ENV,
    Account,
    writeback_journal_location,
    writeback_journal_path,
)
from pipelines.warehouse import WarehouseStore, replace_rows

ACCEPTED, PENDING, UNKNOWN = "accepted", "pending", "unknown"  # the outcomes that hold a number (`held_numbers`)
SINGLE_ACCOUNT = Account()  # the one account of a setup without accounts (the default argument)
POSTGRES_SCHEMA = "ocean_tracking_writeback"  # never `writeback`: the journal's database may hold a warehouse
# never copied to the warehouse: a pending direct-upload URL is a short-lived credential
UNPUBLISHED_COLUMNS = {"upload_url", "upload_headers"}
TIME_COLUMNS = {"logged_at", "updated_at", "intent_at"}  # ISO 8601 text here, timestamptz when published

WRITEBACK_TABLES = MetaData()
audit_log = Table(
    "audit_log", WRITEBACK_TABLES,
    Column("logged_at", Text, nullable=False), Column("action", Text, nullable=False),
    Column("target", Text, nullable=False), Column("outcome", Text, nullable=False),
    Column("http_status", BigInteger), Column("error_summary", Text),
)  # fmt: skip
tracking_request_outcomes = Table(
    "tracking_request_outcomes", WRITEBACK_TABLES,
    Column("row_key", Text, primary_key=True), Column("row_index", BigInteger), Column("request_number", Text),
    Column("request_type", Text), Column("scac", Text), Column("status", Text, nullable=False),
    Column("tracking_request_id", Text), Column("http_status", BigInteger), Column("errors", Text),
    Column("updated_at", Text, nullable=False), Column("intent_at", Text),
    Index("tracking_request_outcomes_by_number", "request_number"),  # `held_numbers`: a batch's numbers only
)  # fmt: skip
document_uploads = Table(
    "document_uploads", WRITEBACK_TABLES,
    Column("file_key", Text, primary_key=True), Column("path", Text), Column("name", Text),
    Column("byte_size", BigInteger), Column("checksum", Text), Column("shipment_id", Text),
    Column("container_id", Text), Column("step", Text, nullable=False), Column("blob_id", Text),
    Column("signed_id", Text), Column("upload_url", Text), Column("upload_headers", Text),
    Column("document_id", Text), Column("last_error", Text), Column("updated_at", Text, nullable=False),
    Column("intent_at", Text),
)  # fmt: skip
PUBLISHED_TABLES = tuple(WRITEBACK_TABLES.tables)
_HOLDING = select(tracking_request_outcomes).where(
    tracking_request_outcomes.c.status.in_((ACCEPTED, PENDING, UNKNOWN)),
    tracking_request_outcomes.c.request_number.in_(bindparam("numbers", expanding=True)),
).order_by(tracking_request_outcomes.c.updated_at)
# built once, as the hot paths of a batch run them for every row
_OUTCOME = select(tracking_request_outcomes).where(tracking_request_outcomes.c.row_key == bindparam("row_key"))
_UPLOAD = select(document_uploads).where(document_uploads.c.file_key == bindparam("file_key"))
_AUDIT = insert(audit_log)


def postgres_schema(account: Account | None = None) -> str:
    """The PostgreSQL schema of an account's journal (the one account's, or a named account's own
    `ocean_tracking_writeback_<account>`)."""
    return (account or Account()).suffixed(POSTGRES_SCHEMA)


def _now() -> str:
    return datetime.now(UTC).isoformat()


def error_summary(error: BaseException) -> str:
    """One short line for an error: the ApiError text (pointers included), else the exception type+text."""
    text = str(error) if isinstance(error, ApiError) else f"{type(error).__name__}: {error}"
    return " | ".join(line.strip() for line in text.splitlines() if line.strip())[:500]


class WritebackStore:
    """Reads and writes the journal; every write is committed at once (a crash loses nothing recorded).

    `location` is a SQLite file or a PostgreSQL URL (default: `settings.writeback_journal_location(account=
    account)`); `account` is whose journal it is: on PostgreSQL its schema (`postgres_schema`), and the warehouse
    schema `publish` writes (`Account.writeback_schema`)."""

    def __init__(self, location: str | Path | None = None, *, timeout: float | None = None,
                 account: Account | None = None) -> None:
        self.account = account if account is not None else Account()
        location = location if location is not None else writeback_journal_location(account=self.account)
        self._db = JournalDatabase(location, WRITEBACK_TABLES, what="write-back journal", setting=WRITEBACK_JOURNAL_ENV,
                                   postgres_schema=postgres_schema(self.account), timeout=timeout)
        self._db.create(if_lost="rows it recorded could then be sent again")
        self.path: Path | None = self._db.path
        outcome = self._db.insert(tracking_request_outcomes)
        self._record_outcome = outcome.on_conflict_do_update(  # an `accepted` outcome is final
            index_elements=[tracking_request_outcomes.c.row_key],
            set_={c.name: outcome.excluded[c.name] for c in tracking_request_outcomes.c if not c.primary_key},
            where=tracking_request_outcomes.c.status != ACCEPTED)
        upload = self._db.insert(document_uploads)
        self._save_upload = upload.on_conflict_do_update(
            index_elements=[document_uploads.c.file_key],
            set_={c.name: upload.excluded[c.name] for c in document_uploads.c if not c.primary_key})

    def __repr__(self) -> str:
        return f"WritebackStore({self._db.describe()!r})"

    def close(self) -> None:
        """Close the journal."""
        self._db.close()

    def rows(self, sql: str, parameters: Mapping[str, Any] | None = None) -> list[tuple]:
        """The rows of one query on the journal (SQL both databases take, bare table names, `:name`
        parameters): for checks and tests, which then read a SQLite and a PostgreSQL journal alike."""
        with self._db.connect() as connection:
            return [tuple(row) for row in connection.execute(text(sql), parameters)]

    def _dicts(self, statement: Executable, parameters: Mapping[str, Any] | None = None) -> list[dict[str, Any]]:
        with self._db.connect() as connection:
            return [dict(row) for row in connection.execute(statement, parameters).mappings()]

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
        with self._db.connect() as connection:
            connection.execute(_AUDIT, {"logged_at": _now(), "action": action, "target": target, "outcome": outcome,
                                        "http_status": http_status, "error_summary": error})

    # ---- tracking requests ------------------------------------------------------------------------

    def tracking_outcome(self, row_key: str) -> dict[str, Any] | None:
        """The recorded outcome of a normalized row (by idempotency key), or None if never sent."""
        rows = self._dicts(_OUTCOME, {"row_key": row_key})
        return rows[0] if rows else None

    def held_numbers(self, numbers: Iterable[tuple[str, str]]) -> dict[tuple[str, str], dict[str, Any]]:
        """Of `numbers` ((request_type, request_number), a batch's), each → the outcome that says it must not
        be sent again: the row that created its tracking request (`accepted`), else an intent not settled yet
        (`pending`, `unknown`). Read once a batch, which the batch lock keeps every other batch out of; found
        by the number, not the key, so rows recorded under any key (a journal written when the key was a hash
        of the whole row) count. Only the batch's numbers are read (by their index), never the whole history."""
        wanted = set(numbers)
        held: dict[tuple[str, str], dict[str, Any]] = {}
        requested = sorted({number for _, number in wanted})
        for start in range(0, len(requested), CHUNK):
            for record in self._dicts(_HOLDING, {"numbers": requested[start:start + CHUNK]}):
                number = (record["request_type"], record["request_number"])
                if number in wanted and (number not in held or record["status"] == ACCEPTED):
                    held[number] = record
        return held

    def tracking_outcomes_in(self, *statuses: str) -> list[dict[str, Any]]:
        """Every recorded row in one of `statuses` (e.g. the intents a crash left pending), oldest first."""
        return self._dicts(select(tracking_request_outcomes).where(tracking_request_outcomes.c.status.in_(statuses))
                           .order_by(tracking_request_outcomes.c.updated_at))

    def claimed_tracking_ids(self) -> set[str]:
        """Tracking request ids already attributed to some row (reconciliation never claims one twice)."""
        return self._claimed(tracking_request_outcomes.c.tracking_request_id)

    def record_tracking_outcome(self, row: Mapping[str, Any], status: str, *, tracking_request_id: str | None = None,
                                http_status: int | None = None, errors: list[dict] | None = None,
                                intent_at: str | None = None) -> None:
        """Upsert the outcome of one row (keyed by its idempotency key); committed before this returns. An
        `accepted` outcome is final: the row that created a tracking request stays its record, whatever is
        recorded for the key after it."""
        values = {"row_key": row["row_key"], "row_index": row.get("row_index"),
                  "request_number": row.get("request_number"), "request_type": row.get("request_type"),
                  "scac": row.get("scac"), "status": status, "tracking_request_id": tracking_request_id,
                  "http_status": http_status, "errors": json.dumps(errors or []), "updated_at": _now(),
                  "intent_at": intent_at}
        with self._db.connect() as connection:
            connection.execute(self._record_outcome, values)

    # ---- document uploads -------------------------------------------------------------------------

    def upload(self, file_key: str) -> dict[str, Any] | None:
        """The journal entry of one file (by its key), or None if it was never started."""
        rows = self._dicts(_UPLOAD, {"file_key": file_key})
        return _entry(rows[0]) if rows else None

    def uploads_at(self, *steps: str) -> list[dict[str, Any]]:
        """Every journal entry at one of `steps` (e.g. a document creation a crash left pending)."""
        query = select(document_uploads).where(document_uploads.c.step.in_(steps)).order_by(document_uploads.c.updated_at)
        return [_entry(row) for row in self._dicts(query)]

    def save_upload(self, entry: Mapping[str, Any]) -> None:
        """Upsert a journal entry (the whole row: step, ids, the pending URL or None); committed at once."""
        values = {c.name: entry.get(c.name) for c in document_uploads.c} | {"updated_at": _now()}
        if values["upload_headers"] is not None:
            values["upload_headers"] = json.dumps(values["upload_headers"])
        with self._db.connect() as connection:
            connection.execute(self._save_upload, values)

    def claimed_document_ids(self) -> set[str]:
        """Document ids already attributed to some file (reconciliation never claims one twice)."""
        return self._claimed(document_uploads.c.document_id)

    def _claimed(self, column: Column[str]) -> set[str]:
        with self._db.connect() as connection:
            return set(connection.scalars(select(column).where(column.is_not(None))))

    # ---- publishing -------------------------------------------------------------------------------

    def publish(self, warehouse: WarehouseStore) -> dict[str, int]:
        """Copy the journal's tables into the account's warehouse schema (`writeback`, a named account's
        `writeback_<account>`) for analysts (upload URLs left out), replacing the previous copy in one
        transaction; rows per table. Waits while another process writes the warehouse (see `pipelines.warehouse.connections`)."""
        tables = {}
        for table in WRITEBACK_TABLES.tables.values():
            columns = [c for c in table.c if c.name not in UNPUBLISHED_COLUMNS]
            schema = pa.schema([(c.name, pa.int64() if isinstance(c.type, Integer) else pa.string()) for c in columns])
            tables[table.name] = pa.Table.from_pylist(self._dicts(select(*columns)), schema=schema)
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
                replace_rows(con, schema_name, name, f"select {typed} from journal_rows")
                con.unregister("journal_rows")
            con.commit()
        return {name: table.num_rows for name, table in tables.items()}


def _entry(row: dict[str, Any]) -> dict[str, Any]:
    """An upload's journal entry as the actions use it: its direct-upload headers parsed."""
    row["upload_headers"] = json.loads(row["upload_headers"]) if row["upload_headers"] else None
    return row


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
