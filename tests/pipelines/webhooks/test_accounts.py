"""Webhooks with several accounts, end to end against one sandbox serving two accounts: `webhooks register
--account` subscribes each account with its own key and stores its own secret in its own table; `webhooks serve
--account` (a process each) verifies with that secret and journals into the account's own journal, the one
the Dagster sensors read; each journal gets its account's notifications only; `webhooks status --account`."""

from __future__ import annotations

import signal
import subprocess
import sys
from pathlib import Path

import pytest
import requests
import tomlkit

from pipelines.cli import main
from pipelines.errors import ConfigurationError
from pipelines.journals import NotificationJournal
from pipelines.settings import (
    WEBHOOK_JOURNAL_ENV,
    WEBHOOK_PATH,
    WEBHOOK_SECRET_KEY,
    Account,
    webhook_journal_path,
)
from pipelines.webhooks import load_webhook_secret
from pipelines.webhooks.receiver import ReceiverThread
from tests.support.accounts import ACCOUNTS, OTHER_ACCOUNT_KEY, accounts_env
from tests.support.notifications import body, notification
from tests.support.postgres import free_port
from tests.support.receivers import SECRET, Receiver, wait_until_up
from tests.support.sandboxes import advance_clock, deliver_webhooks

SHARED_SECRET = "whsec_of_the_single_account_setup_no_named_account_reads"
HOURS = 3600


def _webhooks_of(server, key: str) -> list[dict]:
    """The account's webhooks as the service lists them to its key."""
    answer = requests.get(f"{server.base_url}/webhooks", headers={"Authorization": f"Token {key}"}, timeout=10)
    answer.raise_for_status()
    return answer.json()["data"]


@pytest.mark.slow
def test_a_receiver_per_account_from_the_command_line(make_sandbox, tmp_path: Path, monkeypatch, capsys):
    server = make_sandbox(speed=0.0, webhook_tick_seconds=0, account_keys=[(OTHER_ACCOUNT_KEY,)])
    env = accounts_env(server, tmp_path)
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    monkeypatch.delenv("SOURCES__OCEAN_TRACKING__API_KEY", raising=False)
    monkeypatch.setenv("RUNTIME__LOG_LEVEL", "ERROR")  # main() would set it for the rest of the session
    monkeypatch.chdir(tmp_path)  # where a receiver started here finds .dlt/secrets.toml
    secrets_file = tmp_path / ".dlt" / "secrets.toml"
    secrets_file.parent.mkdir()
    secrets_file.write_text(f'[sources.ocean_tracking]\n{WEBHOOK_SECRET_KEY} = "{SHARED_SECRET}"\n')
    keys = {"emea": ACCOUNTS["SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY"], "apac": OTHER_ACCOUNT_KEY}
    urls = {name: f"http://127.0.0.1:{free_port()}" for name in keys}

    for name in keys:
        assert main(["webhooks", "register", "--account", name, "--url", urls[name] + WEBHOOK_PATH]) == 0
    said = capsys.readouterr().out
    stored = tomlkit.parse(secrets_file.read_text())["sources"]["ocean_tracking"]
    secrets = {name: stored["accounts"][name][WEBHOOK_SECRET_KEY] for name in keys}
    assert stored[WEBHOOK_SECRET_KEY] == SHARED_SECRET and len({*secrets.values(), SHARED_SECRET}) == 3
    assert "[sources.ocean_tracking.accounts.apac] webhook_secret" in said
    assert not any(secret in said for secret in secrets.values())
    webhook_ids = {}
    for name, key in keys.items():  # each account subscribed with its own key, to its own receiver
        (webhook,) = _webhooks_of(server, key)
        assert webhook["attributes"]["url"] == urls[name] + WEBHOOK_PATH
        webhook_ids[name] = webhook["id"]

    receivers = {name: subprocess.Popen(
        [sys.executable, "-m", "pipelines", "webhooks", "serve", "--account", name,
         "--port", urls[name].rsplit(":", 1)[1]],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT) for name in keys}  # fmt: skip
    try:
        for name, process in receivers.items():
            wait_until_up(process, urls[name])
        advance_clock(server, 6 * HOURS)
        delivered = deliver_webhooks(server)
        assert delivered["queued"] == delivered["attempted"] > 0, delivered
        for name in keys:
            assert main(["webhooks", "status", "--account", name]) == 0
            assert f"Journal for account {name} {webhook_journal_path(Account(name))}:" in capsys.readouterr().out
        assert main(["webhooks", "status"]) == 2  # two accounts: say which
        assert "--account emea | apac" in capsys.readouterr().err
    finally:
        for process in receivers.values():
            process.send_signal(signal.SIGTERM)
        output = b"".join(process.communicate(timeout=60)[0] for process in receivers.values())
    assert not any(secret.encode() in output for secret in secrets.values())

    journaled = 0
    for name in keys:  # the journal the Dagster sensors open for the account (assets/webhooks.py)
        assert webhook_journal_path(Account(name)).exists()
        with NotificationJournal(account=Account(name)) as journal:
            notifications = journal.pending()
            assert journal.last_beat()[1] == urls[name] + WEBHOOK_PATH  # its own receiver beat here
        assert notifications, f"nothing reached {name}'s receiver"
        senders = {n.document["data"]["relationships"]["webhook"]["data"]["id"] for n in notifications}
        assert senders == {webhook_ids[name]}, f"{name}'s journal holds another account's notifications"
        journaled += len(notifications)
    assert journaled == delivered["attempted"]  # every delivery answered 2xx and journaled once
    assert not (tmp_path / "data" / "webhook_journal.sqlite").exists()  # the single account's stays unused


@pytest.mark.parametrize("command", [["serve"], ["status"], ["register", "--url", "https://example.com/hook"]])
def test_an_unknown_account_is_one_line_naming_the_configured_ones(command, monkeypatch, capsys):
    monkeypatch.setenv("OCEAN_TRACKING_ACCOUNTS", "emea,apac")
    monkeypatch.setenv("RUNTIME__LOG_LEVEL", "ERROR")
    assert main(["webhooks", *command, "--account", "amer"]) == 2
    err = capsys.readouterr().err
    assert "No account 'amer' is configured" in err and "emea, apac" in err and len(err.strip().splitlines()) == 1


def test_a_named_accounts_secret_is_its_own(monkeypatch):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__WEBHOOK_SECRET", SHARED_SECRET)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__WEBHOOK_SECRET", "whsec_emea")
    assert load_webhook_secret(account=Account("emea")).reveal() == "whsec_emea"
    assert load_webhook_secret().reveal() == SHARED_SECRET
    with pytest.raises(ConfigurationError) as missing:  # the shared secret is never another account's
        load_webhook_secret(account=Account("apac"))
    message = str(missing.value)
    assert "of account apac is missing" in message and SHARED_SECRET not in message
    assert "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__WEBHOOK_SECRET" in message
    assert "webhooks register --account apac" in message


def test_an_accounts_receiver_and_status_use_its_own_schema_of_a_postgresql_journal(postgres_database, monkeypatch,
                                                                                    capsys):
    monkeypatch.setenv("OCEAN_TRACKING_ACCOUNTS", "emea,apac")
    monkeypatch.setenv(WEBHOOK_JOURNAL_ENV, postgres_database.dsn)  # one database every host shares
    monkeypatch.setenv("RUNTIME__LOG_LEVEL", "ERROR")
    with ReceiverThread(postgres_database.dsn, SECRET, account=Account("emea")) as running:
        assert Receiver(running.root_url, postgres_database.dsn).post(body(notification("n-emea"))).status_code == 200
    assert postgres_database.query("select id from ocean_tracking_webhooks_emea.notifications") == [("n-emea",)]
    assert main(["webhooks", "status", "--account", "emea"]) == 0
    assert "Journal for account emea postgresql://" in capsys.readouterr().out
    with NotificationJournal(account=Account("apac")) as apac:  # created empty: another account's schema
        assert apac.counts()["pending"] == 0
    assert not NotificationJournal.exists(account=Account())


def test_refresh_of_an_account_applies_its_own_journal_only(tmp_path: Path, monkeypatch, capsys):
    # the single account's journal holds a notification; emea's is empty: emea's refresh has nothing to apply,
    # and sends nothing (the base URL answers nothing: any request would fail the command)
    monkeypatch.setenv("OCEAN_TRACKING_ACCOUNTS", "emea")
    monkeypatch.setenv(Account("emea").api_key_env, "sbx_emea_key_0123456789")
    with NotificationJournal(webhook_journal_path()) as single:
        single.record(body(notification()))

    code = main(["refresh", "--account", "emea", "--no-progress", "--base-url", "http://127.0.0.1:9/v2"])

    assert code == 0, capsys.readouterr()
    with NotificationJournal(webhook_journal_path()) as single:
        assert len(single.pending()) == 1
    assert NotificationJournal.exists(account=Account("emea"))
