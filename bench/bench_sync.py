"""One pipeline sync against a sandbox, timed, with the client's own counters (shared by the benchmark
and its memory child process)."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.sync import sync_account
from pipelines.warehouse.destinations import duckdb_target


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


def sync(base_url: str, api_key: str, window: float, workdir: Path) -> SyncFigures:
    """Run one sync into `workdir/warehouse.duckdb` (pipeline state and limiter log in workdir too).

    A first call in a fresh workdir is a full sync; later calls with the same workdir are incremental.
    """
    target = duckdb_target(workdir / "warehouse.duckdb")
    with make_client(base_url, api_key, window, workdir / "limiter.sqlite") as client:
        started = time.perf_counter()
        result = sync_account(client, target, pipelines_dir=workdir / "dlt", models=False)
        wall = time.perf_counter() - started
        return SyncFigures(result.api_stats, wall, result.row_counts)
