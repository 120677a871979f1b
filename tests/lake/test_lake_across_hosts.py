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
from pathlib import Path

import pytest

from pipelines.settings import LOCK_TIMEOUT_ENV
from pipelines.warehouse.store import WarehouseStore, ducklake_store
from tests.support.holders import hold_lake, release
from tests.support.sandboxes import REPO, api_total
from tests.support.syncs import cli_env

pytestmark = pytest.mark.slow
CATALOG_ENV = "DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG"
BUCKET_URL_ENV = "DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__BUCKET_URL"
SYNC = [sys.executable, "-m", "pipelines", "sync", "--destination", "ducklake", "--no-maps", "--no-progress"]


@pytest.fixture
def lake_env(postgres_database, s3_bucket) -> dict[str, str]:
    """dlt's keys that put the lake's catalog in the test's PostgreSQL database and its files in the bucket."""
    return {CATALOG_ENV: postgres_database.dsn, **s3_bucket.dlt_env("lake/")}


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
        **{name: value for name, value in lake_env.items() if name != BUCKET_URL_ENV},
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
