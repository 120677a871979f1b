"""Proactive, host-wide, per-bucket sliding-window-log rate limiter.

The service counts requests per API key in a rolling 60 s window, per bucket. A sliding-window log (one
timestamp per request, admit when fewer than N lie inside the window) matches that; a token bucket does not
(it can send 2N in one window). The log lives in one SQLite file so every process on the host (Dagster runs
each step in its own process) shares one budget.

Why not pyrate-limiter's SQLiteBucket + file lock (v4.5)? It counts every row of its table regardless of the
item name, so each (key, bucket) pair would need its own table, Limiter and leaker thread; when a blocked
acquire wakes it records the *predicted* time (timestamp += planned sleep) rather than the clock, so an
oversleep logs a send earlier than it really happened; and it cannot report wait time per bucket. The log
below is ~40 lines: one `BEGIN IMMEDIATE` transaction (SQLite's own cross-process write lock, no extra lock
file) counts, decides and inserts atomically with the real clock.
"""

from __future__ import annotations

import re
import sqlite3
import threading
import time
from collections import defaultdict
from pathlib import Path
from urllib.parse import urlparse

from pipelines.errors import PipelineError

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


class LimiterFileError(PipelineError):
    """The limiter's SQLite file cannot be used (corrupt, not a database, locked for a minute)."""


def _unusable(path: Path, error: sqlite3.Error) -> LimiterFileError:
    return LimiterFileError(
        f"The rate limiter's file {path} cannot be used ({error}). It only holds the times of the last minute's "
        "requests, so it is safe to delete: delete it and run again."
    )


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


class SlidingWindowLimiter:
    """Blocks until a request fits in its bucket's window; shared by all processes using the same file.

    `window_seconds` is the service's window (60; a sandbox may scale it down); it is padded by
    `padding` (a fraction) because the server's clock starts when the request arrives, after latency:
    100 per ~61-62 s measured zero 429s where 100 per 60 s did not. The padding is never below
    `MIN_PADDING_SECONDS`: on a scaled 3 s window 3 % is 90 ms, less than latency jitter (a 429 seen).
    """

    def __init__(
        self,
        fingerprint: str,
        *,
        path: str | Path,
        window_seconds: float = 60.0,
        padding: float = 0.03,
        limits: dict[str, int] | None = None,
    ) -> None:
        if not re.fullmatch(r"[0-9a-f]{6,64}", fingerprint):
            raise ValueError("fingerprint must be a hex digest prefix, never the key itself")
        self.fingerprint = fingerprint
        self.window = float(window_seconds) + max(float(window_seconds) * padding, MIN_PADDING_SECONDS)
        self.limits = dict(BUCKET_LIMITS if limits is None else limits)
        if any(n < 1 for n in self.limits.values()):
            raise ValueError("every bucket limit must be at least 1")
        self.path = Path(path)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        self._lock = threading.Lock()
        try:
            self._conn = sqlite3.connect(self.path, timeout=60.0, isolation_level=None, check_same_thread=False)
            _switch_to_wal(self._conn)
            # No fsync per commit (WAL keeps the file consistent; a power cut may forget the last few
            # requests, which only costs a 429): 0.38 → 0.06 ms a request, `bench/hot_path.py`.
            self._conn.execute("PRAGMA synchronous=NORMAL")
            self._conn.execute(
                "CREATE TABLE IF NOT EXISTS request_log (key TEXT NOT NULL, bucket TEXT NOT NULL, ts REAL NOT NULL)"
            )
            self._conn.execute("CREATE INDEX IF NOT EXISTS request_log_kbt ON request_log (key, bucket, ts)")
        except sqlite3.DatabaseError as error:
            raise _unusable(self.path, error) from None
        self._requests: dict[str, int] = defaultdict(int)
        self._wait: dict[str, float] = defaultdict(float)
        #: wall-clock time logged for this instance's latest admitted request (what the window counts)
        self.last_admitted_at: float | None = None

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
            try:
                delay, now, slot = self._try_take(bucket, limit)
            except sqlite3.DatabaseError as error:
                raise _unusable(self.path, error) from None
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
            self._conn.execute("UPDATE request_log SET ts = ? WHERE rowid = ?", (time.time(), slot))

    def _try_take(self, bucket: str, limit: int) -> tuple[float, float, int]:
        """One atomic check-and-insert → (0, now, slot id) when admitted, else (seconds until a slot frees,
        now, -1)."""
        with self._lock:
            conn = self._conn
            conn.execute("BEGIN IMMEDIATE")
            try:
                now = time.time()
                start = now - self.window
                conn.execute(
                    "DELETE FROM request_log WHERE key = ? AND bucket = ? AND ts < ?",
                    (self.fingerprint, bucket, start),
                )
                rows = conn.execute(
                    "SELECT ts FROM request_log WHERE key = ? AND bucket = ? ORDER BY ts DESC LIMIT ?",
                    (self.fingerprint, bucket, limit),
                ).fetchall()
                if len(rows) < limit:
                    slot = conn.execute(
                        "INSERT INTO request_log (key, bucket, ts) VALUES (?, ?, ?)", (self.fingerprint, bucket, now)
                    ).lastrowid
                    conn.execute("COMMIT")
                    return 0.0, now, slot
                conn.execute("COMMIT")
            except BaseException:
                conn.execute("ROLLBACK")
                raise
        # rows[-1] is the oldest of the `limit` newest entries: a slot frees when it leaves the window.
        return max(rows[-1][0] + self.window - now, 0.001), now, -1

    def stats(self) -> dict[str, dict[str, float]]:
        """Requests admitted and seconds waited per bucket, by this process's instance."""
        with self._lock:
            return {"requests": dict(self._requests), "wait_seconds": dict(self._wait)}

    def close(self) -> None:
        """Close the SQLite connection."""
        with self._lock:
            self._conn.close()
