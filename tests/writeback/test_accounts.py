"""Write-back with several accounts: each account's batch has its own journal (the exactly-once record), looks
numbers up in its own dataset and publishes into its own schema, so the same row is created once in EACH
account, never taken for done because another account did it. Through `python -m pipelines` against one
sandbox serving two accounts (its `account_keys` group is an account of its own)."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

from pipelines.journals.writes import postgres_schema
from pipelines.settings import Account, writeback_journal_location, writeback_journal_path
from tests.support.lakes import lake_in
from tests.support.sandboxes import FULL_KEY, GENEROUS_LIMITS, SANDBOX_START
from tests.support.syncs import cli_env

SECOND_ACCOUNT_KEY = "sbx_wb_second_account_key_01"
KEYS = {"emea": FULL_KEY, "apac": SECOND_ACCOUNT_KEY}
ACCOUNTS = {"OCEAN_TRACKING_ACCOUNTS": "emea,apac",
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY": KEYS["emea"],
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY": KEYS["apac"]}
NUMBER = "WBACCT001"


def test_an_accounts_journal_schema_and_file_are_its_own(monkeypatch, tmp_path):
    monkeypatch.delenv("OCEAN_TRACKING_WRITEBACK_JOURNAL", raising=False)
    data = tmp_path / "data"
    assert writeback_journal_path() == writeback_journal_path(account=Account()) == data / "writeback_journal.sqlite"
    assert writeback_journal_path(account=Account("emea")) == data / "writeback_journal_emea.sqlite"
    warehouse = tmp_path / "w" / "warehouse.duckdb"
    assert writeback_journal_path(warehouse, Account("apac")) == tmp_path / "w" / "writeback_journal_apac.sqlite"
    assert (postgres_schema(), postgres_schema(Account()), postgres_schema(Account("emea"))) == (
        "ocean_tracking_writeback", "ocean_tracking_writeback", "ocean_tracking_writeback_emea")
    assert (Account().writeback_schema, Account("emea").writeback_schema) == ("writeback", "writeback_emea")
    monkeypatch.setenv("OCEAN_TRACKING_WRITEBACK_JOURNAL", str(tmp_path / "j.sqlite"))
    assert writeback_journal_location(account=Account("emea")) == tmp_path / "j_emea.sqlite"
    monkeypatch.setenv("OCEAN_TRACKING_WRITEBACK_JOURNAL", "postgresql://u:p@db:5432/ot")
    assert writeback_journal_location(account=Account("emea")) == "postgresql://u:p@db:5432/ot"  # schema per account


def _tracking_requests(server, key: str) -> list[str]:
    """The ids of the tracking requests one account (by its key) holds for NUMBER."""
    response = requests.get(f"{server.base_url}/tracking_requests", params={"filter[request_number]": NUMBER},
                            headers={"Authorization": f"Token {key}"}, timeout=10)
    response.raise_for_status()
    return [item["id"] for item in response.json()["data"]]


@pytest.mark.slow
def test_the_same_row_is_created_once_in_each_account(make_sandbox, tmp_path):
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0,
                          account_keys=[(SECOND_ACCOUNT_KEY,)])
    batch = tmp_path / "tr.csv"
    batch.write_text(f"request_number,request_type,scac\n{NUMBER},bill_of_lading,MAEU\n")
    env = cli_env(server.base_url, tmp_path, **ACCOUNTS)
    del env["SOURCES__OCEAN_TRACKING__API_KEY"]  # with accounts configured, only their own keys exist

    def run(account: str) -> subprocess.CompletedProcess:
        done = subprocess.run([sys.executable, "-m", "pipelines", "create-tracking-requests", str(batch),
                               "--account", account], env=env, capture_output=True, text=True, timeout=120)
        assert done.returncode == 0, done.stderr[-2000:]
        assert not any(key in done.stdout + done.stderr for key in KEYS.values())
        return done

    run("emea")
    assert len(_tracking_requests(server, KEYS["emea"])) == 1
    assert _tracking_requests(server, KEYS["apac"]) == []
    run("apac")  # the same row: not done yet for apac, whatever emea's journal says
    run("emea")  # a rerun: already done for emea
    ids = {account: _tracking_requests(server, key) for account, key in KEYS.items()}
    assert [len(found) for found in ids.values()] == [1, 1] and ids["emea"] != ids["apac"]

    data = tmp_path / "data"
    assert sorted(p.name for p in data.glob("writeback_journal*.sqlite")) == [
        "writeback_journal_apac.sqlite", "writeback_journal_emea.sqlite"]
    with lake_in(data).connect(read_only=True) as con:
        for account in KEYS:
            published = con.execute(f"select request_number, status, tracking_request_id "
                                    f"from writeback_{account}.tracking_request_outcomes").fetchall()
            assert [(n, i) for n, _, i in published] == [(NUMBER, ids[account][0])], account
        schemas = {r[0] for r in con.execute("select schema_name from information_schema.schemata").fetchall()}
    assert {"writeback_emea", "writeback_apac"} <= schemas and "writeback" not in schemas  # not the default's
