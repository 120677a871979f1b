"""Command-line subcommands for write-back: create-tracking-request, patch-ref-numbers, upload-documents.

`register(commands)` adds them to `python -m pipelines`; each sets `handler`, which `main` calls.
Outcomes, intents and the audit log go to the write-back journal (its own SQLite file,
`OCEAN_TRACKING_WRITEBACK_JOURNAL`, default `data/writeback_journal.sqlite`); the warehouse is only read
(lookups) during a batch and receives a published copy in its `writeback` schema at the end. With several
accounts (`OCEAN_TRACKING_ACCOUNTS`), `--account NAME` says whose key writes; that account has its own journal
(`writeback_journal_<name>.sqlite`), lookups read its dataset and its outcomes go to `writeback_<name>`.
"""

from __future__ import annotations

import argparse
from contextlib import contextmanager
from pathlib import Path

from rich.console import Console
from rich.table import Table

from pipelines.api.accounts import account_named
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.journals.writes import writeback_session
from pipelines.settings import ACCOUNTS_ENV, API_KEY_ENV, DESTINATION_ENV
from pipelines.warehouse.store import embedded_store
from pipelines.writeback import documents, ref_numbers, tracking_requests
from pipelines.writeback.documents import items_from_source, upload_documents
from pipelines.writeback.inputs import (
    MANIFEST_COLUMNS,
    REF_NUMBER_COLUMNS,
    ROW_NUMBERING,
    TRACKING_REQUEST_COLUMNS,
    read_rows,
)
from pipelines.writeback.ref_numbers import patch_ref_numbers
from pipelines.writeback.tracking_requests import create_tracking_requests
from pipelines.writeback.tracking_rows import REQUEST_TYPES

console = Console()

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


def register(commands: argparse._SubParsersAction) -> None:
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
