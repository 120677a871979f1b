"""Command line: `python -m pipelines sync` extracts an account; `python -m pipelines demo` does it
against a freshly started sandbox. Both end with rows per table and requests spent per bucket."""

from __future__ import annotations

import argparse
import logging
import sys
import time
from pathlib import Path

from dlt.pipeline.exceptions import PipelineStepFailed
from rich.console import Console
from rich.table import Table

from pipelines.client import OceanTrackingClient
from pipelines.config import load_settings
from pipelines.errors import PipelineError
from pipelines.exports import DEFAULT_GEOPARQUET_PATH, export_map_features_geoparquet
from pipelines.pipeline import (
    DEFAULT_DUCKDB_PATH,
    DEFAULT_LAKE_URL,
    duckdb_target,
    lake_target,
    make_pipeline,
    named_target,
    run_sync,
    table_row_counts,
)
from pipelines.progress import live_stats
from pipelines.sandbox_process import start_sandbox
from pipelines.source import ocean_tracking
from pipelines.writeback.cli import register as register_writeback

console = Console()


def build_parser() -> argparse.ArgumentParser:
    """The `sync` and `demo` subcommands and their overrides."""
    parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__)
    commands = parser.add_subparsers(dest="command", required=True)

    sync = commands.add_parser("sync", help="extract the account into the destination")
    sync.add_argument("--base-url", help="API base URL ending in /v2 (default: config or the real service)")
    sync.add_argument(
        "--api-key",
        help="API key (prefer SOURCES__OCEAN_TRACKING__API_KEY: a key on the command line shows in `ps`)",
    )
    _add_destination_args(sync)

    demo = commands.add_parser("demo", help="start the sandbox and sync it into data/")
    demo.add_argument("--shipments", type=int, default=500, help="sandbox scale (default 500)")
    demo.add_argument("--seed", type=int, default=7)
    demo.add_argument(
        "--rate-window",
        type=float,
        default=3.0,
        help="the sandbox's rate window in seconds (the real service: 60); the client matches it",
    )
    _add_destination_args(demo)
    register_writeback(commands)
    return parser


def _add_destination_args(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--duckdb", type=Path, default=DEFAULT_DUCKDB_PATH, help="DuckDB file")
    parser.add_argument(
        "--destination",
        default="duckdb",
        help="duckdb (default), filesystem (Parquet/Delta lake) or any dlt destination name",
    )
    parser.add_argument("--lake-url", default=str(DEFAULT_LAKE_URL), help="bucket URL for --destination filesystem")
    parser.add_argument("--no-maps", action="store_true", help="skip route maps")
    parser.add_argument(
        "--geoparquet", type=Path, default=DEFAULT_GEOPARQUET_PATH, help="where to write the map features"
    )
    parser.add_argument("--no-progress", action="store_true", help="no live status line")


def sync(args: argparse.Namespace, *, base_url: str | None, api_key: str | None, **overrides) -> int:
    """Run one sync and print the summary; configuration errors are reported without a traceback."""
    settings = load_settings(api_key=api_key, base_url=base_url, **overrides)
    if args.destination == "duckdb":
        target = duckdb_target(args.duckdb)
    elif args.destination == "filesystem":
        target = lake_target(args.lake_url)
    else:
        target = named_target(args.destination)
    started = time.monotonic()
    with OceanTrackingClient(settings) as client:
        pipeline = make_pipeline(target)
        source = ocean_tracking(client=client, include_maps=not args.no_maps)
        with live_stats(client.stats, enabled=not args.no_progress and sys.stderr.isatty()):
            run_sync(pipeline, source, target)
        stats = client.stats()
    _print_summary(target, stats, time.monotonic() - started)
    if target.duckdb_path is not None and not args.no_maps:
        written = export_map_features_geoparquet(target.duckdb_path, args.geoparquet)
        if written:
            console.print(f"GeoParquet of the map features: {written}")
    return 0


def _print_summary(target, stats: dict, seconds: float) -> None:
    if target.duckdb_path is not None:
        counts = Table(title=f"Rows in {target.duckdb_path} (dataset {target.dataset_name})")
        counts.add_column("table")
        counts.add_column("rows", justify="right")
        for table, rows in table_row_counts(target.duckdb_path, target.dataset_name).items():
            counts.add_row(table, f"{rows:,}")
        console.print(counts)
    spent = Table(title="API requests spent")
    spent.add_column("bucket")
    spent.add_column("requests", justify="right")
    spent.add_column("waited for budget (s)", justify="right")
    for bucket, count in sorted(stats["requests"].items()):
        spent.add_row(bucket, str(count), f"{stats['wait_seconds'].get(bucket, 0.0):.1f}")
    console.print(spent)
    console.print(f"retries {stats['retries']}, 429s received {stats['responses_429']}, wall time {seconds:.1f}s")


def demo(args: argparse.Namespace) -> int:
    """Start a sandbox, sync it, stop it."""
    console.print(f"Starting the sandbox ({args.shipments} shipments, seed {args.seed})…")
    options = ("--shipments", str(args.shipments), "--seed", str(args.seed), "--rate-window", str(args.rate_window))
    with start_sandbox(*options) as sandbox:
        console.print(f"Sandbox at {sandbox.base_url} (rate window {args.rate_window:g}s)")
        return sync(
            args, base_url=sandbox.base_url, api_key=sandbox.api_key, rate_window_seconds=args.rate_window
        )


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m pipelines` and the `ocean-tracking` script."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # dlt warns about every column that is still all-null; the live service has many of those.
    logging.getLogger("dlt").setLevel(logging.ERROR)
    args = build_parser().parse_args(argv)
    try:
        if getattr(args, "handler", None):
            return args.handler(args)
        if args.command == "demo":
            return demo(args)
        return sync(args, base_url=args.base_url, api_key=args.api_key)
    except (PipelineError, PipelineStepFailed) as error:
        cause = error.exception if isinstance(error, PipelineStepFailed) else error
        while not isinstance(cause, PipelineError) and cause.__cause__ is not None:
            cause = cause.__cause__
        console.print(f"[red]error:[/red] {cause}")
        return 2


if __name__ == "__main__":
    sys.exit(main())
