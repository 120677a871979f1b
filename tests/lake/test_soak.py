"""The soak's short version: bench/soak.py's own `run_soak` for two simulated hours on the suite's world, from a
copy of the shared built lake: a sync SIGKILLed mid-load in the first hour, a sync under a 5xx burst and the
nightly maintenance (expiry by simulated age) in the second, an analyst's session open throughout; then the
lake against a fresh full sync at the same instant, and the soak's verdicts. (No write-back batch: a process
more, and its path is the write-back tests'; the bench runs one a day.)"""

from __future__ import annotations

import importlib
from datetime import timedelta

import pytest

from tests.support import REPO
from tests.support.dagster import APP_URL
from tests.support.lakes import copy_lake
from tests.support.sandboxes import FULL_KEY, SANDBOX_START, advance_clock

pytestmark = pytest.mark.slow


@pytest.fixture
def soak(monkeypatch):
    """bench/soak.py as a module (the bench's scripts import their siblings by name)."""
    monkeypatch.syspath_prepend(str(REPO / "bench"))
    return importlib.import_module("soak")


def test_a_short_soak_meets_its_verdicts(soak, own_sandbox, built, tmp_path):
    copy_lake(built.data_dir, tmp_path / "data")  # the built lake is own_sandbox's world at SANDBOX_START
    advance_clock(own_sandbox, 3600)
    config = soak.SoakConfig(
        own_sandbox.base_url, FULL_KEY, tmp_path, days=1, hours_per_day=2, start=SANDBOX_START + timedelta(hours=1),
        retention_days=0.5 / 24, window=0.05, kill_hour=0, writeback_hour=None, maintenance_hour=1, burst_hours=(1,),
        hung_hour=None, quiet=True, app_url=APP_URL,
    )  # fmt: skip

    result = soak.run_soak(config)

    (killed,) = [run for run in result.runs if run.injected == soak.KILLED]
    assert not killed.ok and killed.detail.startswith("SIGKILL while loading"), killed
    assert [run.what for run in result.runs if run.ok] == ["sync", "maintenance"]
    assert result.days[0].analyst_queries > 0
    assert result.comparison.differences, "the comparison covered no table"
    verdicts = {name: (value, met) for name, value, _limit, met in result.verdicts()}
    different = {table: rows for table, rows in result.comparison.differences.items() if rows}
    assert all(met for _value, met in verdicts.values()), (verdicts, different, result.analyst_errors)
