"""Exactly once across crashes: `create-tracking-requests` SIGKILLed at seeded random moments, 20 times over
one 50-row batch, then run to completion: every row is on the service once (or rejected with its 422),
none twice, none lost."""

from __future__ import annotations

import csv
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from tests.support.sandboxes import GENEROUS_LIMITS, SANDBOX_START, routes, tracking_count
from tests.support.syncs import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.serial(reason="kills land at moments measured in wall time; a loaded machine would move them")]

ROWS = 50
KILLS = 20
SEED = 12
UNKNOWN_PARTY = "00000000-0000-4000-8000-000000000000"
CREATE = "POST /v2/tracking_requests"


def _batch(path: Path) -> list[str]:
    numbers = [f"WBKILL{i:04d}" for i in range(ROWS)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["request_number", "request_type", "scac", "customer_id"])
        for i, number in enumerate(numbers):
            # every tenth row names a party the service does not know: a 422 the service decides
            writer.writerow([number, "bill_of_lading", "MAEU", UNKNOWN_PARTY if i % 10 == 9 else ""])
    return numbers


def test_killed_twenty_times_then_completed_creates_each_row_once(make_sandbox, tmp_path):
    # 40 ms of latency on every request, so a kill lands anywhere in the batch, not only at start-up
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0)
    requests.post(f"{server.root_url}/_sandbox/faults",
                  json={"profile": "slow", "rate": 1.0, "seed": 0, "delay": 0.04}, timeout=10).raise_for_status()
    numbers = _batch(tmp_path / "batch.csv")
    env = cli_env(server.base_url, tmp_path, OCEAN_TRACKING_WRITEBACK_JOURNAL=str(tmp_path / "journal.sqlite"))
    command = [sys.executable, "-m", "pipelines", "create-tracking-requests", str(tmp_path / "batch.csv")]
    moments = random.Random(SEED)
    killed_mid_batch = 0
    for _ in range(KILLS):
        before = routes(server).get(CREATE, 0)
        served = sum(routes(server).values())
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill moments count from the first request the service sees, not from the start: a loaded
        # machine's slower start-up would otherwise eat the window, and the kills land before any batch works
        deadline = time.monotonic() + 30
        while sum(routes(server).values()) == served and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(moments.uniform(0.0, 2.5))
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        killed_mid_batch += routes(server).get(CREATE, 0) > before

    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert final.returncode == 1, final.stdout + final.stderr  # 1: the rejected rows are reported
    created = {number: tracking_count(server, number) for number in numbers}
    rejected = {numbers[i] for i in range(ROWS) if i % 10 == 9}
    assert {n for n, count in created.items() if count > 1} == set()  # 0 duplicates
    assert {n for n, count in created.items() if count == 0} == rejected  # 0 lost; the 422s never created
    assert "unknown" not in final.stdout
    posts = routes(server).get(CREATE, 0)
    print(f"\nkill loop: {KILLS} kills ({killed_mid_batch} after some POST reached the service), "
          f"{sum(created.values())} tracking requests for {ROWS - len(rejected)} creatable rows, "
          f"{posts} POSTs received (422 rows are re-sent by each run that reaches them)")
    assert killed_mid_batch >= 5  # the loop really interrupted batches, not only start-ups
