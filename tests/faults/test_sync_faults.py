"""Syncs through the sandbox's fault profiles: whatever the network does, a clean rerun leaves the
warehouse equal to a fault-free run's, with no row lost and none duplicated."""

from __future__ import annotations

import signal
import subprocess
import sys
import time

import pytest
import requests

from pipelines.errors import MalformedResponseError
from sandbox.config import Settings as SandboxSettings
from tests.support.lakes import lake_in
from tests.support.sandboxes import (
    FROZEN_WORLD,
    FULL_KEY,
    requests_served,
    sandbox_stats,
)
from tests.support.syncs import SyncResult, cli_env, snapshot, sync_once

pytestmark = pytest.mark.faults

# fast retries so a fault run stays quick; the limits are the sandbox's, not the real service's
QUICK_RETRIES = {"max_attempts": 8, "backoff_factor": 0.05, "max_retry_delay": 3.0}


# `5xx`, `reset` and `truncated` alone are ridden out three times each below, every sync succeeding (the stronger
# claim); here `429` (storms, which the default retries wait out) and `mixed` (all four kinds in one run, the
# first sync likely failing) each test the rerun after a sync the faults broke.
@pytest.mark.slow
@pytest.mark.parametrize("profile", ["429", "mixed"])
def test_a_sync_through_faults_then_a_clean_rerun_equals_a_fault_free_run(
    profile, make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(faults=profile, fault_rate=0.15, fault_seed=3, **FROZEN_WORLD)
    try:
        sync_once(server, tmp_path, settings=QUICK_RETRIES)
    except Exception as error:  # a fault may outlast the retries: the rerun must still complete the job
        assert FULL_KEY not in str(error)
    served = sandbox_stats(server)["faults_total"]
    requests.post(f"{server.root_url}/_sandbox/faults", json={"profile": "none"}, timeout=10).raise_for_status()

    rerun = sync_once(server, tmp_path)

    assert served > 0, "the profile injected nothing: the test would prove nothing"
    assert snapshot(rerun) == clean_snapshot


@pytest.mark.slow
def test_responses_slower_than_the_timeout_are_retried(make_sandbox, tmp_path, clean_snapshot):
    server = make_sandbox(faults="slow", fault_rate=0.05, fault_seed=5, fault_delay=3.0, **FROZEN_WORLD)

    result = sync_once(server, tmp_path, settings={**QUICK_RETRIES, "read_timeout": 1.0})

    assert result.stats["retries"] > 0
    assert sandbox_stats(server)["faults_total"] > 0
    assert snapshot(result) == clean_snapshot


def test_a_base_url_without_v2_fails_clearly_and_writes_nothing(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    wrong = type("WrongBase", (), {"base_url": server.root_url, "app_url": server.app_url})()

    with pytest.raises(Exception) as raised:
        sync_once(wrong, tmp_path)

    cause = raised.value
    while not isinstance(cause, MalformedResponseError) and cause.__cause__ is not None:
        cause = cause.__cause__
    assert isinstance(cause, MalformedResponseError)
    assert "/v2" in str(cause) and "HTML" in str(cause)
    warehouse = lake_in(tmp_path / "data")
    if warehouse.exists():
        with warehouse.connect(read_only=True) as con:
            assert con.execute("select count(*) from information_schema.tables where table_catalog = current_database() "
                               "and table_name = 'shipments'").fetchone() == (0,)


@pytest.mark.slow
def test_a_process_killed_mid_sync_loses_nothing_on_rerun(make_sandbox, tmp_path, clean_snapshot):
    # a 1 s window and its real limits slow the sync down enough to kill it halfway
    server = make_sandbox(speed=0.0, rate_window=1.0)
    env = cli_env(server.base_url, tmp_path, window=1.0)
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-models"]  # what it loads
    process = subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 120
    while requests_served(server) < 60:
        assert process.poll() is None, "the sync ended before it could be killed"
        assert time.monotonic() < deadline
        time.sleep(0.05)
    process.send_signal(signal.SIGKILL)
    process.wait(10)

    rerun = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert snapshot(SyncResult({}, lake_in(tmp_path / "data"))) == clean_snapshot


# ---- three syncs in a row through a fault profile --------------------------------------------------------
# The default retries ride out the sandbox's `5xx`, `reset` and `truncated` profiles at their default rate:
# three syncs in a row through one sandbox (a new fault seed each), every one succeeds and leaves the
# warehouse equal to a fault-free run's. Each is a full sync into a fresh warehouse (about 200 requests in the
# test world): an incremental one sends a handful of requests and would mostly meet no fault at all.  Attempts
# and the request deadline are the defaults; only the backoff is shortened (0.05 s instead of 1 s), to keep
# the test quick. That changes nothing the sandbox decides: its faults are counted in requests (a burst of 1-3
# consecutive 5xx, then a fresh draw at the fault rate), not in seconds, so the same attempts meet the same
# faults however long the client sleeps between them. Why the defaults suffice is worked out in
# `pipelines.api.config.Settings`.


QUICK_BACKOFF = {"backoff_factor": 0.05}


FAULT_SEEDS = (101, 202, 303)


@pytest.mark.slow
@pytest.mark.parametrize("profile", ["5xx", "reset", "truncated"])
def test_three_syncs_in_a_row_ride_out_the_profile(profile, make_sandbox, tmp_path, clean_snapshot):
    rate = SandboxSettings().fault_rate
    server = make_sandbox(faults=profile, fault_rate=rate, **FROZEN_WORLD)

    for seed in FAULT_SEEDS:
        requests.post(
            f"{server.root_url}/_sandbox/faults", json={"profile": profile, "rate": rate, "seed": seed}, timeout=10
        ).raise_for_status()
        served_before = sandbox_stats(server)["faults_total"]

        result = sync_once(server, tmp_path / f"seed-{seed}", settings=QUICK_BACKOFF)

        assert sandbox_stats(server)["faults_total"] > served_before, f"seed {seed} injected nothing"
        assert result.stats["retries"] > 0
        assert snapshot(result) == clean_snapshot, f"seed {seed}"
