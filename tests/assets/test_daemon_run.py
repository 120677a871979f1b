"""A run launched the way a schedule launches it: a real `dagster-daemon run` dequeues it, the instance's
run launcher starts a run worker process, and the job's executor runs every step in that one process.

The run is launched by README.md's Dagster block, run as written at the project root: it starts the daily
schedule in the daemon's code location and launches `full_sync` through the daemon's queue."""

from __future__ import annotations

import json
import os
import subprocess
import tomllib

import dagster as dg
import pytest

from bench.daemon_run import REPO_ROOT, DaemonDeployment
from pipelines.settings import (
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    APP_URL_ENV,
    BASE_URL_ENV,
    DATA_DIR_ENV,
    DATASET_NAME,
    GEOPARQUET_FILE_NAME,
    RATE_WINDOW_ENV,
)
from tests.support.dagster import TEST_RATE_WINDOW, warehouse_resource
from tests.support.readme import block_with
from tests.support.sandboxes import FULL_KEY

# The README's line that points DAGSTER_HOME at the project's instance: here the instance is a temporary
# DAGSTER_HOME made from the same dagster.yaml (DaemonDeployment), so that line is the one not run.
INSTANCE_LINE = "export DAGSTER_HOME=$PWD"


def readme_dagster_block() -> list[str]:
    """README.md's Dagster block: every line but the one choosing the instance."""
    block = block_with(".venv/bin/dagster job launch")
    assert INSTANCE_LINE in block, "the README's Dagster block changed: update INSTANCE_LINE"
    return [line for line in block if line != INSTANCE_LINE]


@pytest.fixture(scope="module")
def daemon_run(sandbox, tmp_path_factory):
    """`full_sync` launched by the README's Dagster block on a daemon-served instance made from the
    project's dagster.yaml."""
    workdir = tmp_path_factory.mktemp("daemon")
    env = {
        **os.environ,
        API_KEY_ENV: FULL_KEY,
        BASE_URL_ENV: sandbox.base_url,
        APP_URL_ENV: sandbox.app_url,
        RATE_WINDOW_ENV: str(TEST_RATE_WINDOW),
        DATA_DIR_ENV: str(workdir / "data"),
    }
    with DaemonDeployment(workdir / "home", env) as deployment:
        before = deployment.run_ids("full_sync")
        for line in readme_dagster_block():
            done = subprocess.run(["bash", "-c", line], cwd=REPO_ROOT, env=deployment.env, capture_output=True, text=True)
            assert done.returncode == 0, f"{line}\n{done.stderr[-2000:]}"
        (run_id,) = deployment.run_ids("full_sync") - before
        record = deployment.wait(run_id, timeout=480)
        with deployment.instance() as instance:
            events = instance.all_logs(record.dagster_run.run_id)
            yield record, events, deployment, workdir / "data"


def test_the_readmes_dagster_commands_name_no_module():
    # with `-m assets.definitions` a command names a code location the daemon does not serve: the schedule it
    # starts stays stopped there and the run it launches fails (issue 31)
    dagster_lines = [line for line in readme_dagster_block() if line.startswith(".venv/bin/dagster ")]
    assert dagster_lines and not [line for line in dagster_lines if " -m " in line or "--module-name" in line]


@pytest.mark.slow
def test_the_readme_starts_the_daily_schedule_where_the_daemon_runs_it(daemon_run):
    record, _, deployment, _ = daemon_run
    # the code location a daemon started at the project root serves (a command given `-m` names another)
    served = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]["code_location_name"]
    assert record.dagster_run.remote_job_origin.location_name == served
    with deployment.instance() as instance:
        running = {(state.name, state.origin.repository_origin.code_location_origin.location_name)
                   for state in instance.all_instigator_state() if state.is_running}  # fmt: skip
    assert ("full_sync_daily", served) in running, running


@pytest.mark.slow
def test_the_daemon_launches_full_sync_and_it_succeeds(daemon_run):
    record, events, deployment, data = daemon_run
    assert record.dagster_run.status == dg.DagsterRunStatus.SUCCESS, deployment.log_path.read_text()[-3000:]
    materialized = {e.dagster_event.asset_key.to_user_string() for e in events if e.dagster_event and e.dagster_event.is_step_materialization}
    assert f"{DATASET_NAME}/containers" in materialized
    assert f"{ANALYTICS_SCHEMA}/container_status" in materialized
    assert "maps/route_maps" in materialized
    with warehouse_resource(data).connect(read_only=True) as con:
        containers = con.execute(f"select count(*) from {DATASET_NAME}.containers").fetchone()[0]
        status = con.execute(f"select count(*) from {ANALYTICS_SCHEMA}.container_status").fetchone()[0]
    assert containers > 0 and status == containers
    assert (data / GEOPARQUET_FILE_NAME).exists()


@pytest.mark.slow
def test_every_step_runs_in_the_one_run_worker_process(daemon_run):
    _, events, _, _ = daemon_run
    step_pids = {e.dagster_event.pid for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.STEP_START}
    steps = {e.step_key for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.STEP_START}
    assert len(steps) >= 4  # ingest, its checks, the models, the map assets
    assert len(step_pids) == 1, "the in-process executor: the code location is imported once a run"
    worker_pid = next(e.dagster_event.pid for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_START)
    assert step_pids == {worker_pid}


@pytest.mark.slow
def test_the_run_records_its_api_spend_once_and_never_the_key(daemon_run):
    record, events, deployment, _ = daemon_run
    assert int(record.dagster_run.tags["ocean_tracking/api_requests"]) > 0
    stored = json.dumps([str(e) for e in events]) + json.dumps(record.dagster_run.tags)
    assert FULL_KEY not in stored
    assert FULL_KEY not in deployment.log_path.read_text()
