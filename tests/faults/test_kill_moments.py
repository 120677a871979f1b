"""A sync SIGKILLed at a chosen moment (tests/support/kill_driver.py), then rerun with the plain CLI: the
rerun finishes whatever load the killed run left pending and the warehouse (the default DuckLake) equals a
clean run's."""

from __future__ import annotations

import signal
import subprocess
import sys

import pytest

from tests.support.kill_driver import EXTRACT_KILL_AT_REQUEST, MARKER_ENV, MOMENTS
from tests.support.lakes import lake_in
from tests.support.sandboxes import FROZEN_WORLD, sandbox_stats
from tests.support.syncs import (
    FINISHED_PENDING,
    STAGES,
    SYNC_TIMEOUT_SECONDS,
    SyncResult,
    cli_env,
    packages_left,
    snapshot,
)

pytestmark = pytest.mark.faults

# what each moment leaves, in packages per stage: the rerun must finish every extracted or normalized one
LEFT_BEHIND = {
    "extract": (0, 0, 0, 0),
    "extracted": (1, 0, 0, 0),
    "normalize": (1, 1, 0, 0),
    "normalize_commit": (1, 0, 1, 0),
    "load": (0, 0, 1, 0),
    "after_load": (0, 0, 0, 1),
}


def test_every_moment_the_driver_can_kill_at_is_one_this_loop_covers():
    # a moment added to the driver without its expected leftovers here would never be tried
    assert set(MOMENTS) == set(LEFT_BEHIND)
    assert all(len(left) == len(STAGES) for left in LEFT_BEHIND.values())


@pytest.mark.slow
@pytest.mark.parametrize("moment", MOMENTS)
def test_a_sync_killed_at_a_moment_then_rerun_equals_a_clean_run(
    moment, make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(**FROZEN_WORLD)
    marker = tmp_path / "killed-at"
    env = cli_env(
        server.base_url,
        tmp_path,
        OCEAN_TRACKING_PIPELINES_DIR=str(tmp_path / "dlt"),
        OCEAN_TRACKING_DATA_DIR=str(tmp_path / "data"),
        **{MARKER_ENV: str(marker)},
    )
    # the models are built after the load: only a kill after it leaves them to the rerun (the others skip them)
    sync = ["sync", "--no-progress", *([] if moment == "after_load" else ["--no-models"])]

    killed = subprocess.run(
        [sys.executable, "-m", "tests.support.kill_driver", moment, *sync],
        env=env, capture_output=True, text=True, timeout=SYNC_TIMEOUT_SECONDS,
    )  # fmt: skip
    assert killed.returncode == -signal.SIGKILL, killed.stdout + killed.stderr
    assert marker.read_text().startswith(f"{moment}: "), "killed, but not by the hook of this moment"
    left = packages_left(tmp_path)
    assert left == LEFT_BEHIND[moment], (
        f"killed at {marker.read_text()!r}, left {dict(zip(STAGES, left, strict=True))}"
    )
    if moment == "extract":
        assert sum(sandbox_stats(server)["requests_by_route"].values()) == EXTRACT_KILL_AT_REQUEST - 1

    rerun = subprocess.run(
        [sys.executable, "-m", "pipelines", *sync], env=env, capture_output=True, text=True,
        timeout=SYNC_TIMEOUT_SECONDS,
    )

    assert rerun.returncode == 0, rerun.stdout + rerun.stderr
    assert "Waiting for" not in rerun.stderr, "a killed run leaves no lock held"
    pending = left[STAGES.index("normalize/extracted")] + left[STAGES.index("load/normalized")]
    assert (FINISHED_PENDING in rerun.stdout) == (pending > 0), rerun.stdout
    assert packages_left(tmp_path)[:3] == (0, 0, 0), "the rerun left a package unloaded"
    result = SyncResult({}, lake_in(tmp_path / "data"))
    assert snapshot(result) == clean_snapshot
    assert result.scalar("select count(*) from map_features_geo") == len(clean_snapshot["map_features"])
    if moment == "after_load":
        assert result.scalar("select count(*) from analytics.container_status") == len(clean_snapshot["containers"])
