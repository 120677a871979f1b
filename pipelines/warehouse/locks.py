"""Waiting for a DuckDB file another process holds, instead of failing at once.

DuckDB allows one writing process per file, and no reader from another process while it writes. A run
that finds the file held waits (bounded by `OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS`), says once what it waits
for and who holds it (DuckDB names the holder's program and process id), and gives up with one line
saying what to do.
"""

from __future__ import annotations

import logging
import re
import time
from pathlib import Path

import duckdb

from pipelines.errors import PipelineError
from pipelines.settings import LOCK_TIMEOUT_ENV, lock_timeout_seconds

logger = logging.getLogger(__name__)

_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")
POLL_SECONDS = 0.25


class WarehouseLockedError(PipelineError):
    """The DuckDB file stayed locked by another process for longer than the lock timeout."""


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
    path: str | Path, *, read_only: bool = False, timeout: float | None = None
) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(path)`, waiting up to `timeout` seconds (default: the configured lock timeout)
    while another process holds the file."""
    timeout = lock_timeout_seconds() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        try:
            return duckdb.connect(str(path), read_only=read_only)
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise
            holder = lock_holder(str(error))
            if time.monotonic() >= deadline:
                raise WarehouseLockedError(
                    f"{path} is still locked by {holder} after {timeout:g}s: close that session (an analyst's "
                    f"DuckDB, another run) and run again, or wait longer with {LOCK_TIMEOUT_ENV}."
                ) from None
            if not announced:
                logger.warning("Waiting for %s: locked by %s (up to %gs).", path, holder, timeout)
                announced = True
            time.sleep(POLL_SECONDS)
