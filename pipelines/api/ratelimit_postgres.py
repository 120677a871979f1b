"""The rate limiter's log in PostgreSQL: every process on every host that spends one key shares its budget.

Selected by `limiter_url = "postgresql://user:password@host:port/database"`; the window logic is
`pipelines.api.ratelimit`'s, this module only holds the log, in the table `ocean_tracking_request_log`.

- **One short transaction per take, serialized by a transaction-scoped advisory lock on the (key, bucket)
  pair** (`pg_advisory_xact_lock(space, hashtext(key/bucket))`), not by a row lock. A row lock needs a row
  per pair to exist before it can be locked (a second table, an upsert, its own first-use race) and
  rewrites that row on every request (dead tuples, vacuum); the log rows themselves cannot be locked when
  a bucket is empty, and locking the `limit` newest would still let two takers insert past the limit. The
  advisory lock exists without any row, is released by COMMIT, ROLLBACK or a dropped connection, and
  only pairs that share a budget wait on each other. Two pairs whose hashes collide merely take turns.
- **The server's clock, `clock_timestamp()`, for every time logged and compared**, read after the lock is
  held (`now()` is the transaction's start, before the wait for the lock, so it would log a stale time).
  With several hosts each host's clock is skewed a little from the others; a log written with host
  clocks would count a request from a host 2 s ahead as 2 s younger and one from a host behind as older,
  and a skew bigger than the padding breaks the budget. The server's clock is one clock for all of them,
  like the service's own. Delays handed back are differences of server times, so the hosts' clocks do
  not matter; `last_admitted_at` is in the server's clock.
- **The table is created once, however many processes start at once against a fresh database.**
  `CREATE TABLE IF NOT EXISTS` is not safe under concurrency in PostgreSQL (two sessions both see it
  missing; one fails on `pg_type_typname_nsp_index`), so creation runs under an advisory lock, and only
  when `to_regclass` does not find the table (a user without CREATE on the schema can use a table made
  for it). A session-level lock, with the check in a transaction begun after it is held: a transaction
  begun before the lock keeps the catalog it cached (an advisory lock does not refresh it), so its check
  still said "missing" and its CREATE failed with "already exists" (seen with 8 starters).
- A session that stalls inside a take would hold the pair's lock: `idle_in_transaction_session_timeout`
  ends it after 10 s, `lock_timeout` bounds a wait at 60 s (then one clear error).
- `synchronous_commit = off` for this session only, as SQLite's `synchronous=NORMAL`: a commit does not
  wait for the WAL flush; a server crash may forget the last few requests, which only costs a 429.
- Errors are one line naming host, port and database, never the password (it is scrubbed from whatever
  the driver says). psycopg2 is imported only when this backend is selected.
"""

from __future__ import annotations

from urllib.parse import urlparse

import psycopg2

from pipelines.errors import PipelineError, redact
from pipelines.settings import LIMITER_URL_ENV

TABLE = "ocean_tracking_request_log"
LOCK_SPACE = 0x4F54524C  # advisory locks' first key ("OTRL"): the (key, bucket) pairs of this table
DDL_LOCK_SPACE = LOCK_SPACE + 1  # the table's creation
SESSION_SETTINGS = ("SET lock_timeout = '60s'; SET idle_in_transaction_session_timeout = '10s'; "
                    "SET synchronous_commit = off")
CONNECT_TIMEOUT_SECONDS = 10


class LimiterDatabaseError(PipelineError):
    """The limiter's PostgreSQL cannot be reached or used: host, port and database named, never the password."""


class PostgresLog:
    """The request log in a PostgreSQL table; one connection (autocommit, explicit BEGIN/COMMIT), used under
    the limiter's thread lock. Four round trips admit a request, three refuse one."""

    errors: tuple[type[BaseException], ...] = (psycopg2.Error,)

    def __init__(self, dsn: str, where: str) -> None:
        self._dsn = dsn
        self.where = where
        self._conn = self._connect()
        try:
            self._ensure_table()
        except psycopg2.Error as error:
            self.close()
            raise self.unusable(error) from None

    def __repr__(self) -> str:
        return f"PostgresLog({self.where})"

    def _connect(self):  # -> psycopg2 connection
        options = {"application_name": "ocean-tracking rate limiter"}
        if "connect_timeout" not in self._dsn:
            options["connect_timeout"] = str(CONNECT_TIMEOUT_SECONDS)
        try:
            conn = psycopg2.connect(self._dsn, **options)
        except psycopg2.Error as error:
            raise self.unusable(error) from None
        conn.autocommit = True
        try:
            with conn.cursor() as cursor:
                cursor.execute(SESSION_SETTINGS)
        except psycopg2.Error as error:
            conn.close()
            raise self.unusable(error) from None
        return conn

    def _ensure_table(self) -> None:
        with self._conn.cursor() as cursor:
            cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,))
            if cursor.fetchone()[0]:
                return
            cursor.execute("SELECT pg_advisory_lock(%s, 0)", (DDL_LOCK_SPACE,))
            try:
                # Autocommit: a new transaction, so the catalog seen is the one the lock's last holder left.
                cursor.execute("SELECT to_regclass(%s) IS NOT NULL", (TABLE,))
                if not cursor.fetchone()[0]:
                    cursor.execute(  # several statements in one query: one implicit transaction
                        f"CREATE TABLE {TABLE} (id bigint GENERATED ALWAYS AS IDENTITY PRIMARY KEY, "
                        "key text NOT NULL, bucket text NOT NULL, ts double precision NOT NULL); "
                        f"CREATE INDEX {TABLE}_kbt ON {TABLE} (key, bucket, ts)"
                    )
            finally:
                if not self._conn.closed:
                    cursor.execute("SELECT pg_advisory_unlock(%s, 0)", (DDL_LOCK_SPACE,))

    def begin(self, key: str, bucket: str) -> float:
        """BEGIN, the pair's advisory lock, then the server's clock (one round trip). A connection the
        server dropped since the last take is opened again once: nothing of a transaction is lost then."""
        for attempt in (1, 2):
            if self._conn.closed:
                self._conn = self._connect()
            try:
                with self._conn.cursor() as cursor:
                    cursor.execute(
                        "BEGIN; SELECT pg_advisory_xact_lock(%s, hashtext(%s)); "
                        "SELECT extract(epoch FROM clock_timestamp())::float8",
                        (LOCK_SPACE, f"{key}/{bucket}"),
                    )
                    return cursor.fetchone()[0]
            except (psycopg2.OperationalError, psycopg2.InterfaceError):
                if attempt == 2 or not self._conn.closed:
                    raise
        raise AssertionError("unreachable")

    def newest(self, key: str, bucket: str, since: float, limit: int) -> list[float]:
        """Delete the pair's entries before `since`; its `limit` newest times, newest first (one round trip)."""
        with self._conn.cursor() as cursor:
            cursor.execute(
                f"DELETE FROM {TABLE} WHERE key = %(key)s AND bucket = %(bucket)s AND ts < %(since)s; "
                f"SELECT ts FROM {TABLE} WHERE key = %(key)s AND bucket = %(bucket)s ORDER BY ts DESC LIMIT %(limit)s",
                {"key": key, "bucket": bucket, "since": since, "limit": limit},
            )
            return [row[0] for row in cursor.fetchall()]

    def insert(self, key: str, bucket: str, at: float) -> int:
        """Log one request at `at` (the server time `begin` read); its id is the slot."""
        with self._conn.cursor() as cursor:
            cursor.execute(f"INSERT INTO {TABLE} (key, bucket, ts) VALUES (%s, %s, %s) RETURNING id", (key, bucket, at))
            return int(cursor.fetchone()[0])

    def commit(self) -> None:
        """Commit the take (and release the pair's lock)."""
        with self._conn.cursor() as cursor:
            cursor.execute("COMMIT")

    def rollback(self) -> None:
        """Roll the take back; a connection already lost has nothing to roll back (the server did)."""
        if self._conn.closed:
            return
        try:
            with self._conn.cursor() as cursor:
                cursor.execute("ROLLBACK")
        except psycopg2.Error:
            pass

    def settle(self, slot: int) -> None:
        """Re-time a slot to the server's clock now (one statement, its own transaction)."""
        if self._conn.closed:
            self._conn = self._connect()
        with self._conn.cursor() as cursor:
            cursor.execute(
                f"UPDATE {TABLE} SET ts = extract(epoch FROM clock_timestamp())::float8 WHERE id = %s", (slot,)
            )

    def unusable(self, error: BaseException) -> LimiterDatabaseError:
        """One line: where, what the driver said (first line, password scrubbed), what to do."""
        reason = next((line.strip() for line in str(error).splitlines() if line.strip()), type(error).__name__)
        return LimiterDatabaseError(
            f"Cannot use the rate limiter's PostgreSQL at {self.where} ({redact(reason, urlparse(self._dsn).password)}). Start the "
            f"server, or fix {LIMITER_URL_ENV} (postgresql://user:password@host:port/database)."
        )

    def close(self) -> None:
        """Close the connection."""
        if not self._conn.closed:
            self._conn.close()
