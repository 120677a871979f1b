"""A run launched the way a schedule launches it: a real `dagster-daemon run` dequeues it, the instance's
run launcher starts a run worker process, and the job's executor runs every step in that one process."""

from __future__ import annotations

import json
import os

import dagster as dg
import pytest

from bench.daemon_run import DaemonDeployment
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
from tests.assets.conftest import TEST_RATE_WINDOW, warehouse_resource
from tests.conftest import FULL_KEY

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def daemon_run(sandbox, tmp_path_factory):
    """`full_sync` launched through a daemon-served instance made from the project's dagster.yaml."""
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
        record = deployment.wait(deployment.launch("full_sync"), timeout=480)
        with deployment.instance() as instance:
            events = instance.all_logs(record.dagster_run.run_id)
            yield record, events, deployment, workdir / "data"


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


def test_every_step_runs_in_the_one_run_worker_process(daemon_run):
    _, events, _, _ = daemon_run
    step_pids = {e.dagster_event.pid for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.STEP_START}
    steps = {e.step_key for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.STEP_START}
    assert len(steps) >= 4  # ingest, its checks, the models, the map assets
    assert len(step_pids) == 1, "the in-process executor: the code location is imported once a run"
    worker_pid = next(e.dagster_event.pid for e in events if e.dagster_event and e.dagster_event.event_type == dg.DagsterEventType.RUN_START)
    assert step_pids == {worker_pid}


def test_the_run_records_its_api_spend_once_and_never_the_key(daemon_run):
    record, events, deployment, _ = daemon_run
    assert int(record.dagster_run.tags["ocean_tracking/api_requests"]) > 0
    stored = json.dumps([str(e) for e in events]) + json.dumps(record.dagster_run.tags)
    assert FULL_KEY not in stored
    assert FULL_KEY not in deployment.log_path.read_text()
