# longer than 500 lines because every command group beside sync and refresh is wired here, one handler each (the logic is in the rooms below)
"""The command groups `python -m pipelines` registers beside `sync` and `refresh` (`pipelines.cli`): `lake`,
`webhooks` and the write-back commands. Each `register_*` adds its commands; each command sets `handler`,
which `pipelines.cli.main` calls (errors the user can act on are one line, exit 2).

    lake session [--account A] [--sql QUERY] [--mode csv] [--print-sql]
                                                            DuckDB's shell on the lake, read-only, in the marts
    lake backup DEST                                        catalog, files and write-back journal into DEST/
    lake restore SRC [--data-dir DIR]                       a backup into an empty data dir
    lake migrate [--from data/warehouse.duckdb]             a DuckDB warehouse into the lake, state kept
    lake migrate --retype [--yes] [--account A]             guessed column types to the declared ones
    lake maintain [--retention-days 30]                     compaction, snapshot expiry, file cleanup
    webhooks serve [--account NAME] [--host 127.0.0.1] [--port 8765] [--path /webhooks/terminal49]
                   [--journal PATH|URL]
    webhooks register [--account NAME] --url https://... [--events e1,e2] [--secrets-file .dlt/secrets.toml]
    webhooks status [--account NAME] [--journal PATH|URL]
    create-tracking-requests FILE | patch-ref-numbers FILE | upload-documents SOURCE   [--dry-run] [--account A]

The lake's logic lives in `pipelines.warehouse`. With several accounts ($OCEAN_TRACKING_ACCOUNTS) each has its
own webhook (registered with its own key), its own secret (stored and read under
`[sources.ocean_tracking.accounts.<name>]`) and its own receiver and journal
(`settings.webhook_journal_location(account)`, where the Dagster sensors read it): `--account NAME` picks it.
No command prints the webhook secret.

Write-back outcomes, intents and the audit log go to the write-back journal (its own SQLite file,
`OCEAN_TRACKING_WRITEBACK_JOURNAL`, default `data/writeback_journal.sqlite`); the warehouse is only read
(lookups) during a batch and receives a published copy in its `writeback` schema at the end. With several
accounts, `--account NAME` says whose key writes; that account has its own journal
(`writeback_journal_<name>.sqlite`), lookups read its dataset and its outcomes go to `writeback_<name>`.
"""

from __future__ import annotations

import argparse
import tempfile
from contextlib import contextmanager
from datetime import UTC, datetime
from functools import cache
from pathlib import Path

from dlt.common.schema import Schema
from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.api import account_named, configured_accounts
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import ApiKey, Settings, load_settings
from pipelines.errors import ConfigurationError
from pipelines.journals import NotificationJournal, describe
from pipelines.journals.writes import writeback_session
from pipelines.page.render import team_page_path, write_team_page
from pipelines.settings import (
    ACCOUNTS_ENV,
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    DEFAULT_SECRETS_FILE,
    DESTINATION_ENV,
    LAKE_RETENTION_ENV,
    WEBHOOK_HEARTBEAT_SECONDS,
    WEBHOOK_HOST,
    WEBHOOK_JOURNAL_ENV,
    WEBHOOK_PATH,
    WEBHOOK_PORT,
    WEBHOOK_SECRET_KEY,
    WRITEBACK_JOURNAL_FILE_NAME,
    Account,
    duckdb_path,
    webhook_journal_location,
    writeback_journal_location,
)
from pipelines.source.resources import ocean_tracking
from pipelines.warehouse import WarehouseStore, default_lake_in, ducklake_store, embedded_store
from pipelines.warehouse.destinations import migrate_duckdb
from pipelines.warehouse.maintenance import backup_lake, maintain_lake, restore_lake
from pipelines.warehouse.retype import apply_retype, plan_retype
from pipelines.warehouse.session import OUTPUT_MODES, print_sql, run_session
from pipelines.webhooks import load_webhook_secret
from pipelines.webhooks.receiver import register_webhook, serve, store_secret
from pipelines.writeback import (
    MANIFEST_COLUMNS,
    REF_NUMBER_COLUMNS,
    ROW_NUMBERING,
    TRACKING_REQUEST_COLUMNS,
    documents,
    read_rows,
    ref_numbers,
    tracking_requests,
)
from pipelines.writeback.documents import items_from_source, upload_documents
from pipelines.writeback.ref_numbers import patch_ref_numbers
from pipelines.writeback.tracking_requests import REQUEST_TYPES, create_tracking_requests

console = Console()
errors = Console(stderr=True)


def register_lake(commands: argparse._SubParsersAction) -> argparse._SubParsersAction:
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

    # Both bring an older warehouse to what the code expects now (a DuckDB file into the lake; guessed column types
    # to the declared ones), so they share the verb; their options exclude each other, none is silently ignored.
    migrate = sub.add_parser(
        "migrate", help="move a plain DuckDB warehouse into the lake, state and history kept; or, with --retype, "
        "rewrite the columns an older warehouse typed by guess to their declared types")  # fmt: skip
    moves = migrate.add_mutually_exclusive_group()
    moves.add_argument(
        "--from", dest="source", type=Path, default=None, help=f"the DuckDB file (default {duckdb_path()})"
    )
    moves.add_argument(
        "--retype", action="store_true", help="show the columns whose type is not the declared one (in the warehouse "
        "and dlt's stored schema); with --yes, rewrite them (the lake keeps the snapshot before)")  # fmt: skip
    migrate.add_argument("--yes", action="store_true", help="with --retype: apply the plan it shows")
    migrate.add_argument(
        "--account", help=f"with --retype: this account's dataset (of those named in {ACCOUNTS_ENV}); without "
        "accounts configured, the one dataset")  # fmt: skip
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
    """Move the DuckDB warehouse into the lake and say what came along; or, with `--retype`, retype."""
    if args.retype:
        return run_lake_retype(args)
    if args.yes or args.account:
        raise ConfigurationError("--yes and --account go with --retype: lake migrate --retype [--yes].")
    store = ducklake_store()
    source = args.source or duckdb_path()
    report = migrate_duckdb(source, store, journal=store.journal_path)
    table = Table(title=f"Moved from {source} into {store.place}")
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


@cache
def declared_schema() -> Schema:
    """The dlt schema of the source a sync extracts, from its resources' hints alone (`discover_schema`): every
    declared column with the type dlt gives it, what `lake migrate --retype` brings a warehouse to (handed to
    `pipelines.warehouse.retype`, a room below the source's). The source is built around a client that never
    sends a request, so no API key is needed."""
    with tempfile.TemporaryDirectory() as folder:
        settings = Settings(api_key=ApiKey("schema-only"), limiter_path=Path(folder) / "limiter.sqlite")
        with OceanTrackingClient(settings) as client:
            return ocean_tracking(client=client).discover_schema()


def run_lake_retype(args: argparse.Namespace) -> int:
    """`lake migrate --retype [--yes]`: show every column to retype in the configured warehouse (the lake,
    or the DuckDB file `OCEAN_TRACKING_DESTINATION=duckdb` names) and in dlt's stored schema; apply it only
    with `--yes` (`pipelines.warehouse.retype`)."""
    store, dataset = embedded_store(), account_named(args.account).dataset_name
    declared = declared_schema()
    plan = plan_retype(store, dataset, declared)
    if plan.empty:
        console.print(f"Nothing to retype in {escape(store.place)}: every column of {dataset} has its declared type "
                      "(in the warehouse and in dlt's stored schema).", soft_wrap=True)  # fmt: skip
        return 0
    if plan.warehouse:
        table = Table(title=f"Columns to retype in {store.place}")
        for column in ("table", "column", "from", "to", "how", "values that do not fit"):
            table.add_column(column, overflow="fold")
        for change in plan.warehouse:
            table.add_row(f"{change.schema}.{change.table}", change.column, change.stored, change.declared, change.how,
                          f"{change.unfit:,}" if change.unfit else "")  # fmt: skip
        console.print(table)
    if plan.dlt_schema:
        table = Table(title=f"Columns to retype in dlt's stored schema ({dataset}._dlt_version)")
        for column in ("table", "column", "from", "to"):
            table.add_column(column, overflow="fold")
        for change in plan.dlt_schema:
            table.add_row(change.table, change.column, change.stored, change.declared)
        console.print(table)
    if not args.yes:
        console.print("Nothing changed: run again with --yes to apply this plan.")
        return 0
    report = apply_retype(store, plan, declared)
    rebuilt = f"; tables rebuilt: {', '.join(report.rebuilt)}" if report.rebuilt else ""
    before = (f" The snapshot before is {report.snapshot_before}: `at (version => {report.snapshot_before})` reads "
              "the old types." if report.snapshot_before is not None else "")  # fmt: skip
    console.print(f"Retyped {len(plan.warehouse)} column(s) in {escape(store.place)} and {len(plan.dlt_schema)} in "
                  f"dlt's stored schema in {report.seconds:.1f}s{escape(rebuilt)}.{before}", soft_wrap=True)  # fmt: skip
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


def register_page(commands: argparse._SubParsersAction) -> None:
    """Add the `page` command (the team page) to the `python -m pipelines` parser."""
    page = commands.add_parser(
        "page", help="write the team page: carrier scorecard, demurrage at risk, dwell, emissions, the map",
        description="Write the team page from the models: one HTML file that opens from disk with no network "
        "(carrier scorecard, demurrage and detention at risk, dwell and transit, emissions, the containers at sea "
        "on a map). Left as it is when nothing it shows changed.")  # fmt: skip
    page.add_argument("--account", help=f"this account's models (of those named in {ACCOUNTS_ENV})")
    page.add_argument("--output", type=Path, default=None, help=f"where to write it (default {team_page_path()}; "
                      "team_page_<account>.html for a named account)")  # fmt: skip
    page.add_argument("--duckdb", type=Path, default=None, help="read this DuckDB file instead of the lake")
    page.set_defaults(handler=run_page)


def run_page(args: argparse.Namespace) -> int:
    """Write the account's team page and say where, or that it was already current."""
    account = account_named(args.account)
    title = "Ocean tracking" if account.name is None else f"Ocean tracking: {account.name}"
    page = write_team_page(embedded_store(duckdb_file=args.duckdb), args.output or team_page_path(account),
                           title=title, analytics_schema=account.analytics_schema, dataset_name=account.dataset_name)  # fmt: skip
    said = "written" if page.written else "already shows the current models (left as it was)"
    console.print(f"Team page {page.path} ({page.bytes:,} bytes): {said}. Open it in a browser.", soft_wrap=True)
    return 0


def register_webhooks(commands: argparse._SubParsersAction) -> argparse._SubParsersAction:
    """Add the `webhooks` group and its subcommands to the `python -m pipelines` parser."""
    group = commands.add_parser("webhooks", help="receive, register and watch the service's webhooks")
    sub = group.add_subparsers(dest="webhooks_command", required=True)
    journal_help = (f"the notification journal: a SQLite file or a postgresql:// URL (default: {WEBHOOK_JOURNAL_ENV}, "
                    "else <data dir>/webhook_journal.sqlite, webhook_journal_<account>.sqlite with --account; "
                    "prefer the variable for a URL with a password)")

    run = sub.add_parser("serve", help="receive deliveries: verify each signature and journal it")
    add_account_argument(run)
    run.add_argument("--host", default=WEBHOOK_HOST, help=f"address to listen on (default {WEBHOOK_HOST})")
    run.add_argument("--port", type=int, default=WEBHOOK_PORT, help=f"port (default {WEBHOOK_PORT})")
    run.add_argument("--path", default=WEBHOOK_PATH, help=f"the delivery path (default {WEBHOOK_PATH})")
    run.add_argument("--journal", default=None, help=journal_help)
    run.set_defaults(handler=run_serve)

    reg = sub.add_parser("register", help="create or update the account's webhook and store its secret")
    add_account_argument(reg)
    reg.add_argument("--url", required=True, help="the public https URL the service delivers to")
    reg.add_argument("--events", default=None,
                     help="comma-separated event names (default: every event the account can have)")
    reg.add_argument("--secrets-file", type=Path, default=Path(DEFAULT_SECRETS_FILE),
                     help=f"where to store the secret (default {DEFAULT_SECRETS_FILE})")
    reg.add_argument("--base-url", help="API base URL ending in /v2 (default: config)")
    reg.add_argument("--api-key", help=f"API key (prefer {API_KEY_ENV}, or the account's own with --account)")
    reg.set_defaults(handler=run_register)

    status = sub.add_parser("status", help="journal counts, the receiver's heartbeat, failed notifications")
    add_account_argument(status)
    status.add_argument("--journal", default=None, help=journal_help)
    status.set_defaults(handler=run_status)
    return sub


def add_account_argument(parser: argparse.ArgumentParser) -> None:
    """`--account`: which account's webhook, secret and journal a command uses."""
    parser.add_argument(
        "--account", help=f"which of the accounts named in {ACCOUNTS_ENV} (its key, webhook secret and journal); "
        "without accounts configured, the one account of [sources.ocean_tracking]")


def _for(account: Account) -> str:
    """` for account <name>` in messages about a named account, nothing for the single account."""
    return "" if account.name is None else f" for {account.label}"


def run_serve(args: argparse.Namespace) -> int:
    """`webhooks serve`: resolve the account's secret (one-line error when missing), then receive into its
    journal until stopped."""
    if not args.path.startswith("/"):
        raise ConfigurationError(f"--path must start with '/', e.g. {WEBHOOK_PATH}.")
    account = account_named(args.account)
    secret = load_webhook_secret(account=account)
    journal = args.journal or webhook_journal_location(account)
    where = describe(journal, WEBHOOK_JOURNAL_ENV)
    console.print(f"Receiving webhooks{_for(account)} at http://{args.host}:{args.port}{args.path}; journal {where}",
                  soft_wrap=True, markup=False)
    serve(journal, secret, host=args.host, port=args.port, path=args.path, account=account)
    return 0


def run_register(args: argparse.Namespace) -> int:
    """`webhooks register`: one line saying what was done and where the secret went, never the secret."""
    events = args.events.split(",") if args.events is not None else None
    if events is not None and not any(e.strip() for e in events):
        raise ConfigurationError("--events named no event; give at least one (comma-separated).")
    account = account_named(args.account)
    with OceanTrackingClient(load_settings(api_key=args.api_key, base_url=args.base_url, account=account)) as client:
        done = register_webhook(client, args.url, events)
    stored = store_secret(args.secrets_file, done.secret, account)
    console.print(
        f"Webhook {done.webhook_id}{_for(account)} {'created' if done.created else 'updated'} for {done.url}: "
        f"{len(done.events)} events; its secret is stored in {stored} under [{account.config_section}] "
        f"{WEBHOOK_SECRET_KEY}.",
        soft_wrap=True, markup=False,
    )
    return 0


def _ago(moment: datetime | None) -> str:
    if moment is None:
        return "never"
    seconds = max(0.0, (datetime.now(UTC) - moment).total_seconds())
    for unit, size in (("d", 86400), ("h", 3600), ("min", 60)):
        if seconds >= size:
            return f"{moment.isoformat(timespec='seconds')} ({seconds / size:.1f} {unit} ago)"
    return f"{moment.isoformat(timespec='seconds')} ({seconds:.0f} s ago)"


def run_status(args: argparse.Namespace) -> int:
    """`webhooks status`: counts per status, newest arrival, the last heartbeat and the failed notifications;
    1 when the receiver looks down (no heartbeat for three intervals) or a notification failed."""
    account = account_named(args.account)
    location = args.journal or webhook_journal_location(account)
    where = describe(location, WEBHOOK_JOURNAL_ENV)
    if not NotificationJournal.exists(location, account=account):
        console.print(f"No webhook journal{_for(account)} at {where} yet: no receiver has run with it.", markup=False,
                      soft_wrap=True)
        return 1
    with NotificationJournal(location, account=account) as journal:
        counts, received, created = journal.counts(), journal.newest_received_at(), journal.newest_created_at()
        beat, failed = journal.last_beat(), journal.failed()
    console.print(f"Journal{_for(account)} {where}: " + ", ".join(f"{k} {v}" for k, v in counts.items()),
                  markup=False, soft_wrap=True)
    console.print(f"newest received: {_ago(received)}; newest created by the service: {_ago(created)}",
                  markup=False, soft_wrap=True)
    down = beat is None or (datetime.now(UTC) - beat[0]).total_seconds() > 3 * WEBHOOK_HEARTBEAT_SECONDS
    if beat is None:
        console.print("receiver heartbeat: never (no receiver has run on this journal)", markup=False, soft_wrap=True)
    else:
        state = "DOWN?" if down else "up"
        console.print(f"receiver heartbeat: {_ago(beat[0])} from {beat[1]} ({state})", markup=False, soft_wrap=True)
    if failed:
        table = Table(title=f"Failed notifications ({counts.get('failed', len(failed))})")
        for column in ("id", "event", "error"):
            table.add_column(column, overflow="fold")  # an id cut short with "…" could not be looked up
        for item in failed:
            table.add_row(escape(item.id), escape(item.event), escape(item.error or ""))
        console.print(table)
    return 1 if down or failed else 0


_TRACKING_HELP = f"""\
Create a tracking request for each row of FILE (a CSV file, or a [schema.]table in the warehouse), once
per number: a number created before, by any batch sharing the journal, is skipped, and a number given
twice in FILE is sent for its first row only (case and spaces in a number do not matter).

{TRACKING_REQUEST_COLUMNS.help()}
request_type is one of {", ".join(REQUEST_TYPES)}; a blank scac lets the service detect the carrier
{ROW_NUMBERING}"""

_REF_NUMBERS_HELP = f"""\
Add each row's ref_numbers to the current list of its shipment or container (or, with --replace, set
exactly that list); a row names its target by id, or by a number the synced warehouse knows. FILE is a
CSV file, or a [schema.]table in the warehouse.

{REF_NUMBER_COLUMNS.help()}
{ROW_NUMBERING}"""

_DOCUMENTS_HELP = f"""\
Upload each file of SOURCE once as a document: a folder (each file in it, named after itself) or a
manifest, a CSV file or a [schema.]table in the warehouse, that lists the files (paths relative to the
manifest's folder) and what each is attached to.

manifest {MANIFEST_COLUMNS.help()}"""


def exit_codes(unit: str, not_done: set[str]) -> str:
    """The exit codes of a write-back command, for its --help; `unit` is what it counts (rows, files) and
    `not_done` the statuses that make a batch exit with 1."""
    return (f"exit codes (a --dry-run exits the same way for what it checks):\n"
            f"  0  all {unit} done\n"
            f"  1  some {unit} not done ({', '.join(sorted(not_done))}): see the table, fix them and run again\n"
            f"     (what is done is not sent again)\n"
            f"  2  bad input or usage, refused before anything was sent (the one-line error says what to fix),\n"
            f"     or an error that stopped the command (configuration, the service)")


def register_writeback(commands: argparse._SubParsersAction) -> None:
    """Add the three write-back subcommands to the `python -m pipelines` parser, each with a --help that
    lists the columns its input takes and its exit codes."""
    specs = (
        ("create-tracking-requests", "FILE", "CSV file or DuckDB table of tracking requests to create",
         _TRACKING_HELP, exit_codes("rows", tracking_requests.NOT_DONE), run_create_tracking_requests),
        ("patch-ref-numbers", "FILE", "CSV file or DuckDB table of ref_numbers to add (or set with --replace)",
         _REF_NUMBERS_HELP, exit_codes("rows", ref_numbers.NOT_DONE), run_patch_ref_numbers),
        ("upload-documents", "SOURCE", "folder of files, or a manifest CSV / DuckDB table",
         _DOCUMENTS_HELP, exit_codes("files", documents.NOT_DONE), run_upload_documents),
    )
    for name, metavar, help_text, description, epilog, handler in specs:
        sub = commands.add_parser(name, help=help_text, description=description, epilog=epilog,
                                  formatter_class=argparse.RawDescriptionHelpFormatter)
        sub.add_argument("source", metavar=metavar, help=help_text)
        sub.add_argument("--dry-run", action="store_true", help="validate and report; send and record nothing")
        sub.add_argument(
            "--account", help=f"which of the accounts named in {ACCOUNTS_ENV} (its key, settings, dataset and models "
            "schema); without accounts configured, the one account of [sources.ocean_tracking]")
        sub.add_argument("--duckdb", type=Path, default=None,
                         help="a plain DuckDB warehouse file for lookups and outcomes (default: the warehouse "
                              f"{DESTINATION_ENV} names, the DuckLake unless set)")
        sub.add_argument("--base-url", help="API base URL ending in /v2 (default: config)")
        sub.add_argument("--api-key", help=f"API key (prefer {API_KEY_ENV})")
        sub.add_argument("--rate-window", type=float, default=None, help="rate window seconds (sandbox: scaled)")
        sub.add_argument("--allow-formulas", action="store_true",
                         help="send values a spreadsheet would run as a formula (starting with = @ tab, or + - "
                              "not followed by a digit) as they are; refused by default")
        if name == "patch-ref-numbers":
            sub.add_argument("--replace", action="store_true",
                             help="set exactly the given list instead of adding to the current one")
            sub.add_argument("--confirm-clear", action="store_true",
                             help="with --replace, let an empty ref_numbers cell clear the list")
        sub.set_defaults(handler=handler)


@contextmanager
def _session(args: argparse.Namespace):
    """The client, the read-only warehouse (lookups) and the journal for one batch (`writeback_session`), all
    of the account `--account` names (its key, its journal, its dataset, its published schema)."""
    account = account_named(args.account)
    settings = load_settings(api_key=args.api_key, base_url=args.base_url, rate_window_seconds=args.rate_window,
                             account=account)
    with writeback_session(embedded_store(duckdb_file=args.duckdb), dry_run=args.dry_run,
                           account=account) as (warehouse, store), \
            OceanTrackingClient(settings) as client:
        yield client, warehouse, store


def _print(title: str, rows: list[tuple], columns: tuple[str, ...], counts: dict[str, int]) -> None:
    table = Table(title=title)
    for column in columns:
        # a cell wider than the terminal (or the 80 columns of a pipe) folds onto the next line instead of being
        # cut with an ellipsis: the ids and errors are what the user acts on
        table.add_column(column, overflow="fold")
    for row in rows:
        table.add_row(*("" if v is None else str(v) for v in row))
    console.print(table)
    console.print(", ".join(f"{k}: {v}" for k, v in sorted(counts.items())) or "nothing to do")


def run_create_tracking_requests(args: argparse.Namespace) -> int:
    """`create-tracking-requests FILE [--dry-run]`: create each row once; 1 when any row did not succeed."""
    with _session(args) as (client, con, store):
        rows = read_rows(args.source, con, columns=TRACKING_REQUEST_COLUMNS, allow_formulas=args.allow_formulas)
        report = create_tracking_requests(rows, client, store, dry_run=args.dry_run)
    rows = [(r.row_index, r.request_number, r.status, r.tracking_request_id,
             "; ".join(f"{e.get('pointer') or ''} {e.get('detail')}".strip() for e in r.errors)) for r in report.results]
    _print("Tracking requests", rows, ("row", "number", "status", "id", "errors"), report.counts)
    return 1 if any(r.status in tracking_requests.NOT_DONE for r in report.results) else 0


def run_patch_ref_numbers(args: argparse.Namespace) -> int:
    """`patch-ref-numbers FILE [--replace [--confirm-clear]] [--dry-run] [--allow-formulas]`: add the
    given ref_numbers to each target's list (or set it with --replace), showing before → after per row;
    1 when any row failed or was invalid. The input is checked (columns, CSV, formulas) before any request."""
    with _session(args) as (client, con, store):
        rows = read_rows(args.source, con, columns=REF_NUMBER_COLUMNS, allow_formulas=args.allow_formulas)
        report = patch_ref_numbers(rows, client, store, con, dry_run=args.dry_run, replace=args.replace,
                                   confirm_clear=args.confirm_clear, dataset=store.account.dataset_name)

    def listed(refs: list[str] | None) -> str:
        return "?" if refs is None else ";".join(refs) or "(none)"

    table = [(r.row_index, r.kind, r.target_id, f"{listed(r.before)} → {listed(r.ref_numbers)}", r.status,
              "; ".join(r.errors)) for r in report.results]
    _print("ref_numbers (dry run: nothing sent)" if args.dry_run else "ref_numbers", table,
           ("row", "kind", "id", "before → after", "status", "errors"), report.counts)
    return 1 if any(r.status in ref_numbers.NOT_DONE for r in report.results) else 0


def run_upload_documents(args: argparse.Namespace) -> int:
    """`upload-documents FOLDER|MANIFEST [--dry-run]`: upload each file once; 1 when any file failed."""
    with _session(args) as (client, con, store):
        items = items_from_source(args.source, con, allow_formulas=args.allow_formulas,
                                  dataset=store.account.dataset_name)
        report = upload_documents(items, client, store, dry_run=args.dry_run)
    rows = [(r.path, r.name, r.status, r.step, r.document_id, "; ".join(r.errors)) for r in report.results]
    _print("Documents", rows, ("file", "name", "status", "step", "document", "errors"), report.counts)
    return 1 if any(r.status in documents.NOT_DONE for r in report.results) else 0
