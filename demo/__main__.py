"""The one-command demo (`bash scripts/demo`, or `python -m demo`): start the sandbox, materialize every
Dagster asset into data/, print a summary, stop the sandbox. The run lands in the project's Dagster
instance (.dagster/, or $DAGSTER_HOME), so `dagster dev` shows it afterwards.

The demo can run any number of times: its sandbox always answers to the same key (`DEMO_API_KEY`) and
grows the same seeded world, so a second run is an incremental sync of the first run's lake. A first run
also watches the past: its sandbox starts `--history-weeks` weeks ago, frozen, and the demo syncs it once a
week up to today (raw tables only), so the lake holds what a team's would after weeks of syncs: ETA
versions, last free days, holds and fees as they changed, which the performance models need. It never
deletes anything; to start over, delete data/. A data folder holding another account's lake is refused
by the sync, in one line, and left as it is.

This is the one place besides the tests that composes the sandbox with the pipeline; they meet over
HTTP, as the pipeline meets the real service."""

from __future__ import annotations

import argparse
import os
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from rich.console import Console
from rich.table import Table

from pipelines.page.render import team_page_path
from pipelines.settings import (
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    APP_URL_ENV,
    BASE_URL_ENV,
    DATA_DIR_ENV,
    DATASET_NAME,
    RATE_WINDOW_ENV,
    data_dir,
    geoparquet_path,
    maps_dir,
    pipelines_dir,
)
from pipelines.sync import DatasetOfAnotherKeyError
from pipelines.warehouse import WarehouseStore, embedded_store, table_exists, table_row_counts
from sandbox.launcher import SandboxProcess, start_sandbox

PROJECT_ROOT = Path(__file__).resolve().parents[1]
# The demo's sandbox key, the same on every run: the lake a first run loads answers to this key (its dlt
# state keeps the key's fingerprint), so a later run syncs into it instead of being refused as another
# account. It opens nothing but a sandbox on loopback, so it is no secret.
DEMO_API_KEY = "sbx_demo_ocean_tracking_elt"
console = Console()
errors = Console(stderr=True, soft_wrap=True, highlight=False)


class DemoRunFailed(Exception):
    """The demo's Dagster run failed; the message is the failing step and its error, in one line."""


def sandbox_arguments(shipments: int, seed: int, rate_window: float) -> tuple[str, ...]:
    """`python -m sandbox` arguments of the demo's sandbox: the world of `seed` at `shipments`, the demo's key."""
    return ("--shipments", str(shipments), "--seed", str(seed), "--rate-window", str(rate_window),
            "--api-key", DEMO_API_KEY)  # fmt: skip


def sandbox_clock_arguments(start: datetime) -> tuple[str, ...]:
    """A frozen sandbox clock starting at `start` (the demo moves it, `advance_sandbox_clock`)."""
    return ("--start", start.isoformat(), "--speed", "0")


def advance_sandbox_clock(sandbox: SandboxProcess, to: datetime) -> None:
    """Move the demo sandbox's frozen clock forward to `to` (a control call, not an API request)."""
    root = sandbox.base_url.removesuffix("/v2")
    now = datetime.fromisoformat(requests.get(f"{root}/_sandbox/clock", timeout=10).json()["now"])
    if to > now:
        requests.post(f"{root}/_sandbox/clock", json={"advance_seconds": (to - now).total_seconds()},
                      timeout=10).raise_for_status()  # fmt: skip


def has_history(warehouse: WarehouseStore) -> bool:
    """Whether the demo lake already holds synced history (a first run replays weeks of it, a later run
    continues from it: replaying the past again would date versions before those the lake holds)."""
    if not warehouse.exists():
        return False
    with warehouse.connect(read_only=True) as con:
        return table_exists(con, DATASET_NAME, "shipment_eta_history")


def replay_history(sandbox: SandboxProcess, start: datetime, today: datetime, rate_window: float) -> int:
    """Sync the demo sandbox once a week from `start` up to (not including) `today` into the demo lake, raw
    tables only, with dlt's working folders where the Dagster job keeps them; returns the syncs run. The
    Dagster job then syncs today, with maps and models."""
    from pipelines.api.client import OceanTrackingClient
    from pipelines.api.config import load_settings
    from pipelines.sync import sync_account
    from pipelines.warehouse.destinations import ducklake_target

    settings = load_settings(api_key=sandbox.api_key, base_url=sandbox.base_url, app_url=sandbox.app_url,
                             rate_window_seconds=rate_window)  # fmt: skip
    working_dir = pipelines_dir(default=Path(os.environ["DAGSTER_HOME"]) / "dlt_pipelines")
    syncs, at = 0, start
    with OceanTrackingClient(settings) as client:
        while at < today:
            advance_sandbox_clock(sandbox, at)
            try:
                sync_account(client, ducklake_target(), include_maps=False, models=False, pipelines_dir=working_dir)
            except DatasetOfAnotherKeyError as error:
                raise DemoRunFailed(another_key_message()) from error
            syncs += 1
            console.print(f"  history: synced the account as it was on {at:%Y-%m-%d}")
            at += timedelta(weeks=1)
    return syncs


def point_dagster_at(sandbox: SandboxProcess, rate_window: float) -> None:
    """Configure the code location through the environment it reads (the key only as a variable, so
    Dagster records its name, never its value); the instance is $DAGSTER_HOME, else the project's."""
    os.environ.update(
        {
            API_KEY_ENV: sandbox.api_key,
            BASE_URL_ENV: sandbox.base_url,
            APP_URL_ENV: sandbox.app_url,
            RATE_WINDOW_ENV: str(rate_window),
        }
    )
    os.environ.setdefault("DAGSTER_HOME", str(PROJECT_ROOT))


def root_error(error) -> tuple[str, str]:
    """The innermost error of a Dagster error chain (the step's own exception, not Dagster's wrapper): its
    class name, and its message without the class name on one line (our errors are written that way)."""
    while error.cause is not None:
        error = error.cause
    text = error.message.strip()
    marker = f"{error.cls_name}: "
    if marker in text:
        text = text.split(marker, 1)[1]
    return error.cls_name, " ".join(text.split()) or error.cls_name


def another_key_message() -> str:
    """What the demo says over a lake another key loaded (the sync refuses it: `DatasetOfAnotherKeyError`)."""
    return (f"{data_dir()}/ holds a lake loaded with another API key than the demo's (a real account's, or a "
            "demo's from before the demo kept one key); the demo leaves it as it is: move it away "
            f"(mv {data_dir()} {data_dir()}-old) or set {DATA_DIR_ENV} to another folder")


def materialize_everything(debug: bool = False) -> None:
    """Run the `full_sync` job (every asset and check) in this process on the Dagster instance; raise
    DemoRunFailed naming the failing step or check. Dagster's own log is shown with `debug` only."""
    import dagster as dg

    from assets.definitions import defs  # imported late: it reads the environment set above

    job = defs.resolve_job_def("full_sync")
    with dg.DagsterInstance.get() as instance:
        log_level = "WARNING" if debug else "CRITICAL"
        quiet = {"loggers": {"console": {"config": {"log_level": log_level}}}}
        result = job.execute_in_process(instance=instance, raise_on_error=False, run_config=quiet)
        events = list(result.all_events)
    failures = [e for e in events if e.event_type_value == "STEP_FAILURE"]
    if failures:
        first = failures[0]
        kind, message = root_error(first.event_specific_data.error)
        if kind == DatasetOfAnotherKeyError.__name__:
            message = another_key_message()
        raise DemoRunFailed(f"Dagster run {result.run_id[:8]} failed in step {first.step_key}: {message}")
    checks = [e.event_specific_data for e in events if e.event_type_value == "ASSET_CHECK_EVALUATION"]
    failed = [f"{c.asset_key.to_user_string()}:{c.check_name}" for c in checks if not c.passed]
    if failed or not result.success:
        raise DemoRunFailed(f"Dagster run {result.run_id[:8]}: {len(failed)} of {len(checks)} asset checks "
                            f"failed: {', '.join(failed) or 'none'}")  # fmt: skip
    console.print(f"Dagster run {result.run_id[:8]}: succeeded, {len(checks)}/{len(checks)} asset checks passed")


def print_summary(warehouse: WarehouseStore, sandbox: SandboxProcess, seconds: float) -> None:
    """Tables and rows, API requests the sandbox served, where the files are, how to query and how to
    open the UI."""
    table = Table(title=warehouse.place)
    table.add_column("table", overflow="fold")
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
    console.print(f"Team page (open it in a browser, offline): {team_page_path()}")
    console.print("Query it (read-only, also while a run writes): .venv/bin/python -m pipelines lake session")
    console.print(f"Done in {seconds:.0f}s. Open the Dagster UI on this run: bash scripts/dagster-dev")


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m demo` (what `bash scripts/demo` runs): 0 when the run and every asset
    check passed, else 1 after one line saying what failed (`--debug`: Dagster's log and the traceback)."""
    parser = argparse.ArgumentParser(prog="python -m demo", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=200, help="sandbox scale (default 200)")
    parser.add_argument("--seed", type=int, default=7, help="the sandbox world's seed (default 7)")
    parser.add_argument("--rate-window", type=float, default=3.0, help="sandbox rate window, seconds (real: 60)")
    parser.add_argument("--history-weeks", type=int, default=6,
                        help="weeks of weekly syncs a first run replays before today (default 6; 0: none)")
    parser.add_argument("--debug", action="store_true", help="show Dagster's log and tracebacks")
    args = parser.parse_args(argv)

    started = time.monotonic()
    try:
        warehouse = embedded_store()
        console.print(f"Starting the sandbox ({args.shipments} shipments, seed {args.seed})…")
        today = datetime.now(UTC).replace(microsecond=0)
        replay = args.history_weeks > 0 and not has_history(warehouse)
        start = today - timedelta(weeks=args.history_weeks) if replay else today
        arguments = (*sandbox_arguments(args.shipments, args.seed, args.rate_window), *sandbox_clock_arguments(start))
        with start_sandbox(*arguments) as sandbox:
            point_dagster_at(sandbox, args.rate_window)
            if replay:
                console.print(f"Sandbox at {sandbox.base_url}; replaying {args.history_weeks} weeks of syncs …")
                replay_history(sandbox, start, today, args.rate_window)
            advance_sandbox_clock(sandbox, today)
            console.print(f"Sandbox at {sandbox.base_url}; materializing every asset into {data_dir()}/ …")
            materialize_everything(debug=args.debug)
            print_summary(warehouse, sandbox, time.monotonic() - started)
    except Exception as error:
        if args.debug:
            raise
        errors.print(f"error: the demo failed: {error}", markup=False)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
