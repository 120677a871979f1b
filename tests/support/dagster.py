"""Dagster in the tests: the definitions' resources pointed at a sandbox and a lake, and the model and map
assets materialized in process over a lake."""

from __future__ import annotations

import json
from collections.abc import Iterable
from pathlib import Path
from typing import Any

import dagster as dg

from assets.maps import map_assets
from assets.models import model_assets
from assets.resources import OceanTrackingApi, Warehouse
from pipelines.warehouse import WarehouseStore, table_exists
from tests.support.lakes import lake_in
from tests.support.sandboxes import FULL_KEY, shared_dir

# The test sandboxes' limits are generous, so the client's window can be tiny.
TEST_RATE_WINDOW = 0.05
APP_URL = "http://app.example"
MAP_OPS = ("maps__map_features_geoparquet", "maps__route_maps", "maps__routes_overview")


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


def reference_terminals_csv() -> Path:
    """The Terminal49 reference list of terminals with their IANA time zones (`Time Zone`), the file the
    dbt macro `reference_terminals` was vendored from."""
    return shared_dir() / "reference" / "terminal49" / "terminals.csv"


def materialize_models(
    data_dir: Path, *, app_url: str = APP_URL, selection: Iterable[str] | None = None, raise_on_error: bool = True
) -> dg.ExecuteInProcessResult:
    """Materialize the model assets (all, or `selection` as `analytics/<name>` strings) and their dbt tests
    over the DuckLake under `data_dir`."""
    return dg.materialize(
        model_assets,
        resources={
            "warehouse": warehouse_resource(data_dir),
            "ocean_tracking_api": OceanTrackingApi(api_key="unused-key-123", app_url=app_url),
        },
        selection=list(selection) if selection is not None else None,
        raise_on_error=raise_on_error,
    )


def materialize_maps(warehouse: Warehouse, data_dir: Path) -> dg.ExecuteInProcessResult:
    """Run the three map assets on `warehouse`, writing under `data_dir`."""
    return dg.materialize(
        map_assets,
        resources={"warehouse": warehouse},
        run_config={"ops": {op: {"config": {"data_dir": str(data_dir)}} for op in MAP_OPS}},
    )


def map_metadata(result: dg.ExecuteInProcessResult, name: str) -> dict:
    """The metadata values the map asset `maps/<name>` reported in `result` (it materialized once)."""
    key = dg.AssetKey(["maps", name])
    events = [e for e in result.get_asset_materialization_events() if e.materialization.asset_key == key]
    assert len(events) == 1
    return {k: v.value for k, v in events[0].materialization.metadata.items()}


def query_rows(warehouse: Warehouse, sql: str, parameters: list | None = None) -> list[tuple]:
    """The rows of a query on a read-only session of the warehouse resource `warehouse`."""
    with warehouse.connect(read_only=True) as con:
        return con.execute(sql, parameters or []).fetchall()


def _plain(value: Any) -> Any:
    """A metadata value as JSON holds it: numbers, text, booleans and None as they are, anything else as text."""
    return value if value is None or isinstance(value, int | float | str | bool) else str(value)


class LakeReader:
    """Reads a lake (the default lake of the data folder `data_dir`) read-only, as the model tests do."""

    def __init__(self, data_dir: Path) -> None:
        self.data_dir = data_dir

    @property
    def store(self) -> WarehouseStore:
        """The lake."""
        return lake_in(self.data_dir)

    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        """Rows of `sql`, read-only."""
        with self.store.connect(read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def dicts(self, sql: str) -> list[dict[str, Any]]:
        """Rows of `sql` as dicts by column name, read-only."""
        with self.store.connect(read_only=True) as con:
            cursor = con.execute(sql)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def table_exists(self, schema: str, table: str) -> bool:
        """True when the lake has the table."""
        with self.store.connect(read_only=True) as con:
            return table_exists(con, schema, table)


class BuiltWarehouse(LakeReader):
    """A lake with every model built by the model assets (`folder/data`), and what that Dagster run reported,
    kept beside it as JSON (`record`) so that any worker of the run reads the same: each model's
    materialization metadata and each dbt test's check evaluation."""

    OUTCOME = "dagster_outcome.json"

    def __init__(self, folder: Path) -> None:
        super().__init__(folder / "data")
        self.folder = folder
        outcome = json.loads((folder / self.OUTCOME).read_text())
        self.materializations: dict[str, dict[str, Any]] = outcome["materializations"]
        self.check_evaluations: list[dict[str, Any]] = outcome["check_evaluations"]

    @classmethod
    def record(cls, folder: Path, result: dg.ExecuteInProcessResult) -> None:
        """Keep what `result` reported beside the lake: per asset key, its materialization's metadata values;
        per check, its asset, name, whether it passed and its metadata (as text)."""
        materializations = {
            event.asset_key.to_user_string(): {key: _plain(value.value) for key, value in event.materialization.metadata.items()}
            for event in result.get_asset_materialization_events()
        }
        checks = [{"asset": e.asset_key.to_user_string(), "check": e.check_name, "passed": e.passed,
                   "metadata": {key: str(value.value) for key, value in e.metadata.items()}}
                  for e in result.get_asset_check_evaluations()]  # fmt: skip
        (folder / cls.OUTCOME).write_text(json.dumps({"materializations": materializations, "check_evaluations": checks}))
