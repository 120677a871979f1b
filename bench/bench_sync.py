"""One pipeline sync against a sandbox, timed, with the client's own counters (shared by the benchmarks
and their memory child process). Run alone, a full and an incremental sync of a fresh sandbox:

    uv run python bench/bench_sync.py [--shipments 60] [--window 1] [--destination ducklake|duckdb]
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench_table import render

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.sync import sync_account
from pipelines.warehouse import default_lake_in
from pipelines.warehouse.destinations import Target, duckdb_target, ducklake_target

API_KEY = "sbx_bench_0123456789abcdef"
# the embedded warehouses a benchmark can load into; the DuckLake is the pipeline's default
DESTINATIONS = ("ducklake", "duckdb")


@dataclass
class SyncFigures:
    """What one sync cost: client stats (requests, waits, retries, 429s), wall seconds, rows loaded."""

    stats: dict[str, Any]
    wall_seconds: float
    rows: dict[str, int]

    @property
    def requests(self) -> int:
        """Requests sent in every bucket, retries included."""
        return sum(self.stats["requests"].values())

    @property
    def wait_seconds(self) -> float:
        """Seconds the proactive limiter held requests back, all buckets."""
        return sum(self.stats["wait_seconds"].values())


def make_client(base_url: str, api_key: str, window: float, limiter_path: Path) -> OceanTrackingClient:
    """A client whose limiter window matches the sandbox's `--rate-window`."""
    settings = load_settings(
        api_key=api_key, base_url=base_url, rate_window_seconds=window, limiter_path=limiter_path
    )
    return OceanTrackingClient(settings)


def warehouse_target(workdir: Path, destination: str = "ducklake") -> Target:
    """The embedded warehouse a benchmark loads into, in `workdir`: the DuckLake (a SQLite catalog and
    Parquet files under `workdir/ducklake`) or, with `duckdb`, the plain file `workdir/warehouse.duckdb`."""
    if destination == "duckdb":
        return duckdb_target(workdir / "warehouse.duckdb")
    if destination != "ducklake":
        raise ValueError(f"destination must be one of {DESTINATIONS}, not {destination!r}")
    return ducklake_target(default_lake_in(workdir))


def sync(
    base_url: str, api_key: str, window: float, workdir: Path, destination: str = "ducklake", include_maps: bool = True
) -> SyncFigures:
    """Run one sync into the warehouse in `workdir` (`warehouse_target`; pipeline state and limiter log in
    workdir too), fetching maps unless `include_maps` is False.

    A first call in a fresh workdir is a full sync; later calls with the same workdir are incremental.
    """
    target = warehouse_target(workdir, destination)
    with make_client(base_url, api_key, window, workdir / "limiter.sqlite") as client:
        started = time.perf_counter()
        result = sync_account(client, target, include_maps=include_maps, pipelines_dir=workdir / "dlt", models=False)
        wall = time.perf_counter() - started
        return SyncFigures(result.api_stats, wall, result.row_counts)


def main(argv: list[str] | None = None) -> int:
    """A full then an incremental sync of a fresh sandbox; prints one row per sync."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=60, help="shipments in the sandbox world (at least 50)")
    parser.add_argument("--window", type=float, default=1.0, help="sandbox and client rate window, seconds")
    parser.add_argument("--destination", choices=DESTINATIONS, default="ducklake", help="the embedded warehouse")
    args = parser.parse_args(argv)
    from sandbox.launcher import start_sandbox

    sandbox = start_sandbox("--shipments", str(args.shipments), "--rate-window", str(args.window),
                            "--api-key", API_KEY)
    rows = []
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-sync-") as tmp:
        for label in ("full", "incremental"):
            figures = sync(sandbox.base_url, API_KEY, args.window, Path(tmp), args.destination)
            rows.append((label, figures.requests, figures.wall_seconds, figures.wait_seconds,
                         sum(figures.rows.values())))
    print(f"\n## Syncs of {args.shipments} shipments into {args.destination} (window {args.window:g} s)\n")
    print(render(("sync", "requests", "wall s", "wait s", "rows"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
