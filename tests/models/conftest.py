"""Fixtures of the model tests: a DuckLake synced once from the REAL sandbox, and the dbt models built
over it by their Dagster assets (dagster-dbt; the raw ingest assets are not in the run: the sync loaded
them), dbt's tests run as their asset checks."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import pytest

from assets.models import model_assets
from assets.resources import OceanTrackingApi
from pipelines.warehouse.store import WarehouseStore
from pipelines.warehouse.tables import table_exists
from tests.assets.conftest import warehouse_resource
from tests.conftest import lake_in, shared_dir
from tests.e2e.conftest import sync_once

APP_URL = "http://app.example"


def reference_terminals_csv() -> Path:
    """The Terminal49 reference list of terminals with their IANA time zones (`Time Zone`), the file the
    dbt macro `reference_terminals` was vendored from."""
    return shared_dir() / "reference" / "terminal49" / "terminals.csv"


def materialize_models(
    data_dir: Path, *, app_url: str = APP_URL, selection: Iterable[str] | None = None
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
    )


def copy_lake(source: WarehouseStore, data_dir: Path) -> None:
    """A new DuckLake under `data_dir` holding everything `source` holds (tables, views, rows), for a test
    that writes: `source` is attached read-only and never written. A copy of the catalog file would keep
    pointing at the source's data folder, so the new lake is built through DuckDB instead."""
    target = lake_in(data_dir)
    with target.writing(), target.connect() as con:
        con.execute(f"attach 'ducklake:sqlite:{source.catalog_file}' as source (read_only)")
        con.execute("copy from database source to lake")


@dataclass
class BuiltWarehouse:
    """A synced DuckLake (under `data_dir`) with every model built, and the Dagster result that built them."""

    data_dir: Path
    result: dg.ExecuteInProcessResult

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


@pytest.fixture(scope="module")
def built(sandbox, tmp_path_factory) -> BuiltWarehouse:
    """One sync of the session sandbox, then every model asset (and its dbt tests) materialized. Tests read
    it and never write it: a test that writes works on its own `copy_lake`."""
    workdir = tmp_path_factory.mktemp("models")
    data_dir = workdir / "data"
    sync_once(sandbox, workdir)
    result = materialize_models(data_dir)
    assert result.success
    return BuiltWarehouse(data_dir, result)
