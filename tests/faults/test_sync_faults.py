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
from tests.support.lakes import lake_in
from tests.support.sandboxes import FULL_KEY, GENEROUS_LIMITS, SANDBOX_START, requests_served, sandbox_stats
from tests.support.syncs import SyncResult, cli_env, snapshot, sync_once

pytestmark = pytest.mark.faults

FROZEN = {"start": SANDBOX_START, "speed": 0.0, "limits": GENEROUS_LIMITS}
# fast retries so a fault run stays quick; the limits are the sandbox's, not the real service's
QUICK_RETRIES = {"max_attempts": 8, "backoff_factor": 0.05, "max_retry_delay": 3.0}


@pytest.mark.parametrize("profile", ["5xx", "429", "reset", "truncated", "mixed"])
def test_a_sync_through_faults_then_a_clean_rerun_equals_a_fault_free_run(
    profile, make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(faults=profile, fault_rate=0.15, fault_seed=3, **FROZEN)
    try:
        sync_once(server, tmp_path, settings=QUICK_RETRIES)
    except Exception as error:  # a fault may outlast the retries: the rerun must still complete the job
        assert FULL_KEY not in str(error)
    served = sandbox_stats(server)["faults_total"]
    requests.post(f"{server.root_url}/_sandbox/faults", json={"profile": "none"}, timeout=10).raise_for_status()

    rerun = sync_once(server, tmp_path)

    assert served > 0, "the profile injected nothing: the test would prove nothing"
    assert snapshot(rerun) == clean_snapshot


def test_responses_slower_than_the_timeout_are_retried(make_sandbox, tmp_path, clean_snapshot):
    server = make_sandbox(faults="slow", fault_rate=0.05, fault_seed=5, fault_delay=3.0, **FROZEN)

    result = sync_once(server, tmp_path, settings={**QUICK_RETRIES, "read_timeout": 1.0})

    assert result.stats["retries"] > 0
    assert sandbox_stats(server)["faults_total"] > 0
    assert snapshot(result) == clean_snapshot


def test_a_base_url_without_v2_fails_clearly_and_writes_nothing(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN)
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


def test_a_process_killed_mid_sync_loses_nothing_on_rerun(make_sandbox, tmp_path, clean_snapshot):
    # a 1 s window and its real limits slow the sync down enough to kill it halfway
    server = make_sandbox(start=SANDBOX_START, speed=0.0, rate_window=1.0)
    env = cli_env(server.base_url, tmp_path, window=1.0)
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress"]
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
