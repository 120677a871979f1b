"""The maps tests' warehouse: one sync of the REAL sandbox into a DuckLake, and the three map assets
materialized from it once, shared by every module here; helpers to run the assets and read their reports."""

from __future__ import annotations

from pathlib import Path

import dagster as dg
import pytest

from assets.maps import map_assets
from assets.resources import Warehouse
from tests.assets.conftest import warehouse_resource
from tests.e2e.conftest import sync_once

OPS = ("maps__map_features_geoparquet", "maps__route_maps", "maps__routes_overview")


def materialize_maps(warehouse: Warehouse, data_dir: Path) -> dg.ExecuteInProcessResult:
    """Run the three map assets on `warehouse`, writing under `data_dir`."""
    return dg.materialize(
        map_assets,
        resources={"warehouse": warehouse},
        run_config={"ops": {op: {"config": {"data_dir": str(data_dir)}} for op in OPS}},
    )


def asset_metadata(result: dg.ExecuteInProcessResult, name: str) -> dict:
    """The metadata values the map asset `name` reported in `result` (it materialized once)."""
    key = dg.AssetKey(["maps", name])
    events = [e for e in result.get_asset_materialization_events() if e.materialization.asset_key == key]
    assert len(events) == 1
    return {k: v.value for k, v in events[0].materialization.metadata.items()}


def query_rows(warehouse: Warehouse, sql: str, parameters: list | None = None) -> list[tuple]:
    """The rows of a query on a read-only session of `warehouse`."""
    with warehouse.connect(read_only=True) as con:
        return con.execute(sql, parameters or []).fetchall()


@pytest.fixture(scope="session")
def synced(sandbox, tmp_path_factory) -> Warehouse:
    """One sync of the real sandbox into a fresh DuckLake, as the maps' warehouse resource (read only)."""
    workdir = tmp_path_factory.mktemp("maps_sync")
    sync_once(sandbox, workdir)
    return warehouse_resource(workdir / "data")


@pytest.fixture(scope="session")
def materialized(synced, tmp_path_factory) -> tuple[dg.ExecuteInProcessResult, Path]:
    """The three map assets run once on `synced`: the run's result and the folder they wrote."""
    data_dir = tmp_path_factory.mktemp("maps_out")
    result = materialize_maps(synced, data_dir)
    assert result.success
    return result, data_dir
