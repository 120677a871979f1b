"""The rate limiter's log in one SQLite file: every process on one host shares its budget.

A take is one `BEGIN IMMEDIATE` transaction (SQLite's own cross-process write lock, no extra lock file):
count, decide and insert atomically. Times are the host's clock (`time.time()`): every process sharing
the file runs on the host, so they count on one clock. The window logic is `pipelines.api.ratelimit`'s.
"""

from __future__ import annotations

import sqlite3
import time
from pathlib import Path

from pipelines.errors import PipelineError


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
