"""The lake across hosts (issue 20): a PostgreSQL catalog and the data in S3-compatible object storage,
selected by dlt's own configuration keys only, against a real PostgreSQL 15 and a real S3 server (moto).

Everything runs as users run it, in processes of their own with only environment variables set (each host
with its own empty home folder, as a new machine or a pod has, so DuckDB finds no extension there): a CLI
sync loads the sandbox's rows (Parquet files in the bucket, the catalog in PostgreSQL); an analyst with
its own working directory and only the catalog URL and the S3 settings reads them read-only; three hosts
creating the fresh catalog at once all succeed and the rows are loaded once; a writer holding the lock
makes another wait, and time out in one line under a short timeout. The catalog's password and the S3
secret key appear in no output.
"""

from __future__ import annotations

import os
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from pipelines.settings import (
    DUCKLAKE_CATALOG_ENV,
    DUCKLAKE_STORAGE_ENV,
    LIMITER_PATH_ENV,
    LIMITER_URL_ENV,
    LOCK_TIMEOUT_ENV,
)
from pipelines.warehouse import WarehouseStore, ducklake_store
from tests.support.holders import hold_lake, release
from tests.support.sandboxes import FULL_KEY, REPO, SANDBOX_START, api_total
from tests.support.syncs import cli_env

SYNC = [sys.executable, "-m", "pipelines", "sync", "--destination", "ducklake", "--no-maps", "--no-progress"]


@pytest.fixture
def lake_env(postgres_database, s3_bucket) -> dict[str, str]:
    """dlt's keys that put the lake's catalog in the test's PostgreSQL database and its files in the bucket."""
    return {DUCKLAKE_CATALOG_ENV: postgres_database.dsn, **s3_bucket.dlt_env("lake/")}


@pytest.fixture
def secrets(postgres_server, s3_bucket) -> tuple[str, str]:
    """What must never be printed: the catalog's password and the S3 secret key."""
    return postgres_server.password, s3_bucket.secret_access_key


@pytest.fixture
def lake(lake_env, monkeypatch) -> WarehouseStore:
    """The lake as this process sees it with `lake_env` set (as a host configured by environment)."""
    for name, value in lake_env.items():
        monkeypatch.setenv(name, value)
    return ducklake_store()


def _run(command: list[str], env: dict[str, str], cwd: Path = REPO) -> subprocess.CompletedProcess:
    return subprocess.run(command, env=env, cwd=cwd, capture_output=True, text=True, timeout=600)


def _assert_nothing_secret(secrets: tuple[str, ...], *outputs: str) -> None:
    for secret in secrets:
        assert all(secret not in output for output in outputs), "a secret was printed"


def _count(store: WarehouseStore, sql: str) -> int:
    with store.connect(read_only=True) as con:
        return con.execute(sql).fetchone()[0]


@pytest.mark.slow
def test_a_sync_loads_into_postgres_and_s3_and_an_analyst_elsewhere_reads_it(
    own_sandbox, tmp_path, lake_env, lake, s3_bucket, postgres_database, secrets
):
    env = _fresh_host(own_sandbox.base_url, tmp_path / "host-a", lake_env)
    sync = _run(SYNC, env)
    assert sync.returncode == 0, sync.stderr[-3000:]

    parquet = [key for key in s3_bucket.keys("lake/") if key.endswith(".parquet")]
    assert parquet, "the lake's data files are in the bucket"
    assert not (tmp_path / "host-a" / "data" / "ducklake").exists(), "nothing of the lake is on local disk"
    (files,) = postgres_database.query("select count(*) from lake.ducklake_data_file")[0]
    assert files > 0, "the catalog is in PostgreSQL, in the schema dlt's loader and our readers share"
    containers = api_total(own_sandbox, "/containers")
    assert _count(lake, "select count(distinct id) from ocean_tracking.containers") == containers
    assert _count(lake, "select count(*) from analytics.container_status") > 0, "dbt built the models there"

    analyst = tmp_path / "analyst"  # another machine: its own folder and DuckDB home, no BUCKET_URL
    (analyst / "home").mkdir(parents=True)
    analyst_env = {
        "PATH": os.environ["PATH"], "HOME": str(analyst / "home"), "PYTHONPATH": str(REPO),
        "OCEAN_TRACKING_DATA_DIR": str(analyst / "data"),
        **{name: value for name, value in lake_env.items() if name != DUCKLAKE_STORAGE_ENV},
    }  # fmt: skip
    query = [sys.executable, "-m", "pipelines", "lake", "session", "--mode", "csv", "--sql"]
    read = _run([*query, "select count(*) as n from ocean_tracking.containers"], analyst_env, cwd=analyst)
    assert read.returncode == 0, read.stderr
    assert read.stdout.split() == ["n", str(containers)]
    write = _run([*query, "create table ocean_tracking.scratch as select 1"], analyst_env, cwd=analyst)
    assert write.returncode != 0 and "read-only" in (write.stdout + write.stderr).lower()
    shown = _run([sys.executable, "-m", "pipelines", "lake", "session", "--print-sql"], analyst_env, cwd=analyst)
    assert shown.returncode == 0, shown.stderr
    assert "CREATE OR REPLACE SECRET" in shown.stdout and "METADATA_SCHEMA 'lake'" in shown.stdout

    maintain = _run([sys.executable, "-m", "pipelines", "lake", "maintain"], env)
    assert maintain.returncode == 0, maintain.stderr
    assert _count(lake, "select count(distinct id) from ocean_tracking.containers") == containers
    backup = _run([sys.executable, "-m", "pipelines", "lake", "backup", str(tmp_path / "backup")], env)
    assert backup.returncode == 2
    (line,) = backup.stderr.strip().splitlines()
    assert "PostgreSQL's own backups" in line and "bucket's" in line

    _assert_nothing_secret(secrets, *(run.stdout + run.stderr for run in (sync, read, write, shown, maintain, backup)))
    dbt_log = REPO / "sql" / "logs" / "dbt.log"
    if dbt_log.exists():
        _assert_nothing_secret(secrets, dbt_log.read_text(errors="replace"))


def _fresh_host(base_url: str, folder: Path, lake_env: dict[str, str]) -> dict[str, str]:
    """The environment of a new machine (or a Kubernetes pod): its own empty home folder, so DuckDB's
    extension directory (`~/.duckdb/extensions`) starts empty, and its own working folders."""
    (folder / "home").mkdir(parents=True)
    return cli_env(base_url, folder, HOME=str(folder / "home"), **lake_env)


@pytest.mark.slow
def test_three_hosts_creating_a_fresh_catalog_at_once_all_load_and_rows_load_once(
    own_sandbox, tmp_path, lake_env, lake, secrets
):
    hosts = [
        subprocess.Popen([*SYNC, "--no-models"], env=_fresh_host(own_sandbox.base_url, tmp_path / f"host-{n}", lake_env),
                         cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        for n in range(3)
    ]  # fmt: skip
    outputs = [host.communicate(timeout=600) for host in hosts]
    for host, (_out, err) in zip(hosts, outputs, strict=True):
        assert host.returncode == 0, err[-3000:]
        assert "pg_namespace" not in err and "Transaction conflict" not in err
    _assert_nothing_secret(secrets, *(out + err for out, err in outputs))

    containers = api_total(own_sandbox, "/containers")
    assert _count(lake, "select count(*) from ocean_tracking.containers") == containers
    assert _count(lake, "select count(distinct id) from ocean_tracking.containers") == containers
    assert _count(lake, "select count(*) from ocean_tracking._dlt_loads where status = 0") == 3


def test_a_writer_holding_the_lock_makes_another_wait_and_times_out_in_one_line(
    tmp_path, lake_env, lake, secrets
):
    lake.create_if_missing()  # an empty lake: created under the lock, the catalog in PostgreSQL
    assert lake.exists()
    env = cli_env("http://127.0.0.1:9/v2", tmp_path, **lake_env)
    maintain = [sys.executable, "-m", "pipelines", "lake", "maintain"]

    holder = hold_lake(lake, 300)
    try:
        waiter = subprocess.Popen(maintain, env=env, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                  text=True)  # fmt: skip
        waiting = waiter.stderr.readline()
        assert "Waiting for the writer lock of the DuckLake postgres://" in waiting, waiting
        assert f"process {holder.pid} " in waiting, "the holder is named: its process and host"
        assert waiter.poll() is None, "the second writer waits while the first holds the lock"

        timed_out = _run(maintain, {**env, LOCK_TIMEOUT_ENV: "0.5"})
        assert timed_out.returncode == 2
        (line,) = timed_out.stderr.strip().splitlines()[-1:]
        assert "is still held by process" in line and f"process {holder.pid} " in line
        assert LOCK_TIMEOUT_ENV in line
    finally:
        release(holder)
    out, err = waiter.communicate(timeout=300)
    assert waiter.returncode == 0, err
    _assert_nothing_secret(secrets, waiting, out, err, timed_out.stdout, timed_out.stderr)


# ---- several accounts on several hosts -------------------------------------------------------------------
# Several accounts on several hosts (issue 20's done-when), with nothing shared between the "hosts" but a real
# PostgreSQL (the lake's catalog and the rate limiter's log) and a real S3-compatible server (the lake's
# files).  Each host is a working directory and `DAGSTER_HOME` of its own with processes started in it. Host B
# materializes the ingest of partition `emea` with Dagster (`dagster asset materialize`, its own instance in
# its DAGSTER_HOME); while it extracts, host A syncs `emea` with the CLI and host B syncs `apac` with the CLI:
# nothing but PostgreSQL tells host A about host B's run. One sandbox serves both accounts at its real budget
# (100 requests per window per account, the window shortened): no account is ever answered 429, host A's
# `emea` run waits for host B's (the dataset's sync lock in PostgreSQL) while `apac` goes ahead, and every row
# is loaded once; an analyst on a third host reads both accounts through the lake. No password, S3 secret or
# API key is printed anywhere.


APAC_KEY = "sbx_test_hosts_apac_6e0b4f"  # the sandbox's account-2


# The sandbox's rate window and the clients', in seconds: 10 requests a second an account, so the first emea run
# is still extracting, under its lock, well after the others have started.
WINDOW = 10.0


ACCOUNTS = {"OCEAN_TRACKING_ACCOUNTS": "emea,apac",
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY": FULL_KEY,
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY": APAC_KEY}


ACCOUNTS_SYNC = [sys.executable, "-m", "pipelines", "sync", "--destination", "ducklake", "--no-progress", "--no-models"]


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


@pytest.mark.slow
def test_two_hosts_sync_two_accounts_and_a_second_run_of_one_and_an_analyst_reads_both(
    make_sandbox, tmp_path, postgres_database, s3_bucket, postgres_server, monkeypatch
):
    sandbox = make_sandbox(account_keys=[(APAC_KEY,)], start=SANDBOX_START, speed=0.0, rate_window=WINDOW)
    shared = {DUCKLAKE_CATALOG_ENV: postgres_database.dsn, **s3_bucket.dlt_env("lake/"), LIMITER_URL_ENV: postgres_database.dsn}
    host_a, host_b = tmp_path / "host-a", tmp_path / "host-b"
    env_a, env_b = host_env(sandbox, host_a, shared), host_env(sandbox, host_b, shared)

    first = start([*MATERIALIZE, "--partition", "emea"], env_b, host_b)
    deadline = time.monotonic() + 300
    while _served(sandbox).get("primary", 0) < 20:  # host B's emea run is extracting, so it holds the lock
        assert first.poll() is None and time.monotonic() < deadline, output(first)[1][-3000:]
        time.sleep(0.05)
    runs = {
        "emea on host B (Dagster)": first,
        "emea on host A": start([*ACCOUNTS_SYNC, "--account", "emea"], env_a, host_a),
        "apac on host B": start([*ACCOUNTS_SYNC, "--account", "apac"], env_b, host_b),
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
                   **{name: value for name, value in shared.items() if name not in (DUCKLAKE_STORAGE_ENV, LIMITER_URL_ENV)}}
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
