"""Waiting for what another process holds, instead of failing at once: one helper for every lock.

Three things can be held: a plain DuckDB file (one writing process, and no reader from another process
while it writes), the DuckLake writer lock (every step that writes the lake takes it, so two writers never
race a commit; readers never take it), and the SQLite files (journal, limiter, lake catalog: their own
busy timeouts). A run that finds one held waits (bounded by `OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS`), says
once what it waits for and who holds it, and gives up with one line saying what to do.
"""

from __future__ import annotations

import fcntl
import logging
import os
import re
import sys
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import TypeVar

import duckdb

from pipelines.errors import PipelineError
from pipelines.settings import LOCK_TIMEOUT_ENV, lock_timeout_seconds

logger = logging.getLogger(__name__)

_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")
POLL_SECONDS = 0.25
T = TypeVar("T")


class WarehouseLockedError(PipelineError):
    """What the run needs stayed held by another process for longer than the lock timeout."""


class Held(Exception):
    """Raised by an attempt passed to `wait_for_lock` when the thing is held; carries the holder."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def wait_for_lock(
    attempt: Callable[[], T],
    what: str | Path,
    *,
    timeout: float | None = None,
    remedy: str = "close that session (an analyst's DuckDB, another run)",
) -> T:
    """Call `attempt` until it stops raising `Held`, for up to `timeout` seconds (default: the configured
    lock timeout); log once what is held and by whom; past the timeout raise one line naming both and
    the `remedy`."""
    timeout = lock_timeout_seconds() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        try:
            return attempt()
        except Held as held:
            if time.monotonic() >= deadline:
                raise WarehouseLockedError(
                    f"{what} is still held by {held.holder} after {timeout:g}s: {remedy} and run again, "
                    f"or wait longer with {LOCK_TIMEOUT_ENV}."
                ) from None
            if not announced:
                bound = "until it is released" if timeout == float("inf") else f"up to {timeout:g}s"
                logger.warning("Waiting for %s: held by %s (%s).", what, held.holder, bound)
                announced = True
            time.sleep(POLL_SECONDS)


def lock_holder(message: str) -> str:
    """`process 1234 (/usr/bin/python3)` from DuckDB's lock error, or `another process`."""
    match = _HOLDER.search(message)
    return f"process {match['pid']} ({match['program']})" if match else "another process"


def locked_error(error: BaseException, path: str | Path) -> WarehouseLockedError | None:
    """The one-line error for a DuckDB lock conflict anywhere in `error`'s chain of causes, else None.

    dlt reports a held file as a connection failure ("check your credentials or internet connection"),
    which sends the user the wrong way; this names the file, the holder and the remedy instead."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        text = str(cause)
        if "Conflicting lock" in text or (isinstance(cause, duckdb.IOException) and "lock" in text.lower()):
            return WarehouseLockedError(
                f"{path} is locked by {lock_holder(text)}: close that session (an analyst's DuckDB, another "
                "run) and run again."
            )
        cause = cause.__cause__ or cause.__context__
    return None


def connect_waiting(
    path: str | Path, *, read_only: bool = False, timeout: float | None = None, config: dict | None = None
) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(path)`, waiting up to `timeout` seconds (default: the configured lock timeout)
    while another process holds the file."""

    def attempt() -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config or {})
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise
            raise Held(lock_holder(str(error))) from None

    return wait_for_lock(attempt, path, timeout=timeout)


def program_name() -> str:
    """What this process runs, as a user would name it: `pipelines` for `python -m pipelines`, `dagster`
    for the daemon's run worker, else the script's file name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return spec.name.removesuffix(".__main__")
    return Path(sys.argv[0]).name or "python"


@contextmanager
def exclusive_file_lock(path: str | Path, what: str, *, timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block, waiting while another process
    holds it. The holder writes its process id, program and start time into the file, so whoever waits
    can name it. `fcntl.flock`, not the `filelock` package: that one cannot say who holds the lock. The
    kernel releases the lock when the holder dies, so a killed run never leaves it held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def attempt() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Path(path).read_text(errors="replace").strip() or "another process"
            raise Held(holder) from None

    try:
        wait_for_lock(attempt, what, timeout=timeout, remedy="let that run finish (or stop it)")
        os.ftruncate(fd, 0)
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        os.write(fd, f"process {os.getpid()} ({program_name()}, since {started})".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)
