"""Analysts query while the schedule writes (issue 14's bar): analyst processes hold read-only sessions
on the lake and query every 0.5 s while three CLI syncs run, the world's clock advanced between them.
Every sync succeeds, no analyst query fails, the analyst in autocommit sees each sync's load without
reconnecting, and the one inside a long transaction keeps its snapshot and blocks nobody."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from tests.support.lakes import lake_in
from tests.support.sandboxes import advance_clock
from tests.support.syncs import cli_env

pytestmark = pytest.mark.slow
SYNCS = 3


def _analyst(catalog: str, *extra: str) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.analyst", catalog, "--every", "0.5", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert json.loads(process.stdout.readline()) == {"ready": True}, process.stderr.read()
    return process


def _stop(process: subprocess.Popen) -> list[dict]:
    out, err = process.communicate(input="", timeout=60)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


def test_analysts_query_through_three_syncs_without_an_error(own_sandbox, tmp_path):
    env = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=own_sandbox.app_url)
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-maps"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stderr
    catalog = lake_in(tmp_path / "data").catalog

    autocommit, long_transaction = _analyst(catalog), _analyst(catalog, "--long-transaction")
    try:
        for _ in range(SYNCS):
            advance_clock(own_sandbox, 2 * 86400)
            sync = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
            assert sync.returncode == 0, sync.stderr
    finally:
        seen, held = _stop(autocommit), _stop(long_transaction)

    for lines in (seen, held):
        errors = [line["error"] for line in lines if "error" in line]
        assert errors == [], errors
    loads = sorted({line["load"] for line in seen})
    assert len(loads) == SYNCS + 1, f"the analyst saw loads {loads}: one per sync, the first one included"
    assert seen[-1]["events"] > seen[0]["events"], "new transport events arrived as the clock moved"
    assert len({(line["load"], line["events"]) for line in held}) == 1, "a transaction keeps its snapshot"
    assert len(seen) >= 2 * SYNCS
