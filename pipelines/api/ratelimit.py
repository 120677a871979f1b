# longer than 500 lines because the one window logic and the two logs it drives (SQLite, PostgreSQL) are read together
"""Proactive, per-bucket sliding-window-log rate limiter, shared by every process that uses the same log.

The service counts requests per API key in a rolling 60 s window, per bucket. A sliding-window log (one
timestamp per request, admit when fewer than N lie inside the window) matches that; a token bucket does not
(it can send 2N in one window). Where the log lives is one setting, `limiter_url`
(`SOURCES__OCEAN_TRACKING__LIMITER_URL`):

- `sqlite:///abs/path.sqlite` (the default, `pipelines.settings.limiter_path()`): one file shared by every
  process on the host (Dagster runs each step in its own process); `SqliteLog`.
- `postgresql://user:password@host:port/database`: one table shared by every process on every host that
  spends the same key; `PostgresLog`.

The window arithmetic is here, once (`SlidingWindowLimiter._try_take`); a backend only holds the log: it
opens a short transaction that owns one (key, bucket) pair and tells the time, deletes and lists entries,
inserts one, commits. Each backend takes every timestamp from one clock: SQLite the host's, PostgreSQL the
server's (several hosts share one budget only if they count on one clock; see `PostgresLog`).

Why not pyrate-limiter's SQLiteBucket + file lock (v4.5)? It counts every row of its table regardless of the
item name, so each (key, bucket) pair would need its own table, Limiter and leaker thread; when a blocked
acquire wakes it records the *predicted* time (timestamp += planned sleep) rather than the clock, so an
oversleep logs a send earlier than it really happened; and it cannot report wait time per bucket.

The SQLite log (`SqliteLog`): a take is one `BEGIN IMMEDIATE` transaction (SQLite's own cross-process write
lock, no extra lock file): count, decide and insert atomically. Times are the host's clock (`time.time()`):
every process sharing the file runs on the host, so they count on one clock.

The PostgreSQL log (`PostgresLog`, the table `ocean_tracking_request_log`): one short transaction a take,
serialized by an advisory lock on the (key, bucket) pair, timed by the server's clock; its reasons are in
its docstring. psycopg2 (the `distributed` extra) is imported only when this log is selected.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Any, Protocol
from urllib.parse import unquote, urlparse

from pipelines.errors import ConfigurationError, PipelineError, redact
from pipelines.settings import LIMITER_URL_ENV, limiter_path

BUCKET_LIMITS: dict[str, int] = {
    "default": 100,
    "create_tracking_request": 100,
    "infer_number": 200,
    "refresh": 10,
}

_REFRESH = re.compile(r"/containers/[^/]+/refresh$|/containers/refresh$")


def bucket_for(method: str, path_or_url: str) -> str:
    """Which rate bucket a request draws from, from its method and path (a full URL is fine too)."""
    path = urlparse(path_or_url).path.rstrip("/")
    method = method.upper()
    if method == "POST" and path.endswith("/tracking_requests/infer_number"):
        return "infer_number"
    if method == "POST" and path.endswith("/tracking_requests"):
        return "create_tracking_request"
    # The spec's PATCH /containers/{id}/refresh; the changelog's POST /containers/refresh is drawn from the
    # same (smallest) budget to be safe.
    if method in ("PATCH", "POST") and _REFRESH.search(path):
        return "refresh"
    return "default"


MIN_PADDING_SECONDS = 0.25
POSTGRES_SCHEMES = ("postgresql", "postgres")
_URL_HELP = "postgresql://user:password@host:port/database or sqlite:///absolute/path.sqlite"


class LimiterUrl:
    """Where the limiter's log lives, parsed and checked; its repr and str never show a password.

    `LimiterUrl("postgresql://u:secret@db:5432/rates")` → `kind == "postgresql"`, `where == "db:5432/rates"`;
    `LimiterUrl("sqlite:///var/tmp/rates.sqlite")` → `kind == "sqlite"`, `path == Path("/var/tmp/rates.sqlite")`.
    A malformed URL or another scheme is a one-line ConfigurationError that does not echo the URL.
    """

    __slots__ = ("_value", "kind", "path", "where")

    def __init__(self, value: str | LimiterUrl) -> None:
        raw = value.reveal() if isinstance(value, LimiterUrl) else value
        if not isinstance(raw, str) or not raw.strip():
            raise ConfigurationError(f"{LIMITER_URL_ENV} must be a URL: {_URL_HELP}.")
        raw = raw.strip()
        parsed = urlparse(raw)
        scheme = parsed.scheme.lower()
        self._value = raw
        self.path: Path | None = None
        if scheme == "sqlite":
            if parsed.netloc or not parsed.path.startswith("/") or parsed.path.strip("/") == "":
                raise ConfigurationError(
                    f"{LIMITER_URL_ENV} names a SQLite file with three slashes and an absolute path "
                    "(sqlite:///var/tmp/ratelimit.sqlite); got one without."
                )
            self.kind = "sqlite"
            self.path = Path("/" + unquote(parsed.path).lstrip("/"))
            self.where = str(self.path)
        elif scheme in POSTGRES_SCHEMES:
            try:
                port = parsed.port or 5432
            except ValueError:
                raise ConfigurationError(f"{LIMITER_URL_ENV} has a port that is not a number.") from None
            database = unquote(parsed.path.lstrip("/")) or unquote(parsed.username or "") or "postgres"
            self.kind = "postgresql"
            self.where = f"{parsed.hostname or 'localhost'}:{port}/{database}"
        else:
            shown = f"scheme {scheme!r}" if scheme and len(scheme) < 20 else "no scheme"
            raise ConfigurationError(f"{LIMITER_URL_ENV} must be {_URL_HELP}; got {shown}.")

    @classmethod
    def sqlite(cls, path: str | Path) -> LimiterUrl:
        """The URL of a SQLite file (made absolute): what the `limiter_path` setting stands for."""
        return cls(f"sqlite:///{Path(path).absolute().as_posix().lstrip('/')}")

    def reveal(self) -> str:
        """The URL as given, password included: for the database driver only."""
        return self._value

    def __repr__(self) -> str:
        return f"LimiterUrl({self.kind}:{self.where})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, LimiterUrl) and (other.kind, other.where) == (self.kind, self.where) and (
            self.kind == "sqlite" or other._value == self._value)  # fmt: skip

    def __hash__(self) -> int:
        return hash((self.kind, self.where))


class LogBackend(Protocol):
    """What a limiter's log must do; the one window logic drives it (see `SlidingWindowLimiter._try_take`)."""

    errors: tuple[type[BaseException], ...]  # the driver's errors that mean the log cannot be used

    def begin(self, key: str, bucket: str) -> float:
        """Open a transaction that owns (key, bucket) until commit/rollback; return its clock's time."""

    def newest(self, key: str, bucket: str, since: float, limit: int) -> list[float]:
        """Forget (key, bucket)'s entries before `since`; return its `limit` newest times, newest first."""

    def insert(self, key: str, bucket: str, at: float) -> int:
        """Log one request at `at`; return its slot id."""

    def commit(self) -> None:
        """Commit the open transaction."""

    def rollback(self) -> None:
        """Roll the open transaction back."""

    def settle(self, slot: int) -> None:
        """Re-time a slot to the backend's clock now (its own short transaction)."""

    def unusable(self, error: BaseException) -> PipelineError:
        """The one-line error for a driver error: what is wrong and what to do, never a password."""

    def close(self) -> None:
        """Close the connection."""


class LimiterFileError(PipelineError):
    """The limiter's SQLite file cannot be used (corrupt, not a database, locked for a minute)."""


def _switch_to_wal(conn: sqlite3.Connection, attempts: int = 200) -> None:
    """`PRAGMA journal_mode=WAL`, retried: SQLite answers "database is locked" at once, without its busy
    timeout, when another process switches the same new file at the same moment (two syncs starting)."""
    for attempt in range(attempts):
        try:
            conn.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as error:
            if "locked" not in str(error) or attempt == attempts - 1:
                raise
            time.sleep(0.05)


class SqliteLog:
    """The request log in a SQLite file (WAL); one connection, used under the limiter's thread lock."""

    errors: tuple[type[BaseException], ...] = (sqlite3.DatabaseError,)

    def __init__(self, path: Path) -> None:
        self.path = path
        path.parent.mkdir(parents=True, exist_ok=True)
        try:
            self._conn = sqlite3.connect(path, timeout=60.0, isolation_level=None, check_same_thread=False)
            _switch_to_wal(self._conn)
            # No fsync per commit (WAL keeps the file consistent; a power cut may forget the last few
            # requests, which only costs a 429): 0.38 → 0.06 ms a request, `bench/hot_path.py`.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS request_log (key TEXT NOT NULL, bucket TEXT NOT NULL, ts REAL NOT NULL)"
            )
            self._conn.execute("CREATE INDEX IF NOT EXISTS request_log_kbt ON request_log (key, bucket, ts)")
        except sqlite3.DatabaseError as error:
            raise self.unusable(error) from None

    def __repr__(self) -> str:
        return f"SqliteLog({str(self.path)!r})"

    def begin(self, key: str, bucket: str) -> float:
        """`BEGIN IMMEDIATE` (the file's write lock, so every pair is owned at once), then the host's clock."""
        self._conn.execute("BEGIN IMMEDIATE")
        return time.time()

    def newest(self, key: str, bucket: str, since: float, limit: int) -> list[float]:
        """Delete the pair's entries before `since`; its `limit` newest times, newest first."""
        self._conn.execute("DELETE FROM request_log WHERE key = ? AND bucket = ? AND ts < ?", (key, bucket, since))
        rows = self._conn.execute(
            "SELECT ts FROM request_log WHERE key = ? AND bucket = ? ORDER BY ts DESC LIMIT ?", (key, bucket, limit)
        ).fetchall()
        return [row[0] for row in rows]

    def insert(self, key: str, bucket: str, at: float) -> int:
        """Log one request; its rowid is the slot."""
        cursor = self._conn.execute("INSERT INTO request_log (key, bucket, ts) VALUES (?, ?, ?)", (key, bucket, at))
        return int(cursor.lastrowid or 0)

    def commit(self) -> None:
        """Commit the take."""
        self._conn.execute("COMMIT")

    def rollback(self) -> None:
        """Roll the take back (nothing to undo when SQLite already ended the transaction)."""
        if self._conn.in_transaction:
            self._conn.execute("ROLLBACK")

    def settle(self, slot: int) -> None:
        """Re-time a slot to the host's clock now."""
        self._conn.execute("UPDATE request_log SET ts = ? WHERE rowid = ?", (time.time(), slot))

    def unusable(self, error: BaseException) -> LimiterFileError:
        """What is wrong with the file and what to do (it is safe to delete)."""
        return LimiterFileError(
            f"The rate limiter's file {self.path} cannot be used ({error}). It only holds the times of the last "
            "minute's requests, so it is safe to delete: delete it and run again."
        )

    def close(self) -> None:
        """Close the connection."""
        self._conn.close()


TABLE = "ocean_tracking_request_log"
LOCK_SPACE = 0x4F54524C  # advisory locks' first key ("OTRL"): the (key, bucket) pairs of this table
DDL_LOCK_SPACE = LOCK_SPACE + 1  # the table's creation
SESSION_SETTINGS = ("SET lock_timeout = '60s'; SET idle_in_transaction_session_timeout = '10s'; "
                    "SET synchronous_commit = off")
CONNECT_TIMEOUT_SECONDS = 10


def _psycopg2() -> Any:
    """The PostgreSQL driver, imported when a PostgreSQL log is selected; one line when it is not installed."""
    try:
        import psycopg2
    except ImportError:
        raise ConfigurationError(
            f"{LIMITER_URL_ENV} names PostgreSQL, which needs psycopg2: install the distributed extra "
            "(uv sync --frozen --extra distributed)."
        ) from None
    return psycopg2


class LimiterDatabaseError(PipelineError):
    """The limiter's PostgreSQL cannot be reached or used: host, port and database named, never the password."""


class PostgresLog:
    """The request log in a PostgreSQL table; one connection (autocommit, explicit BEGIN/COMMIT), used under
    the limiter's thread lock. Four round trips admit a request, three refuse one.

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
      the driver says).
    """

    def __init__(self, dsn: str, where: str) -> None:
        self._dsn = dsn
        self.where = where
        psycopg2 = self._psycopg2 = _psycopg2()
        self.errors: tuple[type[BaseException], ...] = (psycopg2.Error,)
        self._conn = self._connect()
        try:
            self._ensure_table()
        except psycopg2.Error as error:
            self.close()
            raise self.unusable(error) from None

    def __repr__(self) -> str:
        return f"PostgresLog({self.where})"

    def _connect(self):  # -> psycopg2 connection
        psycopg2 = self._psycopg2
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
            except (self._psycopg2.OperationalError, self._psycopg2.InterfaceError):
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
        except self._psycopg2.Error:
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


def open_log(url: LimiterUrl) -> LogBackend:
    """The backend `url` selects, connected and with its table in place."""
    if url.kind == "postgresql":
        return PostgresLog(url.reveal(), url.where)
    assert url.path is not None
    return SqliteLog(url.path)


class SlidingWindowLimiter:
    """Blocks until a request fits in its bucket's window; shared by all processes using the same log.

    The log is `url` (a `LimiterUrl` or its string: SQLite or PostgreSQL, see the module docstring), or the
    SQLite file `path`, or by default the host's file `pipelines.settings.limiter_path()`.

    `window_seconds` is the service's window (60; a sandbox may scale it down); it is padded by
    `padding` (a fraction) because the server's clock starts when the request arrives, after latency:
    100 per ~61-62 s measured zero 429s where 100 per 60 s did not. The padding is never below
    `MIN_PADDING_SECONDS`: on a scaled 3 s window 3 % is 90 ms, less than latency jitter (a 429 seen).
    """

    def __init__(
        self,
        fingerprint: str,
        *,
        url: str | LimiterUrl | None = None,
        path: str | Path | None = None,
        window_seconds: float = 60.0,
        padding: float = 0.03,
        limits: dict[str, int] | None = None,
    ) -> None:
        if not re.fullmatch(r"[0-9a-f]{6,64}", fingerprint):
            raise ValueError("fingerprint must be a hex digest prefix, never the key itself")
        if url is not None and path is not None:
            raise ValueError("give the limiter a url or a path, not both")
        self.fingerprint = fingerprint
        self.window = float(window_seconds) + max(float(window_seconds) * padding, MIN_PADDING_SECONDS)
        self.limits = dict(BUCKET_LIMITS if limits is None else limits)
        if any(n < 1 for n in self.limits.values()):
            raise ValueError("every bucket limit must be at least 1")
        self.url = LimiterUrl(url) if url is not None else LimiterUrl.sqlite(path if path is not None else limiter_path())
        #: the SQLite file, None when the log is in PostgreSQL
        self.path = self.url.path
        self._lock = threading.Lock()
        self._log = open_log(self.url)
        self._requests: dict[str, int] = defaultdict(int)
        self._wait: dict[str, float] = defaultdict(float)
        #: the log's clock (the host's for SQLite, the server's for PostgreSQL) at this instance's latest
        #: admitted request: what the window counts
        self.last_admitted_at: float | None = None

    def __repr__(self) -> str:
        return f"SlidingWindowLimiter({self.url!r}, key=sha256:{self.fingerprint})"

    def acquire(self, bucket: str = "default") -> float:
        """Take one slot in `bucket`, sleeping as long as needed; returns the seconds this call waited."""
        waited, _slot = self.acquire_slot(bucket)
        return waited

    def acquire_slot(self, bucket: str = "default") -> tuple[float, int]:
        """Like `acquire`, and also return the slot's id so `settle` can re-time it when the response is in."""
        limit = self.limits.get(bucket)
        if limit is None:
            raise KeyError(f"unknown rate bucket {bucket!r}; known: {sorted(self.limits)}")
        started = time.monotonic()
        while True:
            delay, now, slot = self._try_take(bucket, limit)
            if delay <= 0:
                self.last_admitted_at = now
                break
            time.sleep(delay)
        waited = time.monotonic() - started
        with self._lock:
            self._requests[bucket] += 1
            self._wait[bucket] += waited
        return waited, slot

    def settle(self, slot: int) -> None:
        """Re-time a slot to now, once its response is back (or its attempt failed).

        The server counts a request when it arrives, somewhere between sending and the response. Logged at
        the response, request n+limit cannot reach the server within a window of request n whatever the
        latency; logged at the send (padding alone), one slow response under load was enough for a 429.
        """
        with self._lock:
            try:
                self._log.settle(slot)
            except self._log.errors as error:
                raise self._log.unusable(error) from None

    def _try_take(self, bucket: str, limit: int) -> tuple[float, float, int]:
        """One atomic check-and-insert → (0, now, slot id) when admitted, else (seconds until a slot frees,
        now, -1)."""
        log, key = self._log, self.fingerprint
        with self._lock:
            try:
                try:
                    now = log.begin(key, bucket)
                    newest = log.newest(key, bucket, now - self.window, limit)
                    if len(newest) < limit:
                        slot = log.insert(key, bucket, now)
                        log.commit()
                        return 0.0, now, slot
                    log.commit()
                except BaseException:
                    log.rollback()
                    raise
            except log.errors as error:
                raise log.unusable(error) from None
        # newest[-1] is the oldest of the `limit` newest entries: a slot frees when it leaves the window.
        return max(newest[-1] + self.window - now, 0.001), now, -1

    def stats(self) -> dict[str, dict[str, float]]:
        """Requests admitted and seconds waited per bucket, by this process's instance."""
        with self._lock:
            return {"requests": dict(self._requests), "wait_seconds": dict(self._wait)}

    def close(self) -> None:
        """Close the log's connection."""
        with self._lock:
            self._log.close()
