"""The command line, `python -m pipelines` (or `ocean-tracking`): `sync` extracts an account into a
destination and builds the analytics models; `refresh` loads only what webhook notifications name, or the
route maps a budget allows; the write-back commands change the account; `webhooks` receives notifications;
`lake` opens an analyst's session on the lake, backs it up, restores, migrates and maintains it; `page`
writes the team page. Here are
`main`, the parser, `sync` and `refresh`; the other command groups are in `pipelines.cli.commands`.

Errors the user can act on are one line on stderr, exit code 2, no traceback (`--debug` shows it); Ctrl-C
and SIGTERM are one line too, exit code 130 or 143.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
import threading
import time
from collections.abc import Callable
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from dlt.common.exceptions import SignalReceivedException
from dlt.pipeline.exceptions import PipelineStepFailed
from rich.live import Live
from rich.markup import escape
from rich.table import Table
from rich.text import Text

from pipelines.api import account_named
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import Settings, load_settings
from pipelines.cli.commands import (
    console,
    errors,
    register_lake,
    register_page,
    register_webhooks,
    register_writeback,
)
from pipelines.errors import ConfigurationError, PipelineError
from pipelines.geo import export_map_features_geoparquet
from pipelines.journals import NotificationJournal
from pipelines.settings import (
    ACCOUNTS_ENV,
    API_KEY_ENV,
    CUSTOM_FIELDS_EVERY_ENV,
    DATASET_NAME,
    DEFAULT_BASE_URL,
    DESTINATION_ENV,
    default_destination,
    duckdb_path,
    geoparquet_path,
    lake_url,
)
from pipelines.source.bookkeeping import raise_if_excessive
from pipelines.source.map_schedule import DEFAULT_FRESHNESS_BOUND_SECONDS
from pipelines.sync import SyncResult, refresh_from_notifications, refresh_maps, sync_account
from pipelines.warehouse import GEO_VIEW
from pipelines.warehouse.destinations import Target, resolve_target


def build_parser() -> argparse.ArgumentParser:
    """The `sync` command and its overrides, plus the write-back, lake and webhooks commands."""
    parser = argparse.ArgumentParser(prog="python -m pipelines", description=__doc__)
    parser.add_argument("--debug", action="store_true", help="show tracebacks")
    commands = parser.add_subparsers(dest="command", required=True)

    sync = commands.add_parser(
        "sync", help="extract the account into the destination, then build the models",
        description="Extract the whole account (shipments, containers, events, references, route maps) into the "
        "destination, only what changed since the last sync, then build the analytics models (dbt). A sync "
        "interrupted at any point loses nothing: the next one finishes what it left pending.")
    add_account_arguments(sync)
    sync.add_argument("--no-maps", action="store_true", help="skip route maps")
    sync.add_argument("--no-models", action="store_true", help="load the raw tables only")
    sync.add_argument("--geoparquet", type=Path, default=None,
                      help=f"where to write the map features (default {geoparquet_path()}; one file an account)")
    sync.add_argument("--list-custom-fields", action="store_true",
                      help="list the custom fields and their definitions now, whatever their cadence "
                      f"({CUSTOM_FIELDS_EVERY_ENV})")
    sync.add_argument("--adopt-new-key", action="store_true",
                      help="the dataset was loaded with another key of this same account (a rotated key): take this one")
    sync.set_defaults(handler=run_sync)
    refresh = commands.add_parser(
        "refresh", help="load only what the journaled webhook notifications name (a targeted refresh)",
        description="Load only what the webhook notifications journaled by `webhooks serve` name (a targeted "
        "refresh, through the same load path as a sync), or with --maps spend a budget of requests on the route "
        "maps the map-freshness scheduler ranks first.")
    add_account_arguments(refresh)
    refresh.add_argument("--maps", type=int, metavar="BUDGET", default=None,
                         help="instead: fetch the route maps the map-freshness scheduler ranks first, at most "
                         "BUDGET requests")
    refresh.add_argument("--bound-minutes", type=float, default=DEFAULT_FRESHNESS_BOUND_SECONDS / 60,
                         help="with --maps: the freshness bound the scheduler reports against")
    refresh.set_defaults(handler=run_refresh)
    register_writeback(commands)
    register_lake(commands)
    register_page(commands)
    register_webhooks(commands)
    return parser


def add_account_arguments(parser: argparse.ArgumentParser) -> None:
    """The options that say which account to read and where to load it (`sync` and `refresh`)."""
    parser.add_argument(
        "--account", help=f"which of the accounts named in {ACCOUNTS_ENV} (its key, settings, dataset and models "
        "schema); without accounts configured, the one account of [sources.ocean_tracking]")
    parser.add_argument("--base-url", help=f"API base URL ending in /v2 (default: config, else {DEFAULT_BASE_URL})")
    parser.add_argument(
        "--api-key", help=f"API key (prefer {API_KEY_ENV}: a key on the command line shows in `ps`)"
    )
    parser.add_argument("--rate-window", type=float, default=None, help="the service's rate window, seconds")
    parser.add_argument("--duckdb", type=Path, default=None,
                        help=f"load into this DuckDB file (--destination duckdb; its default file is {duckdb_path()})")
    parser.add_argument(
        "--destination",
        default=None,
        help=f"ducklake (the default, or {DESTINATION_ENV}): analysts query while syncs write; duckdb (one "
        "file, one process at a time); filesystem (Parquet/Delta lake); or any dlt destination name",
    )
    parser.add_argument("--lake-url", default=str(lake_url()), help="bucket URL for --destination filesystem")
    parser.add_argument(
        "--dataset",
        default=None,
        help=f"dataset (schema) of the raw tables (default {DATASET_NAME}, or {DATASET_NAME}_<account> with "
        "--account); a dataset answers to one API key",
    )
    parser.add_argument("--no-progress", action="store_true", help="no live status line")


def chosen_destination(args: argparse.Namespace) -> str:
    """The destination the options name: `--destination`; else `duckdb` when `--duckdb` names its file; else
    the default ($OCEAN_TRACKING_DESTINATION, or the DuckLake). A `--duckdb` beside another destination is
    refused rather than ignored: the user meant one of the two."""
    if args.duckdb is None:
        return args.destination or default_destination()
    if args.destination not in (None, "duckdb"):
        raise ConfigurationError(
            f"--duckdb names a DuckDB file, but --destination is {args.destination}: drop --duckdb, or use "
            "--destination duckdb.")
    return "duckdb"


def account_settings(args: argparse.Namespace) -> tuple[Settings, Target]:
    """The API settings of the account the options name, and the target its data goes to."""
    account = account_named(args.account)
    settings = load_settings(api_key=args.api_key, base_url=args.base_url, rate_window_seconds=args.rate_window,
                             account=account)
    target = resolve_target(chosen_destination(args), duckdb_file=args.duckdb, lake=args.lake_url,
                            dataset_name=args.dataset or account.dataset_name)
    return settings, target


def run_refresh(args: argparse.Namespace) -> int:
    """Apply the webhook journal's pending notifications, or with `--maps` spend a budget on route maps."""
    settings, target = account_settings(args)
    show_progress = not args.no_progress and sys.stderr.isatty()
    with OceanTrackingClient(settings) as client, live_stats(client.stats, enabled=show_progress):
        if args.maps is not None:
            maps = refresh_maps(client, target, args.maps, bound_seconds=args.bound_minutes * 60)
            console.print(f"Route maps: {maps.plan.explain()} ({describe_stats(maps.api_stats)})", markup=False,
                          soft_wrap=True)
            return 0
        with NotificationJournal(account=settings.account) as journal:
            result = refresh_from_notifications(client, target, journal)
    console.print(result.summary(), markup=False, soft_wrap=True)
    for notice_id, why in sorted(result.failed.items()):
        errors.print(f"[yellow]warning:[/yellow] notification {escape(notice_id)} could not be applied: "
                     f"{escape(why)}", soft_wrap=True)
    return 1 if result.failed else 0


def run_sync(args: argparse.Namespace) -> int:
    """Run one sync and print the summary."""
    settings, target = account_settings(args)
    if args.list_custom_fields:
        settings = settings.with_overrides(custom_fields_every_hours=0)
    started = time.monotonic()
    show_progress = not args.no_progress and sys.stderr.isatty()
    with OceanTrackingClient(settings) as client, live_stats(client.stats, enabled=show_progress):
        result = sync_account(client, target, include_maps=not args.no_maps, models=not args.no_models,
                              adopt_key=args.adopt_new_key)
    print_summary(target, result, time.monotonic() - started, settings.account.analytics_schema)
    if target.store is not None and not args.no_maps:
        export = export_map_features_geoparquet(target.store, args.geoparquet or geoparquet_path(settings.account),
                                                target.dataset_name)
        if export:
            unchanged = "" if export.written else " (no map changed: left as it was)"
            console.print(f"GeoParquet of the map features: {export.path}{unchanged}")
    elif not args.no_maps:
        console.print(maps_elsewhere(target, typed_view=bool(result.loaded.postgis_view)), soft_wrap=True)
    raise_if_excessive(result.loaded.issues)
    if warning := result.loaded.issues.warning():
        errors.print(f"[yellow]warning:[/yellow] {escape(warning)}", soft_wrap=True)
    return 0


def maps_elsewhere(target: Target, *, typed_view: bool) -> str:
    """On a destination other than the embedded warehouse: one line saying that no GeoParquet is written (it
    and the PNG route maps are made from the embedded warehouse) and where the map features are instead (with
    their PostGIS view when the load made one: `typed_view`)."""
    view = f", typed by PostGIS in {target.dataset_name}.{GEO_VIEW}" if typed_view else ""
    return (f"No GeoParquet written: the GeoParquet export and the PNG route maps are made from the embedded "
            f"warehouse only (--destination ducklake or duckdb); the map features are in "
            f"{target.dataset_name}.map_features{view}.")


def print_summary(target: Target, result: SyncResult, seconds: float, analytics_schema: str) -> None:
    """Rows per table and model, then what the sync spent of the rate budget."""
    if result.loaded.finished_pending_load:
        console.print("Finished the load an interrupted sync had left pending, then synced afresh.")
    if target.store is not None or result.model_rows:  # the models built on a server (PostgreSQL) too
        destination = getattr(target.destination, "destination_name", target.destination)  # a name or a factory
        place = target.store.place if target.store is not None else destination
        counts = Table(title=f"Rows in {place}")
        counts.add_column("table", overflow="fold")
        counts.add_column("rows", justify="right")
        for table, rows in result.row_counts.items():
            counts.add_row(f"{target.dataset_name}.{table}", f"{rows:,}")
        for model, rows in result.model_rows.items():
            counts.add_row(f"{analytics_schema}.{model}", f"{rows:,}")
        console.print(counts)
    if result.models_reason:
        console.print(f"Models: {result.models_reason}.", markup=False, soft_wrap=True)
    stats = result.api_stats
    spent = Table(title="API requests spent")
    spent.add_column("bucket", overflow="fold")
    spent.add_column("requests", justify="right")
    spent.add_column("waited for budget (s)", justify="right")
    for bucket, count in sorted(stats["requests"].items()):
        spent.add_row(bucket, str(count), f"{stats['wait_seconds'].get(bucket, 0.0):.1f}")
    console.print(spent)
    console.print(f"retries {stats['retries']}, 429s received {stats['responses_429']}, wall time {seconds:.1f}s")


def describe_stats(stats: dict[str, Any]) -> str:
    """One line from `OceanTrackingClient.stats()`: what the budget went on so far."""
    buckets = stats.get("requests") or {}
    spent = ", ".join(f"{name} {count}" for name, count in sorted(buckets.items())) or "none yet"
    waited = sum((stats.get("wait_seconds") or {}).values())
    return (
        f"requests: {spent} | waited for budget {waited:.1f}s | "
        f"retries {stats.get('retries', 0)} | 429s {stats.get('responses_429', 0)}"
    )


@contextmanager
def live_stats(read_stats: Callable[[], dict[str, Any]], enabled: bool = True):
    """A live status line on stderr, refreshed from `read_stats` twice a second until the block ends."""
    if not enabled:
        yield
        return
    stop = threading.Event()
    with Live(Text("starting…"), console=errors, refresh_per_second=4, transient=True) as live:

        def refresh() -> None:
            while not stop.wait(0.5):
                live.update(Text(describe_stats(read_stats())))

        thread = threading.Thread(target=refresh, name="sync-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(2)


def one_line(message: str) -> str:
    """An error's message on one line: an API error lists the service's error objects (`  - ...`) and a
    hint on lines of their own; here the objects go in parentheses after the first line, then the hint."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    if not lines:
        return message
    details = [line[2:] for line in lines[1:] if line.startswith("- ")]
    hints = [line for line in lines[1:] if not line.startswith("- ")]
    head = f"{lines[0]} ({'; '.join(details)})" if details else lines[0]
    return " ".join([head, *hints])


class Terminated(KeyboardInterrupt):
    """SIGTERM, raised where the main thread is, as Ctrl-C raises KeyboardInterrupt: a run stopped by a
    service manager or `kill` unwinds (locks released, nothing half-committed) and says so in one line."""


def _terminate(signum: int, frame: Any) -> None:
    raise Terminated()


def interrupting_signal(error: BaseException) -> int | None:
    """The signal that stopped the run (SIGINT or SIGTERM) when `error` is, or wraps, an interruption: Python's
    KeyboardInterrupt, our `Terminated`, or dlt's SignalReceivedException (dlt defers the signal while it
    normalizes or loads, then raises it, wrapped in PipelineStepFailed); else None."""
    seen: set[int] = set()
    current: BaseException | None = error
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, SignalReceivedException):
            return current.signal_code
        if isinstance(current, KeyboardInterrupt):
            return signal.SIGTERM if isinstance(current, Terminated) else signal.SIGINT
        wrapped = current.exception if isinstance(current, PipelineStepFailed) else None
        current = wrapped or current.__cause__ or current.__context__
    return None


def interrupted_line(signum: int, command: str) -> str:
    """One line saying the run was interrupted, what is kept and what the next run does."""
    how = "Ctrl-C" if signum == signal.SIGINT else signal.Signals(signum).name
    if command in ("sync", "refresh"):
        return (f"interrupted ({how}): the warehouse keeps what earlier runs loaded, each load whole or not at "
                "all; the next sync or refresh finishes what this one left pending, then goes on.")
    return f"interrupted ({how}) before `{command}` finished; run it again."


def main(argv: list[str] | None = None) -> int:
    """Entry point of `python -m pipelines` and the `ocean-tracking` script. Ctrl-C and SIGTERM end a run
    with one line (exit code 128 + the signal: 130, 143), never a traceback or dlt's `signal_code=2`."""
    logging.basicConfig(level=logging.WARNING, format="%(levelname)s %(name)s: %(message)s")
    # dlt warns about every column that is still all-null; the live service has many of those. dlt sets its
    # logger's level from its runtime config when a pipeline starts, so the level is set there (a user's
    # RUNTIME__LOG_LEVEL still wins).
    os.environ.setdefault("RUNTIME__LOG_LEVEL", "ERROR")
    args = build_parser().parse_args(argv)
    signal.signal(signal.SIGTERM, _terminate)
    try:
        return args.handler(args)
    except BaseException as error:
        signum = interrupting_signal(error)
        if args.debug or (signum is None and not isinstance(error, PipelineError | PipelineStepFailed)):
            raise
        if signum is not None:
            errors.print(f"[yellow]{escape(interrupted_line(signum, args.command))}[/yellow]", soft_wrap=True)
            return 128 + signum
        cause = error.exception if isinstance(error, PipelineStepFailed) else error
        while not isinstance(cause, PipelineError) and cause.__cause__ is not None:
            cause = cause.__cause__
        # escaped: rich markup would swallow `[sources.ocean_tracking]` in a message; soft_wrap: a one-line
        # message stays one line (rich would break it at the console width)
        errors.print(f"[red]error:[/red] {escape(one_line(str(cause)))}", soft_wrap=True)
        return 2
