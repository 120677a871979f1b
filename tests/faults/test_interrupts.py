"""Ctrl-C and SIGTERM: a sync stopped by either ends with one line saying so (exit code 130 or 143), never a
traceback, dlt's ``Received `signal_code=2` `` or an empty "dbt build failed:"."""

from __future__ import annotations

import signal
import subprocess
import time

import dlt
import pytest
from dbt.cli.main import dbtRunnerResult
from dlt.common.exceptions import SignalReceivedException
from dlt.pipeline.exceptions import PipelineStepFailed

from pipelines.cli import interrupting_signal
from pipelines.errors import ModelBuildError
from pipelines.warehouse import duckdb_store, models
from tests.support.sandboxes import FROZEN_WORLD, requests_served
from tests.support.syncs import cli_env, sync_command

pytestmark = pytest.mark.faults


def _interrupted_line(outputs: tuple[str, str], how: str) -> str:
    """The one line an interrupted run ends with (it must end stderr), without a traceback or an error."""
    stderr = outputs[1]
    lines = stderr.strip().splitlines()
    assert lines and lines[-1].startswith(f"interrupted ({how}): "), stderr
    assert "Traceback" not in stderr and "signal_code" not in stderr and "error:" not in stderr, stderr
    return lines[-1]


@pytest.mark.slow
@pytest.mark.serial(reason="on a loaded machine the sync exited -2 (killed by SIGINT, no handler) in 2 parallel "
                           "runs of about 10; alone it passed every time; the cause is not found")
def test_ctrl_c_during_the_extraction_ends_the_sync_in_one_line(make_sandbox, tmp_path):
    # every answer a second late: the extraction is still running when the signal comes, however loaded the machine
    server = make_sandbox(**FROZEN_WORLD, shipments=50, faults="slow", fault_rate=1.0, fault_delay=1.0)
    command = sync_command("--no-maps", "--no-models", "--duckdb", str(tmp_path / "warehouse.duckdb"))
    # Ctrl-C as a terminal sends it: to a process whose SIGINT is not ignored (an xdist worker's children
    # inherit an ignored SIGINT, and Python then never raises KeyboardInterrupt)
    process = subprocess.Popen(command, env=cli_env(server.base_url, tmp_path), stdout=subprocess.PIPE,
                               stderr=subprocess.PIPE, text=True,
                               preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL))
    deadline = time.monotonic() + 120
    while requests_served(server) < 1:
        assert process.poll() is None and time.monotonic() < deadline, "the sync ended before it was interrupted"
        time.sleep(0.05)
    process.send_signal(signal.SIGINT)
    outputs = process.communicate(timeout=120)

    assert process.returncode == 130, outputs[1]
    line = _interrupted_line(outputs, "Ctrl-C")
    assert "the warehouse keeps what earlier runs loaded" in line and "the next sync" in line


@pytest.mark.slow
def test_sigterm_while_waiting_for_the_sync_lock_ends_the_sync_in_one_line(tmp_path):
    env = cli_env("http://127.0.0.1:9/v2", tmp_path)  # never reached: the run waits before any request
    warehouse = tmp_path / "warehouse.duckdb"  # a plain file: nothing to create before the wait, unlike a lake
    with duckdb_store(warehouse).syncing("ocean_tracking"):  # held here, as another run would hold it
        process = subprocess.Popen(sync_command("--duckdb", str(warehouse)), env=env, stdout=subprocess.PIPE,
                                   stderr=subprocess.PIPE, text=True)
        for line in process.stderr:  # the run says it waits before it waits
            if "Waiting for the sync lock of dataset ocean_tracking" in line:
                break
        process.send_signal(signal.SIGTERM)
        outputs = process.communicate(timeout=60)

    assert process.returncode == 143
    _interrupted_line(outputs, "SIGTERM")


def test_a_signal_dlt_deferred_is_an_interruption_whatever_wraps_it(tmp_path):
    pipeline = dlt.pipeline("interrupted", pipelines_dir=str(tmp_path))
    deferred = PipelineStepFailed(pipeline, "load", "1", SignalReceivedException(signal.SIGINT), None)
    assert interrupting_signal(deferred) == signal.SIGINT
    try:
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt as interrupt:
            raise RuntimeError("cleaning up after it failed") from interrupt
    except RuntimeError as wrapped:
        assert interrupting_signal(wrapped) == signal.SIGINT
    assert interrupting_signal(ModelBuildError("dbt model x failed: boom")) is None


def test_dbt_interrupted_is_an_interruption_and_its_failure_line_is_never_empty(monkeypatch):
    monkeypatch.setattr(models, "invoke_dbt", lambda args, environment: dbtRunnerResult(success=False, exception=KeyboardInterrupt()))
    with pytest.raises(KeyboardInterrupt):
        models.run_dbt(["build"])

    class Silent(Exception):
        pass

    monkeypatch.setattr(models, "invoke_dbt", lambda args, environment: dbtRunnerResult(success=False, exception=Silent()))
    with pytest.raises(ModelBuildError, match=r"^dbt build failed: Silent \(see sql/logs/dbt.log\)$"):
        models.run_dbt(["build"])
