"""The pipeline's journals (write-back, webhook notifications): small SQLite files of their own, never the
analysts' warehouse, so what a journal records never waits on a sync's write lock.

Each is opened the same way: WAL (readers never block the writer) with `synchronous=FULL` (a write that
returned is on disk, even if the process dies at once), autocommit (every statement commits unless the caller
opens a transaction), a held write lock waited for up to the lock timeout, and a file that is not a journal
refused in one line saying what to do.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Iterable
from pathlib import Path

from pipelines.errors import ConfigurationError
from pipelines.settings import lock_timeout_seconds


def open_journal(path: Path, ddl: Iterable[str], *, what: str, if_lost: str, schema: str | None = None,
                 timeout: float | None = None) -> sqlite3.Connection:
    """Open (creating it and its tables) the journal at `path`. With `schema`, the file is attached under that
    name to an in-memory connection (so its tables read `<schema>.<table>`, as where they are published).
    `what` names the journal and `if_lost` says what starting a new one would cost, for the error."""
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
