"""The maps tests' warehouse: the shared `synced` lake as the maps' warehouse resource, and the three map assets
materialized from it once a session."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.resources import Warehouse
from tests.support.dagster import materialize_maps, warehouse_resource
from tests.support.syncs import SyncResult


@pytest.fixture(scope="session")
def map_warehouse(synced: SyncResult) -> Warehouse:
    """The shared `synced` lake (one sync of the suite's world) as the maps' warehouse resource: read only."""
    return warehouse_resource(synced.workdir / "data")


@pytest.fixture(scope="session")
def materialized(map_warehouse: Warehouse, tmp_path_factory) -> tuple[dg.ExecuteInProcessResult, Path]:
    """The three map assets run once on `map_warehouse`: the run's result and the folder they wrote."""
    data_dir = tmp_path_factory.mktemp("maps_out")
    result = materialize_maps(map_warehouse, data_dir)
    assert result.success
    return result, data_dir
