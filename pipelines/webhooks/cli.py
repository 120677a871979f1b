"""The `webhooks` commands of `python -m pipelines`: receive, register and watch the service's webhooks.

    webhooks serve [--account NAME] [--host 127.0.0.1] [--port 8765] [--path /webhooks/terminal49]
                   [--journal PATH|URL]
    webhooks register [--account NAME] --url https://... [--events e1,e2] [--secrets-file .dlt/secrets.toml]
    webhooks status [--account NAME] [--journal PATH|URL]

With several accounts ($OCEAN_TRACKING_ACCOUNTS) each has its own webhook (registered with its own key), its own
secret (stored and read under `[sources.ocean_tracking.accounts.<name>]`) and its own receiver and journal
(`settings.webhook_journal_location(account)`, where the Dagster sensors read it): `--account NAME` picks it.

`register(commands)` adds the group; each subcommand sets `handler`, which `pipelines.cli.main` calls
(errors the user can act on are one line, exit 2). No command prints the webhook secret.
"""

from __future__ import annotations

import argparse
from datetime import UTC, datetime
from pathlib import Path

from rich.console import Console
from rich.markup import escape
from rich.table import Table

from pipelines.api.accounts import account_named
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.errors import ConfigurationError
from pipelines.journals import NotificationJournal, describe
from pipelines.settings import (
    ACCOUNTS_ENV,
    API_KEY_ENV,
    DEFAULT_SECRETS_FILE,
    WEBHOOK_HEARTBEAT_SECONDS,
    WEBHOOK_HOST,
    WEBHOOK_JOURNAL_ENV,
    WEBHOOK_PATH,
    WEBHOOK_PORT,
    WEBHOOK_SECRET_KEY,
    Account,
    webhook_journal_location,
)
from pipelines.webhooks.receiver import serve
from pipelines.webhooks.registration import register_webhook, store_secret
from pipelines.webhooks.signing import load_webhook_secret

console = Console()


def register(commands: argparse._SubParsersAction) -> argparse._SubParsersAction:
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
