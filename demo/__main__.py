"""The one-command demo (`bash scripts/demo`, or `python -m demo`): start the sandbox, materialize every
Dagster asset into data/, print a summary, stop the sandbox. The run lands in the project's Dagster
instance (.dagster/), so `dagster dev` shows it afterwards.

This is the one place besides the tests that composes the sandbox with the pipeline; they meet over
HTTP, as the pipeline meets the real service."""

from __future__ import annotations

import argparse
import os
import sys
import time
from pathlib import Path

import requests
from rich.console import Console
from rich.table import Table

from pipelines.settings import (
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    APP_URL_ENV,
    BASE_URL_ENV,
    DATASET_NAME,
    RATE_WINDOW_ENV,
    data_dir,
    geoparquet_path,
    maps_dir,
)
from pipelines.warehouse.store import WarehouseStore, embedded_store
from pipelines.warehouse.tables import table_row_counts
from sandbox.launcher import SandboxProcess, start_sandbox

PROJECT_ROOT = Path(__file__).resolve().parents[1]
console = Console()


def point_dagster_at(sandbox: SandboxProcess, rate_window: float) -> None:
    """Configure the code location through the environment it reads (the key only as a variable, so
    Dagster records its name, never its value)."""
    os.environ.update(
        {
            API_KEY_ENV: sandbox.api_key,
            BASE_URL_ENV: sandbox.base_url,
            APP_URL_ENV: sandbox.app_url,
            RATE_WINDOW_ENV: str(rate_window),
            "DAGSTER_HOME": str(PROJECT_ROOT),
        }
    )


def materialize_everything() -> bool:
    """Run the `full_sync` job (every asset and check) in this process on the project's instance."""
    import dagster as dg

    from assets.definitions import defs  # imported late: it reads the environment set above

    job = defs.resolve_job_def("full_sync")
    with dg.DagsterInstance.get() as instance:
        quiet = {"loggers": {"console": {"config": {"log_level": "WARNING"}}}}
        result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=quiet)
        checks = [
            event.event_specific_data
            for event in result.all_events
            if event.event_type_value == "ASSET_CHECK_EVALUATION"
        ]
    failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks if not c.passed]
    console.print(
        f"Dagster run {result.run_id[:8]}: {'succeeded' if result.success else 'FAILED'}, "
        f"{len(checks) - len(failed)}/{len(checks)} asset checks passed"
    )
    for name in failed:
        console.print(f"  [red]check failed:[/red] {name}")
    return result.success and not failed


def print_summary(warehouse: WarehouseStore, sandbox: SandboxProcess, seconds: float) -> None:
    """Tables and rows, API requests the sandbox served, where the files are, how to query and how to
    open the UI."""
    table = Table(title=warehouse.place)
    table.add_column("table")
    table.add_column("rows", justify="right")
    for schema in (DATASET_NAME, ANALYTICS_SCHEMA):
        for name, count in table_row_counts(warehouse, schema, views=True).items():
            table.add_row(f"{schema}.{name}", f"{count:,}")
    console.print(table)
    root = sandbox.base_url.removesuffix("/v2")
    served = requests.get(f"{root}/_sandbox/stats", timeout=10).json()
    spent = {}
    for per_bucket in served["requests_by_key"].values():
        for bucket, count in per_bucket.items():
            spent[bucket] = spent.get(bucket, 0) + count
    console.print(f"API requests spent: {spent}; 429s served: {served['rate_limited_total']}")
    routes = maps_dir() / "routes"
    console.print(f"GeoParquet: {geoparquet_path()}")
    console.print(f"Route maps: {routes}/*.png ({len(list(routes.glob('*.png')))}), "
                  f"overview {maps_dir() / 'overview.png'}")
    console.print("Query it (read-only, also while a run writes): .venv/bin/python -m pipelines lake session")
    console.print(f"Done in {seconds:.0f}s. Open the Dagster UI on this run: bash scripts/dagster-dev")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m demo` (what `bash scripts/demo` runs)."""
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__)
    parser.add_argument("--shipments", type=int, default=200, help="sandbox scale (default 200)")
    parser.add_argument("--seed", type=int, default=7)
    parser.add_argument("--rate-window", type=float, default=3.0, help="sandbox rate window, seconds (real: 60)")
    args = parser.parse_args(argv)

    started = time.monotonic()
    warehouse = embedded_store()
    console.print(f"Starting the sandbox ({args.shipments} shipments, seed {args.seed})…")
    sandbox_args = ("--shipments", str(args.shipments), "--seed", str(args.seed), "--rate-window", str(args.rate_window))
    with start_sandbox(*sandbox_args) as sandbox:
        console.print(f"Sandbox at {sandbox.base_url}; materializing every asset into {data_dir()}/ …")
        point_dagster_at(sandbox, args.rate_window)
        ok = materialize_everything()
        print_summary(warehouse, sandbox, time.monotonic() - started)
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
