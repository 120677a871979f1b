"""What a sync says when the machine, not the service, is in the way: a warehouse another process holds, a
corrupt limiter file. One line, what to do, no traceback; and accounts never share dlt's working folder.

A plain DuckDB file is held by any process that opens it; the DuckLake only by its one writer lock, which
the load takes (the extraction never does), and never by an analyst's read-only session."""

from __future__ import annotations

import subprocess
import sys
import time

import pytest

from pipelines.warehouse import duckdb_store
from tests.support.holders import hold_duckdb, hold_lake, release
from tests.support.lakes import lake_in
from tests.support.sandboxes import FROZEN_WORLD, FULL_KEY, FULL_KEY_2, api_total, requests_served
from tests.support.syncs import (
    FINISHED_PENDING,
    STAGES,
    SyncResult,
    cli_env,
    one_error_line,
    packages_left,
    snapshot,
    sync_command,
)

pytestmark = pytest.mark.faults


def on_duckdb(path) -> tuple[str, ...]:
    """The sync options that load into the DuckDB file `path` instead of the default DuckLake."""
    return "--destination", "duckdb", "--duckdb", str(path)


def sync(server, workdir, *extra: str, **env: str) -> subprocess.CompletedProcess:
    """A sync without models and maps into the DuckLake under workdir/data (unless `extra` says otherwise);
    its limiter and dlt folders in workdir."""
    return subprocess.run(sync_command("--no-models", "--no-maps", *extra), env=cli_env(server.base_url, workdir, **env),
                          capture_output=True, text=True, timeout=300)


def test_a_warehouse_held_by_another_process_names_the_holder(make_sandbox, tmp_path):
    # the plain DuckDB option: any process that opens its file holds it (the lake's case is below)
    server = make_sandbox(**FROZEN_WORLD)
    warehouse = tmp_path / "warehouse.duckdb"
    holder = hold_duckdb(warehouse, 600)
    try:
        started = time.monotonic()
        done = sync(server, tmp_path, *on_duckdb(warehouse), OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS="2")
        waited = time.monotonic() - started
    finally:
        holder.kill()
        holder.wait()

    line = one_error_line(done)
    assert str(warehouse) in line and f"process {holder.pid} " in line
    assert "credentials" not in line
    assert waited < 60
    assert requests_served(server) == 0, "no request is spent while the warehouse is held"


@pytest.mark.slow
def test_a_corrupt_limiter_file_is_named_with_the_remedy(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    (tmp_path / "limiter.sqlite").write_bytes(b"this is not a database" * 100)

    line = one_error_line(sync(server, tmp_path))

    assert str(tmp_path / "limiter.sqlite") in line and "delete it" in line
    (tmp_path / "limiter.sqlite").unlink()
    assert sync(server, tmp_path).returncode == 0, "deleting it is the whole remedy"


@pytest.mark.slow
def test_two_accounts_sharing_one_dlt_folder_never_share_a_working_folder(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    # one DuckLake per account: each account's data folder
    first = {"OCEAN_TRACKING_PIPELINES_DIR": str(tmp_path / "dlt"), "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "a")}
    second = {**first, "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "b"), "SOURCES__OCEAN_TRACKING__API_KEY": FULL_KEY_2}

    runs = [
        sync(server, tmp_path, **first),
        sync(server, tmp_path, **second),
        sync(server, tmp_path, **first),
        sync(server, tmp_path, "--dataset", "second_account", **second),
    ]

    assert [run.returncode for run in runs] == [0, 0, 0, 0], [run.stderr for run in runs]
    shipments = api_total(server, "/shipments")
    assert SyncResult({}, lake_in(tmp_path / "a")).scalar("select count(*) from shipments") == shipments
    assert SyncResult({}, lake_in(tmp_path / "b")).scalar("select count(*) from shipments") == shipments
    assert SyncResult({}, lake_in(tmp_path / "b")).scalar("select count(*) from second_account.shipments") == shipments
    assert len(list((tmp_path / "dlt").iterdir())) == 3, "one working folder per warehouse and dataset"
    assert FULL_KEY not in "".join(run.stderr + run.stdout for run in runs)


@pytest.mark.slow
def test_a_warehouse_taken_during_the_extraction_is_waited_for_not_thrown_away(make_sandbox, tmp_path, clean_snapshot):
    # the plain DuckDB option: an analyst's read-only session holds its file (never the lake, see below)
    server = make_sandbox(**FROZEN_WORLD)
    warehouse = tmp_path / "warehouse.duckdb"
    env = cli_env(server.base_url, tmp_path, OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS="60")
    sync_process = subprocess.Popen(sync_command("--no-models", *on_duckdb(warehouse)), env=env,
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
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
    assert snapshot(SyncResult({}, duckdb_store(warehouse))) == clean_snapshot


@pytest.mark.slow
def test_a_sync_extracts_while_the_lake_is_written_then_waits_for_the_writer_and_loads(
    make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(**FROZEN_WORLD)
    writer = hold_lake(lake_in(tmp_path / "data"), 600)  # a model run, a maintenance run or a publish
    sync_process = subprocess.Popen(sync_command("--no-models"), env=cli_env(server.base_url, tmp_path),
                                    stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        said = []
        while not said or ("Waiting for" not in said[-1] and said[-1]):  # until the notice, or the end
            said.append(sync_process.stderr.readline())
        served_while_waiting = requests_served(server)
        time.sleep(1)
        still_waiting = sync_process.poll() is None
    finally:
        release(writer)
    stdout, stderr = sync_process.communicate(timeout=300)

    assert "writer lock" in said[-1] and f"process {writer.pid} " in said[-1], "".join(said) + stderr
    assert still_waiting, "it waits for the writer, it does not fail"
    assert sync_process.returncode == 0, stderr
    assert requests_served(server) == served_while_waiting > 0, "the whole extraction ran while the lake was held"
    assert FINISHED_PENDING not in stdout
    assert snapshot(SyncResult({}, lake_in(tmp_path / "data"))) == clean_snapshot


@pytest.mark.slow
def test_a_lake_writer_that_never_lets_go_fails_the_sync_in_one_line_and_the_next_sync_loads_its_extraction(
    make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(**FROZEN_WORLD)
    env = cli_env(server.base_url, tmp_path, OCEAN_TRACKING_PIPELINES_DIR=str(tmp_path / "dlt"))
    writer = hold_lake(lake_in(tmp_path / "data"), 600)
    try:
        failed = subprocess.run(sync_command("--no-models"), env={**env, "OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS": "2"},
                                capture_output=True, text=True, timeout=300)
    finally:
        release(writer)
    line = one_error_line(failed)
    extraction = requests_served(server)
    left = packages_left(tmp_path)

    resumed = subprocess.run(sync_command("--no-models"), env=env, capture_output=True, text=True, timeout=300)
    resumed_spent = requests_served(server) - extraction
    again = subprocess.run(sync_command("--no-models"), env=env, capture_output=True, text=True, timeout=300)
    incremental = requests_served(server) - extraction - resumed_spent

    assert "writer lock" in line and f"process {writer.pid} " in line and "OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS" in line
    assert line.endswith("The extracted data is kept: the next sync loads it first."), line
    assert left == (0, 0, 1, 0), f"normalized and pending: {dict(zip(STAGES, left, strict=True))}"
    assert resumed.returncode == 0 and again.returncode == 0, resumed.stderr + again.stderr
    assert FINISHED_PENDING in resumed.stdout and FINISHED_PENDING not in again.stdout
    assert packages_left(tmp_path)[:3] == (0, 0, 0)
    assert resumed_spent == incremental < extraction, "the kept extraction was loaded, not fetched again"
    assert snapshot(SyncResult({}, lake_in(tmp_path / "data"))) == clean_snapshot


@pytest.mark.slow
def test_an_analysts_open_session_delays_neither_a_sync_nor_a_write_back_publish(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    assert sync(server, tmp_path).returncode == 0
    lake = SyncResult({}, lake_in(tmp_path / "data"))
    loads = lake.scalar("select count(*) from _dlt_loads")
    batch = tmp_path / "batch.csv"
    batch.write_text("request_number,request_type,scac\nWBLAKE001,bill_of_lading,MAEU\n")
    analyst = hold_lake(lake.store, 600, read_only=True)
    try:
        # The analyst never lets go, and a writer waiting for it could only fail: the writer lock after 1 s,
        # the catalog's SQLite after its busy timeout. So succeeding without a wait is not being delayed.
        quick = {"OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS": "1"}
        synced = sync(server, tmp_path, **quick)
        published = subprocess.run([sys.executable, "-m", "pipelines", "create-tracking-requests", str(batch)],
                                   env=cli_env(server.base_url, tmp_path, **quick), capture_output=True, text=True,
                                   timeout=300)
        analyst_still_reading = analyst.poll() is None
    finally:
        release(analyst)

    assert synced.returncode == 0 and "Waiting" not in synced.stderr, synced.stderr
    assert published.returncode == 0 and "Waiting" not in published.stderr, published.stdout + published.stderr
    assert analyst_still_reading
    assert lake.scalar("select count(*) from _dlt_loads") == loads + 1
    assert lake.query("select request_number, status from writeback.tracking_request_outcomes") == [
        ("WBLAKE001", "accepted")
    ]
