"""What a sync says when the machine, not the service, is in the way: a warehouse another process holds, a
corrupt limiter file. One line, what to do, no traceback; and accounts never share dlt's working folder."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from tests.conftest import FULL_KEY, FULL_KEY_2, hold_duckdb
from tests.e2e.conftest import SyncResult, api_total, cli_env, requests_served
from tests.faults.test_sync_faults import FROZEN, snapshot

pytestmark = pytest.mark.faults


def sync(server, workdir, duckdb_path, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """`python -m pipelines sync` into `duckdb_path`; its limiter and dlt folders in workdir."""
    command = [sys.executable, "-m", "pipelines", "sync", "--duckdb", str(duckdb_path), "--no-progress",
               "--no-models", "--no-maps", *extra]
    return subprocess.run(command, env=cli_env(server.base_url, workdir, **env), capture_output=True, text=True,
                          timeout=300)


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The one error line, which must end stderr (a notice of what the run waited for may precede it)."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in done.stderr, done.stderr
    return errors[0]


def test_a_warehouse_held_by_another_process_names_the_holder(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN)
    warehouse = tmp_path / "warehouse.duckdb"
    holder = hold_duckdb(warehouse, 600)
    try:
        started = time.monotonic()
        done = sync(server, tmp_path, warehouse, OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS="2")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()

    line = one_error_line(done)
    assert str(warehouse) in line and f"process {holder.pid} " in line
    assert "credentials" not in line
    assert waited < 60
    assert requests_served(server) == 0, "no request is spent while the warehouse is held"


def test_a_corrupt_limiter_file_is_named_with_the_remedy(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN)
    (tmp_path / "limiter.sqlite").write_bytes(b"this is not a database" * 100)

    line = one_error_line(sync(server, tmp_path, tmp_path / "warehouse.duckdb"))

    assert str(tmp_path / "limiter.sqlite") in line and "delete it" in line
    (tmp_path / "limiter.sqlite").unlink()
    assert sync(server, tmp_path, tmp_path / "warehouse.duckdb").returncode == 0, "deleting it is the whole remedy"


def test_two_accounts_sharing_one_dlt_folder_never_share_a_working_folder(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN)
    shared = {"OCEAN_TRACKING_PIPELINES_DIR": str(tmp_path / "dlt")}
    first, second = tmp_path / "a.duckdb", tmp_path / "b.duckdb"

    runs = [
        sync(server, tmp_path, first, **shared),
        sync(server, tmp_path, second, **shared, SOURCES__OCEAN_TRACKING__API_KEY=FULL_KEY_2),
        sync(server, tmp_path, first, **shared),
        sync(server, tmp_path, second, "--dataset", "second_account", **shared,
             SOURCES__OCEAN_TRACKING__API_KEY=FULL_KEY_2),
    ]  # fmt: skip

    assert [run.returncode for run in runs] == [0, 0, 0, 0], [run.stderr for run in runs]
    shipments = api_total(server, "/shipments")
    assert SyncResult({}, first).scalar("select count(*) from shipments") == shipments
    assert SyncResult({}, second).scalar("select count(*) from shipments") == shipments
    assert SyncResult({}, second).scalar("select count(*) from second_account.shipments") == shipments
    assert len(list((tmp_path / "dlt").iterdir())) == 3, "one working folder per warehouse and dataset"
    assert FULL_KEY not in "".join(run.stderr + run.stdout for run in runs)


def test_a_warehouse_taken_during_the_extraction_is_waited_for_not_thrown_away(make_sandbox, tmp_path, clean_snapshot):
    server = make_sandbox(**FROZEN)
    warehouse = tmp_path / "warehouse.duckdb"
    command = [sys.executable, "-m", "pipelines", "sync", "--duckdb", str(warehouse), "--no-progress", "--no-models"]
    env = cli_env(server.base_url, tmp_path, OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS="60")
    sync_process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    deadline = time.monotonic() + 60
    while requests_served(server) < 20:  # extracting: the warehouse was free when the sync began
        assert sync_process.poll() is None and time.monotonic() < deadline
        time.sleep(0.02)
    analyst = hold_duckdb(warehouse, 8, read_only=True)
    try:
        stdout, stderr = sync_process.communicate(timeout=300)
    finally:
        analyst.kill()
        analyst.wait()

    assert sync_process.returncode == 0, stderr
    assert "waiting for it, the extracted data is kept" in stderr, "the load met the analyst's session"
    assert "Finished the load" not in stdout
    assert snapshot(SyncResult({}, warehouse)) == clean_snapshot
