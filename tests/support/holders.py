"""Another process holding something the pipeline needs: a DuckDB file, the lake's writer lock, an analyst's
read-only session on the lake; and threads started at one instant, as hosts starting together."""

from __future__ import annotations

import subprocess
import sys
import threading
from collections.abc import Callable
from pathlib import Path

from tests.support.sandboxes import REPO

# Each holder prints "held" once it holds, then keeps holding until its stdin closes (`release`) or the
# seconds run out.
_HOLD_DUCKDB = """
import duckdb, select, sys
con = duckdb.connect(sys.argv[2], read_only=sys.argv[3] == "ro")
print("held", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[1]))
"""
_HOLD_LAKE = """
import select, sys
from pipelines.warehouse import WarehouseStore

store = WarehouseStore(catalog=sys.argv[2], data_path=sys.argv[3])
if sys.argv[4] == "rw":
    with store.writing():
        print("held", flush=True)
        select.select([sys.stdin], [], [], float(sys.argv[1]))
else:
    with store.connect(read_only=True) as con:
        con.begin()  # an analyst's long transaction: it keeps reading the snapshot it began on
        tables = con.execute("select table_schema, table_name from information_schema.tables "
                             "where table_catalog = current_database() and table_type = 'BASE TABLE'").fetchall()
        for schema, table in tables:
            con.execute(f'select count(*) from {schema}."{table}"').fetchall()
        print("held", flush=True)
        select.select([sys.stdin], [], [], float(sys.argv[1]))
"""


def _holder(script: str, seconds: float, *args: str) -> subprocess.Popen:
    """Run `script` in another Python process and return once it says it holds what it holds."""
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(seconds), *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    return holder


def hold_duckdb(path: Path, seconds: float, *, read_only: bool = False) -> subprocess.Popen:
    """Another process (an analyst, another run) holding the DuckDB file `path` for `seconds`; returns once
    it holds it. The caller kills it, waits for it, or lets it go with `release`."""
    return _holder(_HOLD_DUCKDB, seconds, str(path), "ro" if read_only else "rw")


def hold_lake(store, seconds: float, *, read_only: bool = False) -> subprocess.Popen:
    """Another process holding the DuckLake `store` for `seconds`; returns once it holds it. Writing (the
    default): a model run, a maintenance run or a publish, holding the one writer lock (`store.writing()`).
    `read_only`: an analyst's session, attached read-only with a transaction open. The caller kills it,
    waits for it, or lets it go with `release`."""
    return _holder(_HOLD_LAKE, seconds, store.catalog, store.data_path, "ro" if read_only else "rw")


def release(holder: subprocess.Popen) -> None:
    """Let a holder go as its owner would (it closes its session or lock and exits), and wait for it."""
    holder.stdin.close()
    assert holder.wait(30) == 0


def start_at_once(work: Callable[[int], None], starters: int = 8) -> list[BaseException]:
    """Run `work(0..starters-1)` on that many threads released together (hosts starting against one fresh
    database at the same instant); return what they raised."""
    barrier = threading.Barrier(starters)
    failures: list[BaseException] = []

    def start(worker: int) -> None:
        barrier.wait()
        try:
            work(worker)
        except BaseException as error:  # collected for the caller to assert
            failures.append(error)

    threads = [threading.Thread(target=start, args=(worker,)) for worker in range(starters)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    return failures
