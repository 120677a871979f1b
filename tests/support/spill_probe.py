"""A process whose in-memory DuckDBs spill at once: one of ours (`offline_connection`) and one of dlt's lake
connections, each sorting more than its memory limit holds, in two threads. It prints, as one JSON line, each
database's result and the folder it spilled into, and whether the sort needs the disk at all. Run as `python -m tests.support.spill_probe DATA_DIR`; the
test runs two of these at once in one working directory (`tests/lake/test_compat.py`). In a shared spill
folder (DuckDB's default: `.tmp` in the working directory) the process dies of a segmentation fault."""

from __future__ import annotations

import json
import sys
import threading
from pathlib import Path

ROWS = 3_000_000  # about 150 MB of sort keys, past the 60 MB limit below
SPILLING_SORT = f"select sum(hash(m)) from (select md5(i::varchar) as m from range({ROWS}) t(i) order by m)"


def spill(con, results: dict, name: str) -> None:
    """Sort past `con`'s memory limit (so it spills), recording the result and its spill folder."""
    con.execute("SET memory_limit = '60MB'; SET threads = 1; SET preserve_insertion_order = false")
    folder = con.execute("select current_setting('temp_directory')").fetchone()[0]
    results[name] = {"sum": str(con.execute(SPILLING_SORT).fetchone()[0]), "spilled_into": folder}


def sort_needs_disk() -> bool:
    """Whether the sort fails within the memory limit when it may not spill (so the probe's sorts do spill)."""
    import duckdb

    with duckdb.connect(config={"temp_directory": ""}) as con:
        try:
            spill(con, {}, "no disk")
        except duckdb.OutOfMemoryException:
            return True
    return False


def main(data_dir: Path) -> None:
    """Spill from one of our connections and from one of dlt's lake connections at once."""
    from pipelines.warehouse.connections import offline_connection
    from pipelines.warehouse.destinations import ducklake_target, make_pipeline
    from tests.support.lakes import lake_in

    pipeline = make_pipeline(ducklake_target(lake_in(data_dir)), data_dir / "dlt")
    results: dict = {"sort_needs_disk": sort_needs_disk()}
    with offline_connection() as ours, pipeline.sql_client() as dlts:
        threads = [
            threading.Thread(target=spill, args=(ours, results, "ours")),
            threading.Thread(target=spill, args=(dlts.native_connection, results, "dlt")),
        ]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
    print(json.dumps(results))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
