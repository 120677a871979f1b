"""Several accounts on several hosts (issue 20's done-when), with nothing shared between the "hosts" but a real
PostgreSQL (the lake's catalog and the rate limiter's log) and a real S3-compatible server (the lake's files).

Each host is a working directory and `DAGSTER_HOME` of its own with processes started in it. Host B
materializes the ingest of partition `emea` with Dagster (`dagster asset materialize`, its own instance in its
DAGSTER_HOME); while it extracts, host A syncs `emea` with the CLI and host B syncs `apac` with the CLI:
nothing but PostgreSQL tells host A about host B's run. One sandbox serves both accounts at its real budget
(100 requests per window per account, the window shortened): no account is ever answered 429, host A's `emea`
run waits for host B's (the dataset's sync lock in PostgreSQL) while `apac` goes ahead, and every row is
loaded once; an analyst on a third host reads both accounts
through the lake. No password, S3 secret or API key is printed anywhere.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from pipelines.settings import LIMITER_PATH_ENV, LIMITER_URL_ENV
from pipelines.warehouse.store import WarehouseStore, ducklake_store
from tests.lake.test_lake_across_hosts import BUCKET_URL_ENV, CATALOG_ENV
from tests.support.sandboxes import FULL_KEY, REPO, SANDBOX_START, api_total
from tests.support.syncs import cli_env

pytestmark = pytest.mark.slow
APAC_KEY = "sbx_test_hosts_apac_6e0b4f"  # the sandbox's account-2
# The sandbox's rate window and the clients', in seconds: 10 requests a second an account, so the first emea run
# is still extracting, under its lock, well after the others have started.
WINDOW = 10.0
ACCOUNTS = {"OCEAN_TRACKING_ACCOUNTS": "emea,apac",
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY": FULL_KEY,
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY": APAC_KEY}
SYNC = [sys.executable, "-m", "pipelines", "sync", "--destination", "ducklake", "--no-progress", "--no-models"]
MATERIALIZE = [str(Path(sys.executable).with_name("dagster")), "asset", "materialize", "-m", "assets.definitions",
               "--select", "group:ingest"]


def host_env(sandbox, folder: Path, shared: dict[str, str]) -> dict[str, str]:
    """A host's environment: its own working directory, dlt folders, data folder and DAGSTER_HOME; the
    accounts' keys; and what every host shares (the lake's catalog and bucket, the limiter's PostgreSQL)."""
    (folder / "dagster_home").mkdir(parents=True, exist_ok=True)
    env = cli_env(sandbox.base_url, folder, window=WINDOW, DAGSTER_HOME=str(folder / "dagster_home"),
                  **ACCOUNTS, **shared)
    del env["SOURCES__OCEAN_TRACKING__API_KEY"], env[LIMITER_PATH_ENV]  # each account's own key; the shared limiter
    return env


def _served(sandbox) -> dict[str, int]:
    """Requests the sandbox served so far, per account."""
    counts = requests.get(f"{sandbox.root_url}/_sandbox/stats", timeout=10).json()["requests_by_account"]
    return {account: sum(buckets.values()) for account, buckets in counts.items()}


def start(command: list[str], env: dict[str, str], cwd: Path) -> subprocess.Popen:
    """A host's process, its output in files of its working directory (a pipe nobody reads while the test
    waits could fill and stall it); `output` reads them once it ended."""
    name = f"{len(list(cwd.glob('*.out')))}-{Path(command[0]).name}"
    with (cwd / f"{name}.out").open("w") as out, (cwd / f"{name}.err").open("w") as err:
        process = subprocess.Popen(command, env=env, cwd=cwd, text=True, stdout=out, stderr=err)
    process.logs = (cwd / f"{name}.out", cwd / f"{name}.err")  # type: ignore[attr-defined]
    return process


def output(process: subprocess.Popen, timeout: float = 600) -> tuple[str, str]:
    """(stdout, stderr) of a process `start` began, once it ended."""
    process.wait(timeout)
    out, err = process.logs  # type: ignore[attr-defined]
    return out.read_text(), err.read_text()


def test_two_hosts_sync_two_accounts_and_a_second_run_of_one_and_an_analyst_reads_both(
    make_sandbox, tmp_path, postgres_database, s3_bucket, postgres_server, monkeypatch
):
    sandbox = make_sandbox(account_keys=[(APAC_KEY,)], start=SANDBOX_START, speed=0.0, rate_window=WINDOW)
    shared = {CATALOG_ENV: postgres_database.dsn, **s3_bucket.dlt_env("lake/"), LIMITER_URL_ENV: postgres_database.dsn}
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    env_a, env_b = host_env(sandbox, host_a, shared), host_env(sandbox, host_b, shared)

    first = start([*MATERIALIZE, "--partition", "emea"], env_b, host_b)
    deadline = time.monotonic() + 300
    while _served(sandbox).get("primary", 0) < 20:  # host B's emea run is extracting, so it holds the lock
        assert first.poll() is None and time.monotonic() < deadline, output(first)[1][-3000:]
        time.sleep(0.05)
    runs = {
        "emea on host B (Dagster)": first,
        "emea on host A": start([*SYNC, "--account", "emea"], env_a, host_a),
        "apac on host B": start([*SYNC, "--account", "apac"], env_b, host_b),
    }
    outputs = {name: output(run) for name, run in runs.items()}

    for name, run in runs.items():
        assert run.returncode == 0, f"{name}: {outputs[name][1][-3000:]}"
    stats = requests.get(f"{sandbox.root_url}/_sandbox/stats", timeout=10).json()
    assert stats["rate_limited_by_account"] == {}, "no account was ever answered 429"
    assert set(stats["requests_by_account"]) == {"primary", "account-2"}
    assert "Waiting for the sync lock of dataset ocean_tracking_emea" in outputs["emea on host A"][1], \
        "host A's emea run waited for host B's"
    assert "Waiting for the sync lock" not in outputs["apac on host B"][1], "apac never waits for emea"

    for name, value in shared.items():
        monkeypatch.setenv(name, value)
    lake: WarehouseStore = ducklake_store()
    expected = {"emea": (FULL_KEY, 2), "apac": (APAC_KEY, 1)}
    with lake.connect(read_only=True) as con:
        for account, (key, loads) in expected.items():
            for table, path in (("shipments", "/shipments"), ("containers", "/containers")):
                rows, distinct = con.execute(
                    f"select count(*), count(distinct id) from ocean_tracking_{account}.{table}").fetchone()
                assert rows == distinct == api_total(sandbox, path, key=key), (account, table)
            events = con.execute(f"select count(*), count(distinct id) from ocean_tracking_{account}.transport_events")
            assert len(set(events.fetchone())) == 1, f"{account}: every event once"
            done = con.execute(f"select count(*) from ocean_tracking_{account}._dlt_loads where status = 0").fetchone()
            assert done[0] == loads, account

    analyst = tmp_path / "analyst"  # a third host: only the catalog URL and the bucket's credentials
    (analyst / "home").mkdir(parents=True)
    analyst_env = {"PATH": os.environ["PATH"], "HOME": str(analyst / "home"), "PYTHONPATH": str(REPO),
                   "OCEAN_TRACKING_DATA_DIR": str(analyst / "data"),
                   **{name: value for name, value in shared.items() if name not in (BUCKET_URL_ENV, LIMITER_URL_ENV)}}
    sql = ("select (select count(*) from ocean_tracking_emea.shipments) as emea, "
           "(select count(*) from ocean_tracking_apac.shipments) as apac")
    read = subprocess.run([sys.executable, "-m", "pipelines", "lake", "session", "--mode", "csv", "--sql", sql],
                          env=analyst_env, cwd=analyst, capture_output=True, text=True, timeout=300)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["emea,apac", f"{api_total(sandbox, '/shipments')},"
                                                f"{api_total(sandbox, '/shipments', key=APAC_KEY)}"]

    printed = "".join(out + err for out, err in outputs.values()) + read.stdout + read.stderr
    for secret in (postgres_server.password, s3_bucket.secret_access_key, FULL_KEY, APAC_KEY):
        assert secret not in printed, "a secret was printed"
