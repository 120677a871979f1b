"""The pipeline's journals (write-back, webhook notifications): small stores of their own, never the
analysts' warehouse, so what a journal records never waits on a sync's write lock.

A journal lives where its setting says: a SQLite file (the default, one host), or, when the setting is a
PostgreSQL URL, a schema of that database (every host: on Kubernetes each run is its own pod and the webhook
receiver another, and a file on one pod's disk is seen by nobody else; `journals_postgres`). The journal
classes (`pipelines.journals.notifications`, `pipelines.journals.writes`) write each statement once, in SQLite's
spelling with `?` placeholders and upserts both databases take (`on conflict ... do update ... where`); a
backend runs them and differs only where the two databases do:

- `execute`, `executemany`: autocommit, so a statement is committed when it returns (outside `transaction`).
- `transaction()`: one write transaction (SQLite `begin immediate`, taking the write lock at once, so a
  read-then-write never deadlocks; PostgreSQL `begin`).
- `exclusive(purpose)`: one holder at a time across processes and hosts, for work longer than a transaction (a
  consumer of notifications, a write-back batch): a lock file beside the SQLite journal, a session advisory
  lock on PostgreSQL. Both are released when the holder dies.
- `errors`: the driver's errors that mean the journal cannot be used right now (the receiver answers 503).
- The DDL: `integer primary key autoincrement` and `integer` are spelled for PostgreSQL by its backend.

SQLite files are opened the same way: WAL (readers never block the writer) with `synchronous=FULL` (a write
that returned is on disk, even if the process dies at once), a held write lock waited for up to the lock
timeout, and a file that is not a journal refused in one line saying what to do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable, Iterator, Sequence
from contextlib import AbstractContextManager, contextmanager
from pathlib import Path
from typing import Any, Protocol

from pipelines.errors import ConfigurationError
from pipelines.settings import lock_timeout_seconds
from pipelines.warehouse.locks import exclusive_file_lock

SERVER_SCHEMES = ("postgresql://", "postgres://")


def is_server_location(location: str | Path | None) -> bool:
    """True when a journal's location is a PostgreSQL URL (a string: a Path is always a SQLite file)."""
    return isinstance(location, str) and location.strip().lower().startswith(SERVER_SCHEMES)


class JournalBackend(Protocol):
    """Where a journal's statements run: its SQLite file or its PostgreSQL schema (see the module docstring)."""

    errors: tuple[type[BaseException], ...]
    schema: str | None  # what the journal's tables are qualified with (None: unqualified)
    path: Path | None  # the SQLite file; None on PostgreSQL

    def describe(self) -> str:
        """The journal's place for messages and reprs, never a password."""

    def execute(self, sql: str, params: Sequence[Any] = ()) -> Any:
        """Run one statement (committed at once outside a transaction); a DB-API cursor over its rows."""

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters."""

    def transaction(self) -> AbstractContextManager[None]:
        """One write transaction for the block: committed at its end, rolled back on any exception."""

    def exclusive(self, purpose: str, what: str, *, timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the journal's `purpose` lock for the block, across processes and hosts, waiting (bounded,
        naming the holder) while another holds it."""

    def close(self) -> None:
        """Close the connection (idempotent)."""


def open_journal(path: Path, ddl: Iterable[str], *, what: str, if_lost: str, schema: str | None = None,
                 timeout: float | None = None) -> sqlite3.Connection:
    """Open (creating it and its tables) the SQLite journal at `path`. With `schema`, the file is attached
    under that name to an in-memory connection (so its tables read `<schema>.<table>`, as where they are
    published). `what` names the journal and `if_lost` says what starting a new one would cost, for the error."""
    path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(":memory:" if schema else str(path), isolation_level=None, check_same_thread=False,
                          timeout=lock_timeout_seconds() if timeout is None else timeout)
    prefix = f"{schema}." if schema else ""
    try:
        if schema:
            con.execute(f"attach database ? as {schema}", [str(path)])
        con.execute(f"pragma {prefix}journal_mode = wal")
        con.execute(f"pragma {prefix}synchronous = full")
        con.execute("begin immediate")
        for statement in ddl:
            con.execute(statement)
        con.execute("commit")
    except sqlite3.DatabaseError as error:
        con.close()
        raise ConfigurationError(
            f"{path} is not a readable {what} ({error}). Restore it from a backup, or move it away to start a "
            f"new journal ({if_lost})."
        ) from None
    return con


class SqliteJournal:
    """A journal in its own SQLite file (`open_journal`); its exclusive locks are files beside it."""

    errors: tuple[type[BaseException], ...] = (sqlite3.Error,)

    def __init__(self, path: Path, ddl: Iterable[str], *, what: str, if_lost: str, schema: str | None = None,
                 timeout: float | None = None) -> None:
        self.path, self.schema = path, schema
        self.con = open_journal(path, (s.format(schema=schema) for s in ddl), what=what, if_lost=if_lost,
                                schema=schema, timeout=timeout)

    def describe(self) -> str:
        """The file's path."""
        return str(self.path)

    def execute(self, sql: str, params: Sequence[Any] = ()) -> sqlite3.Cursor:
        """Run one statement on the file (committed at once outside a transaction)."""
        return self.con.execute(sql, params)

    def executemany(self, sql: str, rows: Iterable[Sequence[Any]]) -> None:
        """Run one statement for each row of parameters."""
        self.con.executemany(sql, rows)

    @contextmanager
    def transaction(self) -> Iterator[None]:
        """`begin immediate`: the write lock is taken at once (no deadlock on a read-then-write)."""
        self.con.execute("begin immediate")
        try:
            yield
        except BaseException:
            self.con.execute("rollback")
            raise
        self.con.execute("commit")

    def exclusive(self, purpose: str, what: str, *, timeout: float | None = None) -> AbstractContextManager[None]:
        """A lock file beside the journal (`<journal>.<purpose>.lock`), naming its holder."""
        return exclusive_file_lock(self.path.with_name(f"{self.path.name}.{purpose}.lock"), what, timeout=timeout)

    def close(self) -> None:
        """Close the file (idempotent)."""
        self.con.close()


def open_backend(location: str | Path, ddl: Iterable[str], *, what: str, if_lost: str, setting: str,
                 postgres_schema: str, sqlite_schema: str | None = None,
                 timeout: float | None = None) -> JournalBackend:
    """The journal at `location`, opened, its tables created when missing: a PostgreSQL URL selects the
    schema `postgres_schema` of that database (psycopg2 imported only then), anything else is a SQLite file
    (attached as `sqlite_schema` when given). DDL statements may name their schema as `{schema}`. `what`
    names the journal, `if_lost` says what starting a new one would cost, `setting` is the environment
    variable that configures it (all three for one-line errors); `timeout` bounds waits for locks."""
    if is_server_location(location):
        return _postgres().PostgresJournal(str(location).strip(), ddl, schema=postgres_schema, what=what,
                                           setting=setting, timeout=timeout)
    return SqliteJournal(Path(location), ddl, what=what, if_lost=if_lost, schema=sqlite_schema, timeout=timeout)


def journal_exists(location: str | Path, ddl: Iterable[str], *, what: str, setting: str,
                   postgres_schema: str) -> bool:
    """Whether the journal at `location` was created (by a receiver, a batch, ...), creating nothing: the SQLite
    file exists, or every table of `ddl` is in the PostgreSQL schema."""
    if is_server_location(location):
        return _postgres().tables_exist(str(location).strip(), ddl, schema=postgres_schema, what=what,
                                        setting=setting)
    return Path(location).exists()


def describe(location: str | Path, setting: str) -> str:
    """A journal's location for a message: the file's path, or `postgresql://host:port/database` (never the
    password), without opening anything; a malformed URL is a one-line error naming `setting`."""
    if is_server_location(location):
        return f"postgresql://{_postgres().server_url(str(location), setting).where}"
    return str(location)


def _postgres() -> Any:
    """`journals_postgres`, imported only when a PostgreSQL journal is configured (it needs psycopg2)."""
    try:
        from pipelines.journals import postgres as journals_postgres
    except ImportError as error:
        if not (error.name or "").startswith("psycopg2"):
            raise
        raise ConfigurationError(
            "A PostgreSQL journal needs psycopg2: install the postgres extra (uv sync --frozen --extra postgres)."
        ) from None
    return journals_postgres
