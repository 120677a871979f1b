"""What a sync adds to the lake, models on, run as users run it (`python -m pipelines sync` in its own process):
the first sync, unchanged syncs (the sandbox's clock frozen), then syncs after the world moved a few minutes
(a small share of the shipments changed).

    uv run python bench/lake_growth.py [--shipments 10000] [--unchanged-syncs 2] [--changed-minutes 3]
                                       [--changed-syncs 1] [--window 0.05] [--no-maps] [--workdir DIR]

Per sync: the lake's bytes on disk (data files and catalog) and what the sync added, the snapshots it
committed (and how many of them carry a commit message), the share of shipments it changed (rows of
`shipments` with the sync's load id), its wall time, and what the models step decided (the CLI's `Models:`
line). Then every model that is a view, read whole after the last sync. Prints the tables and the issue's
done-when figures; asserts nothing.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from bench_sync import API_KEY
from bench_table import render

from pipelines.settings import LAKE_NAME
from pipelines.warehouse import default_lake_in
from sandbox.launcher import start_sandbox

START = "2026-11-01T00:00:00+00:00"
UNCHANGED_GROWTH_LIMIT_BYTES = 1_000_000
UNCHANGED_SNAPSHOTS_LIMIT = 10
CHANGED_GROWTH_LIMIT_SHARE = 0.03  # of the lake's size, for a sync that changed about 1 % of the shipments
VIEW_READ_LIMIT_MS = 1000  # a model made a view must not cost an analyst more than a second at 10k shipments


def dir_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def lake_figures(data_dir: Path) -> dict[str, Any]:
    """The lake's bytes (all of `ducklake/`: catalog and files), its catalog's bytes, its newest snapshot id,
    and how many shipments each load id wrote."""
    store = default_lake_in(data_dir)
    with store.connect(read_only=True) as con:
        snapshot = con.execute(f"select max(snapshot_id) from {LAKE_NAME}.snapshots()").fetchone()[0]
        loads = dict(con.execute("select _dlt_load_id, count(*) from ocean_tracking.shipments group by 1").fetchall())
    catalog = data_dir / "ducklake" / "catalog.sqlite"
    return {"bytes": dir_bytes(data_dir / "ducklake"), "catalog": catalog.stat().st_size if catalog.exists() else 0,
            "snapshot": snapshot, "loads": loads}  # fmt: skip


def files_added_since(data_dir: Path, snapshot: int) -> dict[str, int]:
    """Bytes of the data and delete files committed after `snapshot`, by schema (what each layer wrote)."""
    catalog = f"__ducklake_metadata_{LAKE_NAME}"
    with default_lake_in(data_dir).connect(read_only=True) as con:
        return dict(con.execute(f"""
            with tables as (select distinct table_id, schema_id from {catalog}.ducklake_table),
                 schemas as (select distinct schema_id, schema_name from {catalog}.ducklake_schema),
                 files as (select table_id, file_size_bytes, begin_snapshot from {catalog}.ducklake_data_file
                           union all
                           select table_id, file_size_bytes, begin_snapshot from {catalog}.ducklake_delete_file)
            select schema_name, sum(file_size_bytes)::bigint from files join tables using (table_id)
            join schemas using (schema_id) where begin_snapshot > ? group by 1 order by 2 desc""", [snapshot]).fetchall())


def view_read_ms(data_dir: Path, reads: int = 3) -> list[tuple[str, float, int]]:
    """Every model that is a view, read whole (`select *` to Arrow) as an analyst's session reads it: (view,
    median ms of `reads`, rows), slowest first. A view costs its query at every read: the issue's bound is a
    second at 10k shipments."""
    with default_lake_in(data_dir).connect(read_only=True) as con:
        views = con.execute("select schema_name, view_name from duckdb_views() where database_name = ? and "
                            "schema_name in ('analytics', '_analytics_staging')", [LAKE_NAME]).fetchall()  # fmt: skip
        timed = []
        for schema, view in views:
            seconds, rows = [], 0
            for _ in range(reads):
                began = time.perf_counter()
                rows = con.execute(f'select * from "{schema}"."{view}"').to_arrow_table().num_rows
                seconds.append(time.perf_counter() - began)
            timed.append((f"{schema}.{view}", round(1000 * statistics.median(seconds), 1), rows))
    return sorted(timed, key=lambda row: -row[1])


def commits_since(data_dir: Path, snapshot: int) -> tuple[int, int]:
    """Snapshots committed after `snapshot`, and how many of them have a commit message."""
    with default_lake_in(data_dir).connect(read_only=True) as con:
        return con.execute(f"select count(*), count(commit_message) from {LAKE_NAME}.snapshots() "
                           "where snapshot_id > ?", [snapshot]).fetchone()  # fmt: skip


def cli_sync(base_url: str, workdir: Path, window: float, maps: bool) -> tuple[float, str]:
    """`python -m pipelines sync` in a process of its own on the default lake under `workdir/data`; its wall
    time and its `Models:` line."""
    env = {**os.environ, "SOURCES__OCEAN_TRACKING__API_KEY": API_KEY, "SOURCES__OCEAN_TRACKING__BASE_URL": base_url,
           "SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS": str(window),
           "SOURCES__OCEAN_TRACKING__LIMITER_PATH": str(workdir / "limiter.sqlite"),
           "DLT_DATA_DIR": str(workdir / "dlt-home"), "OCEAN_TRACKING_DATA_DIR": str(workdir / "data"),
           "COLUMNS": "200"}  # fmt: skip
    started = time.perf_counter()
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", *([] if maps else ["--no-maps"])]
    done = subprocess.run(command, env=env, capture_output=True, text=True, check=False)
    if done.returncode != 0:
        raise SystemExit(f"sync failed: {done.stderr.strip().splitlines()[-1] if done.stderr.strip() else done.stdout}")
    said = next((line for line in done.stdout.splitlines() if line.startswith("Models:")), "Models: (not built)")
    return time.perf_counter() - started, said.removeprefix("Models: ")


def main(argv: list[str] | None = None) -> int:
    """Run the syncs, print one row each and the done-when figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=10_000)
    parser.add_argument("--unchanged-syncs", type=int, default=2)
    parser.add_argument("--changed-minutes", type=float, default=3.0, help="how far the world moves before a changed sync")
    parser.add_argument("--changed-syncs", type=int, default=1)
    parser.add_argument("--window", type=float, default=0.05, help="sandbox and client rate window, seconds")
    parser.add_argument("--no-maps", action="store_true")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--workdir", type=Path, help="keep the lake here (default: a temporary folder, removed)")
    args = parser.parse_args(argv)
    sandbox = start_sandbox("--shipments", str(args.shipments), "--seed", str(args.seed), "--rate-window",
                            str(args.window), "--speed", "0", "--start", START, "--api-key", API_KEY, timeout=900)  # fmt: skip
    rows, checks = [], []
    plan = ["full"] + ["unchanged"] * args.unchanged_syncs + ["changed"] * args.changed_syncs
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-lake-growth-") as tmp:
        workdir = args.workdir or Path(tmp)
        before: dict[str, Any] = {"bytes": 0, "catalog": 0, "snapshot": -1, "loads": {}}
        for kind in plan:
            if kind == "changed":
                requests.post(f"{sandbox.base_url.removesuffix('/v2')}/_sandbox/clock", json={"advance_seconds": args.changed_minutes * 60},
                              timeout=30).raise_for_status()  # fmt: skip
            seconds, models = cli_sync(sandbox.base_url, workdir, args.window, not args.no_maps)
            after = lake_figures(workdir / "data")
            snapshots, named = commits_since(workdir / "data", before["snapshot"])
            by_schema = files_added_since(workdir / "data", before["snapshot"])
            new_loads = set(after["loads"]) - set(before["loads"])
            changed = sum(after["loads"][load] for load in new_loads)
            total = sum(after["loads"].values())
            growth = after["bytes"] - before["bytes"]
            rows.append([kind, f"{100 * changed / total:.2f}%", after["bytes"], growth,
                         f"{100 * growth / before['bytes']:.2f}%" if before["bytes"] else "-", after["catalog"],
                         snapshots, named, round(seconds, 1),
                         ", ".join(f"{schema} {size:,}" for schema, size in by_schema.items()) or "-", models])  # fmt: skip
            if kind == "unchanged":
                checks += [["unchanged: disk growth (bytes)", growth, f"<= {UNCHANGED_GROWTH_LIMIT_BYTES:,}"],
                           ["unchanged: snapshots", snapshots, f"<= {UNCHANGED_SNAPSHOTS_LIMIT}"]]
            elif kind == "changed":
                checks.append([f"changed ({100 * changed / total:.2f}% of shipments): growth / lake",
                               f"{100 * growth / before['bytes']:.2f}%", f"<= {100 * CHANGED_GROWTH_LIMIT_SHARE:g}%"])
            print(f"  {kind}: +{growth:,} B, {snapshots} snapshots, {seconds:.1f} s ({models})", file=sys.stderr, flush=True)
            before = after
        views = view_read_ms(workdir / "data")
    print(f"\n## Lake growth per sync, models on ({args.shipments:,} shipments, maps {'off' if args.no_maps else 'on'}, "
          f"changed syncs after {args.changed_minutes:g} simulated minutes)\n")
    print(render(["sync", "shipments changed", "lake B", "growth B", "growth %", "catalog B", "snapshots",
                  "named", "wall s", "files added by schema (B)", "models"], rows))  # fmt: skip
    print("\n## The models that are views, read whole after the last sync (median of 3)\n")
    print(render(["view", "ms", "rows"], views))
    slowest = views[0] if views else ("-", 0.0, 0)
    checks.append([f"slowest view read ({slowest[0]}), ms", slowest[1], f"<= {VIEW_READ_LIMIT_MS:,}"])
    print("\n## Done-when figures\n")
    print(render(["figure", "value", "limit"], checks))
    return 0


if __name__ == "__main__":
    sys.exit(main())
