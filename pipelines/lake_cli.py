"""The `lake` commands of `python -m pipelines`: the analysts' session, backup and restore, and moving a
plain DuckDB warehouse into the lake.

    lake session [--account A] [--sql QUERY] [--mode csv] [--print-sql]
                                                            DuckDB's shell on the lake, read-only, in the marts
    lake backup DEST                                        catalog, files and write-back journal into DEST/
    lake restore SRC [--data-dir DIR]                       a backup into an empty data dir
    lake migrate [--from data/warehouse.duckdb]             a DuckDB warehouse into the lake, state kept
    lake maintain [--retention-days 30]                     compaction, snapshot expiry, file cleanup

`register(commands)` adds the group; each subcommand sets `handler`, which `pipelines.cli.main` calls
(errors the user can act on are one line, exit 2). The logic lives in `pipelines.warehouse`.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.api import account_named, configured_accounts
from pipelines.settings import (
    ACCOUNTS_ENV,
    ANALYTICS_SCHEMA,
    LAKE_RETENTION_ENV,
    WRITEBACK_JOURNAL_FILE_NAME,
    duckdb_path,
    writeback_journal_location,
)
from pipelines.warehouse.backup import backup_lake, restore_lake
from pipelines.warehouse.maintenance import maintain_lake
from pipelines.warehouse.migrate import migrate_duckdb
from pipelines.warehouse.session import OUTPUT_MODES, print_sql, run_session
from pipelines.warehouse.store import WarehouseStore, default_lake_in, ducklake_store

console = Console()
errors = Console(stderr=True)


def register(commands: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add the `lake` group and its subcommands to the `python -m pipelines` parser; returns the group's
    subparsers, so further lake commands can join it."""
    lake = commands.add_parser("lake", help="the DuckLake: an analyst session, backup, restore, migration")
    sub = lake.add_subparsers(dest="lake_command", required=True)

    session = sub.add_parser("session", help="DuckDB's shell on the lake, read-only, spatial loaded")
    session.add_argument("--sql", help="run this one query, print the result and exit")
    session.add_argument("--mode", choices=OUTPUT_MODES, help="output mode of the result (default: box)")
    session.add_argument("--print-sql", action="store_true", help="print the statements for your own DuckDB")
    session.add_argument(
        "--account", help=f"open in this account's models schema (of those named in {ACCOUNTS_ENV}); without "
        f"accounts configured, {ANALYTICS_SCHEMA}")  # fmt: skip
    session.set_defaults(handler=run_lake_session)

    backup = sub.add_parser("backup", help="catalog, data files and write-back journal into a new folder")
    backup.add_argument("destination", type=Path, metavar="DEST", help="a new (or empty) folder")
    backup.set_defaults(handler=run_lake_backup)

    restore = sub.add_parser("restore", help="a backup into an empty data dir")
    restore.add_argument("source", type=Path, metavar="SRC", help="a folder `lake backup` made")
    restore.add_argument(
        "--data-dir", type=Path, default=None,
        help="restore where OCEAN_TRACKING_DATA_DIR=DIR finds it (default: the configured lake and journal)",
    )  # fmt: skip
    restore.set_defaults(handler=run_lake_restore)

    migrate = sub.add_parser(
        "migrate", help="move a plain DuckDB warehouse into the lake, state and history kept"
    )
    migrate.add_argument(
        "--from", dest="source", type=Path, default=duckdb_path(), help="the DuckDB warehouse file"
    )
    migrate.set_defaults(handler=run_lake_migrate)

    maintain = sub.add_parser("maintain", help="compact files, expire old snapshots, delete unneeded files")
    maintain.add_argument(
        "--retention-days", type=float, default=None,
        help=f"how far back time travel must reach (default {LAKE_RETENTION_ENV}, else 30)",
    )  # fmt: skip
    maintain.set_defaults(handler=run_lake_maintain)
    return sub


def session_schema(account_name: str | None) -> str | None:
    """The schema a session opens in: the marts of the account named (or of the one account when no accounts
    are configured); none when several are configured and none is named (every schema is a `schema.table` away)."""
    if account_name is None and len(configured_accounts()) > 1:
        return None
    return account_named(account_name).analytics_schema


def run_lake_session(args: argparse.Namespace) -> int:
    """Open the session (or run `--sql`) in the marts' schema, or print the statements for another DuckDB."""
    store = ducklake_store()
    schema = session_schema(args.account)
    if args.print_sql:
        print(print_sql(store, schema))
        return 0
    return run_session(store, sql=args.sql, mode=args.mode, default_schema=schema)


def run_lake_backup(args: argparse.Namespace) -> int:
    """Back up the configured lake and its write-back journal."""
    store = ducklake_store()
    report = backup_lake(store, args.destination, journal=store.journal_path)
    if not isinstance(writeback_journal_location(), Path):
        journal = " (the write-back journal is in PostgreSQL: back it up with the server's own backups, pg_dump)"
    else:
        journal = " and the write-back journal" if report.journal else " (no write-back journal yet)"
    console.print(
        f"Backed up {escape(store.place)}: the catalog, {report.files} data files ({report.bytes:,} bytes)"
        f"{journal} into {escape(str(report.folder))} in {report.seconds:.1f}s.", soft_wrap=True,
    )  # fmt: skip
    return 0


def restore_place(data_dir: Path | None) -> tuple[WarehouseStore, Path]:
    """Where a restore goes: the lake and journal a process with `OCEAN_TRACKING_DATA_DIR=data_dir` uses
    by default, or (no `data_dir`) the configured ones."""
    if data_dir is None:
        store = ducklake_store()
        return store, store.journal_path
    return default_lake_in(data_dir), data_dir / WRITEBACK_JOURNAL_FILE_NAME


def run_lake_restore(args: argparse.Namespace) -> int:
    """Restore a backup into an empty data dir."""
    store, journal = restore_place(args.data_dir)
    report = restore_lake(args.source, store, journal=journal)
    where = f" and the write-back journal at {journal}" if report.journal else ""
    console.print(
        f"Restored {report.files} data files ({report.bytes:,} bytes) into {escape(store.place)}"
        f"{escape(where)} in {report.seconds:.1f}s.", soft_wrap=True,
    )  # fmt: skip
    return 0


def run_lake_migrate(args: argparse.Namespace) -> int:
    """Move the DuckDB warehouse into the lake and say what came along."""
    store = ducklake_store()
    report = migrate_duckdb(args.source, store, journal=store.journal_path)
    table = Table(title=f"Moved from {args.source} into {store.place}")
    table.add_column("table", overflow="fold")
    table.add_column("rows", justify="right")
    for name, rows in report.tables.items():
        table.add_row(name, f"{rows:,}")
    console.print(table)
    if report.views:
        console.print(f"Views recreated: {escape(', '.join(report.views))}", soft_wrap=True)
    for change in report.retyped:
        console.print(f"retyped (the lake cannot store the original type): {escape(change)}", soft_wrap=True)
    for warning in report.warnings:
        errors.print(f"[yellow]note:[/yellow] {escape(warning)}", soft_wrap=True)
    console.print("The next sync into the lake carries on from the file's state (no refetch).")
    return 0


def run_lake_maintain(args: argparse.Namespace) -> int:
    """One maintenance run of the configured lake (what the Dagster asset `lake_maintenance` runs)."""
    store = ducklake_store()
    report = maintain_lake(store, retention_days=args.retention_days)
    before, after = report.before, report.after
    console.print(
        f"Maintained {escape(store.place)} in {report.seconds:.1f}s: data files {before.data_files:,} -> "
        f"{after.data_files:,} ({before.data_bytes:,} -> {after.data_bytes:,} bytes), files on disk "
        f"{before.files_on_disk:,} -> {after.files_on_disk:,}, snapshots {before.snapshots:,} -> "
        f"{after.snapshots:,} (kept {report.retention_days:g} days).", soft_wrap=True,
    )  # fmt: skip
    return 0
