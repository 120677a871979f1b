"""Proactive, per-bucket sliding-window-log rate limiter, shared by every process that uses the same log.

The service counts requests per API key in a rolling 60 s window, per bucket. A sliding-window log (one
timestamp per request, admit when fewer than N lie inside the window) matches that; a token bucket does not
(it can send 2N in one window). Where the log lives is one setting, `limiter_url`
(`SOURCES__OCEAN_TRACKING__LIMITER_URL`):

- `sqlite:///abs/path.sqlite` (the default, `pipelines.settings.limiter_path()`): one file shared by every
  process on the host (Dagster runs each step in its own process); `pipelines.api.ratelimit_sqlite`.
- `postgresql://user:password@host:port/database`: one table shared by every process on every host that
  spends the same key; `pipelines.api.ratelimit_postgres`.

The window arithmetic is here, once (`SlidingWindowLimiter._try_take`); a backend only holds the log: it
opens a short transaction that owns one (key, bucket) pair and tells the time, deletes and lists entries,
inserts one, commits. Each backend takes every timestamp from one clock: SQLite the host's, PostgreSQL the
server's (several hosts share one budget only if they count on one clock; see `ratelimit_postgres`).

Why not pyrate-limiter's SQLiteBucket + file lock (v4.5)? It counts every row of its table regardless of the
item name, so each (key, bucket) pair would need its own table, Limiter and leaker thread; when a blocked
acquire wakes it records the *predicted* time (timestamp += planned sleep) rather than the clock, so an
oversleep logs a send earlier than it really happened; and it cannot report wait time per bucket.
"""

from __future__ import annotations

import re
import threading
import time
from collections import defaultdict
from pathlib import Path
from typing import Protocol
from urllib.parse import unquote, urlparse

from pipelines.api.ratelimit_sqlite import LimiterFileError, SqliteLog
from pipelines.errors import ConfigurationError, PipelineError
from pipelines.settings import LIMITER_URL_ENV, limiter_path

__all__ = ["BUCKET_LIMITS", "MIN_PADDING_SECONDS", "LimiterFileError", "LimiterUrl", "SlidingWindowLimiter",
           "bucket_for"]  # fmt: skip

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


def open_log(url: LimiterUrl) -> LogBackend:
    """The backend `url` selects, connected and with its table in place."""
    if url.kind == "postgresql":
        from pipelines.api.ratelimit_postgres import PostgresLog  # psycopg2 only when PostgreSQL is asked for

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
