"""Fixtures for the Dagster tests: resources pointed at a real sandbox over loopback, a temporary
Dagster instance (its own DAGSTER_HOME), and a sandbox of our own with a frozen clock."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import dagster as dg
import pytest

from assets.resources import OceanTrackingApi, Warehouse
from tests.conftest import FULL_KEY, lake_in
from tests.e2e.conftest import FROZEN_START, GENEROUS_LIMITS

# The session sandbox's limits are generous, so the client's window can be tiny.
TEST_RATE_WINDOW = 0.05


def sandbox_resources(server, workdir: Path, *, key: str = FULL_KEY) -> dict[str, dg.ConfigurableResource]:
    """The definitions' resources, pointed at `server` and at a DuckLake under `workdir/data`."""
    return {
        "ocean_tracking_api": OceanTrackingApi(
            api_key=key, base_url=server.base_url, app_url=server.app_url, rate_window_seconds=TEST_RATE_WINDOW
        ),
        "warehouse": warehouse_resource(workdir / "data"),
    }


def warehouse_resource(data_dir: Path) -> Warehouse:
    """The warehouse resource on the DuckLake a process with `OCEAN_TRACKING_DATA_DIR=data_dir` uses."""
    store = lake_in(data_dir)
    return Warehouse(destination="ducklake", catalog=store.catalog, data_path=store.data_path)


@pytest.fixture
def dagster_instance() -> Iterator[dg.DagsterInstance]:
    """A throwaway Dagster instance in a temporary DAGSTER_HOME (runs, events, dlt working dirs)."""
    with dg.instance_for_test() as instance:
        yield instance


@pytest.fixture
def frozen_sandbox(make_sandbox):
    """A sandbox of our own (state we may mutate) whose clock moves only when the test says so."""
    return make_sandbox(limits=GENEROUS_LIMITS, start=FROZEN_START, speed=0.0)
