"""The default retries ride out the sandbox's `5xx`, `reset` and `truncated` profiles at their default rate:
three syncs in a row through one sandbox (a new fault seed each), every one succeeds and leaves the
warehouse equal to a fault-free run's. Each is a full sync into a fresh warehouse (about 200 requests in
the test world): an incremental one sends a handful of requests and would mostly meet no fault at all.

Attempts and the request deadline are the defaults; only the backoff is shortened (0.05 s instead of 1 s),
to keep the test quick. That changes nothing the sandbox decides: its faults are counted in requests (a
burst of 1-3 consecutive 5xx, then a fresh draw at the fault rate), not in seconds, so the same attempts
meet the same faults however long the client sleeps between them. Why the defaults suffice is worked out
in `pipelines.api.config.Settings`."""

from __future__ import annotations

import pytest
import requests

from sandbox.config import Settings as SandboxSettings
from tests.support.sandboxes import FROZEN_WORLD, sandbox_stats
from tests.support.syncs import snapshot, sync_once

pytestmark = pytest.mark.faults

QUICK_BACKOFF = {"backoff_factor": 0.05}
FAULT_SEEDS = (101, 202, 303)


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
