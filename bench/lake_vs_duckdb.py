"""The DuckLake default against the plain DuckDB file on the same account: load time, files on disk,
maintenance, and an analyst's query before and after it.

For each warehouse, a sandbox of the same seed and size with a frozen clock: one full sync, then
`--syncs` incremental syncs with the world's clock advanced a day before each (every sync also builds
the models). Then, for the lake, one maintenance run with the default 30-day retention (nothing expires:
the point is compaction and what it costs), an analyst's query timed before and after it, then one
with no retention at all: what the lake weighs without time travel.

    python bench/lake_vs_duckdb.py --shipments 10000 --syncs 3 --no-maps

Figures are printed as a table (copied into BENCHMARKS.md). "load s" is dlt's load step alone (the part
that holds the warehouse); "sync s" is the whole sync wall time including the models and the API budget.
"""

from __future__ import annotations

import argparse
import statistics
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import requests
from bench_sync import make_client, warehouse_target
from bench_table import render

from pipelines.sync import sync_account
from pipelines.warehouse.destinations import Target, make_pipeline
from pipelines.warehouse.maintenance import maintain_lake
from sandbox.launcher import start_sandbox

START = "2026-11-01T00:00:00+00:00"
ANALYST_QUERY = """
select c.current_status, count(*) as containers, count(e.id) as events
from ocean_tracking.containers c left join ocean_tracking.transport_events e on e.container_id = c.id
group by all order by all
"""


def files_and_bytes(target: Target) -> tuple[int, int]:
    """The warehouse's own files (the lake's folder; the DuckDB file and its WAL) and their bytes."""
    store = target.store
    if store.is_lake:
        files = [path for path in store.folder.rglob("*") if path.is_file()]
    else:
        files = list(store.duckdb_file.parent.glob(store.duckdb_file.name + "*"))
    return len(files), sum(path.stat().st_size for path in files)


def query_seconds(target: Target, repeat: int = 5) -> float:
    """Median seconds of the analyst's query in a fresh read-only session (session opening included)."""
    timings = []
    for _ in range(repeat):
        started = time.perf_counter()
        with target.store.connect(read_only=True) as con:
            con.execute(ANALYST_QUERY).fetchall()
        timings.append(time.perf_counter() - started)
    return statistics.median(timings)


def run_syncs(kind: str, args: argparse.Namespace, workdir: Path) -> dict[str, object]:
    """Full sync + incremental syncs into a fresh warehouse of `kind`; its figures."""
    data = workdir / kind
    target = warehouse_target(data, kind)
    sandbox_args = ("--shipments", str(args.shipments), "--seed", "7", "--rate-window", str(args.rate_window),
                    "--speed", "0", "--start", START)  # fmt: skip
    loads, walls = [], []
    with start_sandbox(*sandbox_args, timeout=300) as sandbox:
        for number in range(args.syncs + 1):
            if number:
                clock = sandbox.base_url.removesuffix("/v2") + "/_sandbox/clock"
                requests.post(clock, json={"advance_seconds": 86400}, timeout=30).raise_for_status()
            with make_client(sandbox.base_url, sandbox.api_key, args.rate_window, workdir / f"{kind}.limiter") as client:
                started = time.perf_counter()
                sync_account(client, target, include_maps=not args.no_maps, pipelines_dir=data / "dlt")
                walls.append(time.perf_counter() - started)
            trace = make_pipeline(target, data / "dlt").last_trace
            loads.append(sum(step.finished_at.timestamp() - step.started_at.timestamp()
                             for step in trace.steps if step.step == "load"))  # fmt: skip
    files, size = files_and_bytes(target)
    figures: dict[str, object] = {
        "full load s": loads[0], "incr. load s (median)": statistics.median(loads[1:]),
        "full sync s": walls[0], "incr. sync s (median)": statistics.median(walls[1:]),
        "files": files, "MiB": size / 2**20, "query s": query_seconds(target),
    }  # fmt: skip
    if kind == "ducklake":
        report = maintain_lake(target.store)
        files_after, size_after = files_and_bytes(target)
        figures.update({
            "maint. s": report.seconds, "data files": f"{report.before.data_files} -> {report.after.data_files}",
            "files after maint.": files_after, "MiB after maint.": size_after / 2**20,
            "query s after maint.": query_seconds(target),
        })  # fmt: skip
        # what the lake would weigh without time travel: every snapshot but the last expired, no grace
        bare = maintain_lake(target.store, retention_days=0, grace=timedelta(0))
        files_bare, size_bare = files_and_bytes(target)
        figures.update({
            "data files, retention 0": f"{bare.before.data_files} -> {bare.after.data_files}",
            "files, retention 0": files_bare, "MiB, retention 0": size_bare / 2**20,
        })  # fmt: skip
    return figures


def main() -> None:
    """Run both warehouses and print one table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=1000)
    parser.add_argument("--syncs", type=int, default=3, help="incremental syncs after the full one")
    parser.add_argument("--rate-window", type=float, default=1.0, help="the sandbox's and client's window, s")
    parser.add_argument("--no-maps", action="store_true")
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="lake-bench-") as tmp:
        results = {kind: run_syncs(kind, args, Path(tmp)) for kind in ("duckdb", "ducklake")}
    names = list(dict.fromkeys(name for figures in results.values() for name in figures))
    print(f"{args.shipments:,} shipments, 1 full + {args.syncs} incremental syncs, maps {'off' if args.no_maps else 'on'}")
    print(render(["", *results], [[name, *(results[kind].get(name, "") for kind in results)] for name in names]))


if __name__ == "__main__":
    main()
