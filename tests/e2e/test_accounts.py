"""Several accounts, one deployment, through the CLI against one sandbox serving several accounts: each
account's key, dataset and models schema its own; a dataset answers to one key; a second run of one account
waits for the first while another account's run does not.

The sandbox's `--account-key` groups are accounts of their own (own seeded shipments and rate budget), so a
row landing in the wrong dataset shows."""

from __future__ import annotations

import subprocess

import pytest
import requests

from pipelines.api import account_named, configured_accounts
from pipelines.api.config import key_fingerprint, load_settings
from pipelines.errors import ConfigurationError
from pipelines.settings import Account
from tests.support.accounts import OTHER_ACCOUNT_KEY, accounts_env
from tests.support.holders import _holder, release
from tests.support.lakes import lake_in
from tests.support.sandboxes import FROZEN_WORLD, FULL_KEY, FULL_KEY_2, api_total
from tests.support.syncs import cli_env, one_error_line, sync_command


def _stats(server) -> dict:
    return requests.get(server.root_url + "/_sandbox/stats", timeout=10).json()


def _served_by_account(server) -> dict[str, int]:
    return {account: sum(buckets.values()) for account, buckets in _stats(server)["requests_by_account"].items()}


def _sync(server, workdir, *args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run(sync_command("--no-maps", *args), env=env, capture_output=True, text=True, timeout=600)


def test_account_names_and_their_places(monkeypatch):
    monkeypatch.delenv("OCEAN_TRACKING_ACCOUNTS", raising=False)
    assert configured_accounts() == [Account()]
    assert (Account().dataset_name, Account().analytics_schema) == ("ocean_tracking", "analytics")
    monkeypatch.setenv("OCEAN_TRACKING_ACCOUNTS", " emea, apac ")
    assert [a.name for a in configured_accounts()] == ["emea", "apac"]
    emea = account_named("emea")
    assert (emea.dataset_name, emea.analytics_schema) == ("ocean_tracking_emea", "analytics_emea")
    assert emea.api_key_env == "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY"
    with pytest.raises(ConfigurationError, match="say which one"):
        account_named(None)
    with pytest.raises(ConfigurationError, match=r"No account .amer. is configured .*emea, apac"):
        account_named("amer")
    for bad in ("EMEA", "emea-2", "1st", "emea,emea"):
        monkeypatch.setenv("OCEAN_TRACKING_ACCOUNTS", bad)
        with pytest.raises(ConfigurationError, match="OCEAN_TRACKING_ACCOUNTS"):
            configured_accounts()


def test_an_account_reads_its_own_key_and_never_the_shared_one(monkeypatch):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__API_KEY", FULL_KEY)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BASE_URL", "http://shared.example/v2")
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__BASE_URL", "http://apac.example/v2")
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY", FULL_KEY_2)

    emea = load_settings(account=Account("emea"))
    assert emea.api_key.reveal() == FULL_KEY_2 and emea.base_url == "http://shared.example/v2"
    with pytest.raises(ConfigurationError) as missing:
        load_settings(account=Account("apac"))  # the shared key is never another account's
    assert "of account apac is missing" in str(missing.value)
    assert "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY" in str(missing.value)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY", OTHER_ACCOUNT_KEY)
    assert load_settings(account=Account("apac")).base_url == "http://apac.example/v2"


@pytest.mark.slow
def test_two_accounts_land_in_their_own_datasets_and_models(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD, account_keys=[(OTHER_ACCOUNT_KEY,)])
    env = accounts_env(server, tmp_path)

    # both at once into a fresh lake: its creation is raced (one used to fail on `database is locked`)
    processes = {name: subprocess.Popen(sync_command("--no-maps", "--account", name), env=env, text=True,
                                        stdout=subprocess.PIPE, stderr=subprocess.PIPE) for name in ("emea", "apac")}
    outputs = {name: process.communicate(timeout=600) for name, process in processes.items()}

    assert all(process.returncode == 0 for process in processes.values()), outputs
    store = lake_in(tmp_path / "data")
    with store.connect(read_only=True) as con:
        shipments = {name: con.execute(f"select count(*) from ocean_tracking_{name}.shipments").fetchone()[0]
                     for name in outputs}
        modelled = {name: con.execute(f"select count(*) from _analytics_{name}_staging.stg_shipments").fetchone()[0]
                    for name in outputs}
        schemas = {row[0] for row in con.execute("select schema_name from information_schema.schemata").fetchall()}
    assert shipments == {"emea": api_total(server, "/shipments"),
                         "apac": api_total(server, "/shipments", key=OTHER_ACCOUNT_KEY)}
    assert shipments["emea"] != shipments["apac"], "the two accounts of this seed differ in size"
    assert modelled == shipments
    assert "ocean_tracking" not in schemas and "analytics" not in schemas, "no account fell back to the defaults"
    assert "analytics_emea.container_status" in outputs["emea"][0] and "ocean_tracking_apac.shipments" in outputs["apac"][0]
    output = "".join(out + err for out, err in outputs.values())
    assert FULL_KEY not in output and OTHER_ACCOUNT_KEY not in output


@pytest.mark.slow
def test_a_dataset_refuses_another_accounts_key_before_extracting_and_a_rejected_key_changes_nothing(
    make_sandbox, tmp_path
):
    server = make_sandbox(**FROZEN_WORLD, account_keys=[(OTHER_ACCOUNT_KEY,)])
    assert _sync(server, tmp_path, "--no-models", env=cli_env(server.base_url, tmp_path)).returncode == 0
    served = _served_by_account(server)
    kept = f"sha256:{key_fingerprint(FULL_KEY)}"

    # a mistyped key is rejected by the service, with or without --adopt-new-key, and the dataset keeps its key
    mistyped = cli_env(server.base_url, tmp_path, SOURCES__OCEAN_TRACKING__API_KEY=FULL_KEY + "x")
    for adopt in ((), ("--adopt-new-key",)):
        line = one_error_line(_sync(server, tmp_path, "--no-models", *adopt, env=mistyped))
        assert "HTTP 401" in line and "rejected this API key" in line and "another account" not in line, line
        assert f"dataset ocean_tracking still answers to its key ({kept}); nothing was changed" in line
        assert "--adopt-new-key" not in line and FULL_KEY not in line

    other = cli_env(server.base_url, tmp_path, SOURCES__OCEAN_TRACKING__API_KEY=OTHER_ACCOUNT_KEY)
    line = one_error_line(_sync(server, tmp_path, "--no-models", env=other))

    assert "Dataset ocean_tracking was loaded with another API key" in line and "--account" in line
    assert f"({kept}) than this one" in line and "which http://127.0.0.1:" in line, "still the first key's"
    assert OTHER_ACCOUNT_KEY not in line and FULL_KEY not in line
    # the other key was checked with the service (one request), nothing was extracted with it
    assert _served_by_account(server).get("account-2", 0) == served.get("account-2", 0) + 1 == 1

    # a rotated key of the same account is taken when said so, and from then on it is the dataset's key
    rotated = cli_env(server.base_url, tmp_path, SOURCES__OCEAN_TRACKING__API_KEY=FULL_KEY_2)
    assert _sync(server, tmp_path, "--no-models", "--adopt-new-key", env=rotated).returncode == 0
    assert _sync(server, tmp_path, "--no-models", env=cli_env(server.base_url, tmp_path)).returncode == 2


_HOLD_SYNC_LOCK = """
import select, sys
from pipelines.warehouse import WarehouseStore

with WarehouseStore(catalog=sys.argv[2], data_path=sys.argv[3]).syncing(sys.argv[4]):
    print("held", flush=True)
    select.select([sys.stdin], [], [], float(sys.argv[1]))
"""


@pytest.mark.slow
def test_a_second_run_of_an_account_waits_and_another_account_does_not(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD, account_keys=[(OTHER_ACCOUNT_KEY,)])
    env = accounts_env(server, tmp_path)
    store = lake_in(tmp_path / "data")
    running = _holder(_HOLD_SYNC_LOCK, 600, store.catalog, store.data_path, "ocean_tracking_emea")  # emea's first run
    try:
        second = subprocess.Popen(sync_command("--no-maps", "--no-models", "--account", "emea"), env=env,
                                  stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        other = _sync(server, tmp_path, "--no-models", "--account", "apac", env=env)
        waiting_while_other_ran = second.poll() is None
        served_while_held = _served_by_account(server)
        release(running)
        _, stderr = second.communicate(timeout=600)
    finally:
        running.kill()

    assert other.returncode == 0 and "Waiting for the sync lock" not in other.stderr, other.stderr
    assert waiting_while_other_ran and served_while_held.get("primary", 0) == 0, "emea's second run waited, unspent"
    assert second.returncode == 0, stderr
    assert "Waiting for the sync lock of dataset ocean_tracking_emea" in stderr and "until it is released" in stderr
    with store.connect(read_only=True) as con:
        rows = con.execute("select count(*), count(distinct id) from ocean_tracking_emea.shipments").fetchone()
    assert rows[0] == rows[1] == api_total(server, "/shipments")
