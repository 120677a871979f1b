"""Fixtures of the model tests: a warehouse synced once from the REAL sandbox, and the model assets
materialized over it with Dagster (the raw ingest assets are not in the run: the sync loaded them)."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import pytest

from assets.models import model_assets, model_checks
from assets.resources import OceanTrackingApi, Warehouse
from tests.e2e.conftest import sync_once

APP_URL = "http://app.example"


def materialize_models(
    duckdb_path: Path, *, app_url: str = APP_URL, selection: Iterable[str] | None = None, checks: bool = True
) -> dg.ExecuteInProcessResult:
    """Materialize the model assets (all, or `selection` as `analytics/<name>` strings) over a warehouse."""
    return dg.materialize(
        [*model_assets, *(model_checks if checks else [])],
        resources={
            "warehouse": Warehouse(duckdb_path=str(duckdb_path)),
            "ocean_tracking_api": OceanTrackingApi(api_key="unused-key-123", app_url=app_url),
        },
        selection=list(selection) if selection is not None else None,
    )


@dataclass
class BuiltWarehouse:
    """A synced warehouse with every model built, and the Dagster result that built them."""

    duckdb_path: Path
    result: dg.ExecuteInProcessResult

    # plain read-only connections: the tests read numbers and WKB blobs, never GEOMETRY values
    def query(self, sql: str, params: list[Any] | None = None) -> list[tuple]:
        with duckdb.connect(str(self.duckdb_path), read_only=True) as con:
            return con.execute(sql, params or []).fetchall()

    def dicts(self, sql: str) -> list[dict[str, Any]]:
        with duckdb.connect(str(self.duckdb_path), read_only=True) as con:
            cursor = con.execute(sql)
            names = [column[0] for column in cursor.description]
            return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]

    def table_exists(self, schema: str, table: str) -> bool:
        sql = "select count(*) from information_schema.tables where table_schema = ? and table_name = ?"
        return self.query(sql, [schema, table])[0][0] > 0


@pytest.fixture(scope="module")
def built(sandbox, tmp_path_factory) -> BuiltWarehouse:
    """One sync of the session sandbox, then every model asset (and its checks) materialized."""
    workdir = tmp_path_factory.mktemp("models")
    synced = sync_once(sandbox, workdir)
    result = materialize_models(synced.duckdb_path)
    assert result.success
    return BuiltWarehouse(synced.duckdb_path, result)
