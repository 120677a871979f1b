"""dlt's loader connections to the embedded warehouses get `loader_config`: one thread, no insertion order, and
a memory limit, the DuckDB file's own by default (it caches what a load writes up to that limit), the configured
one on both; the file's table jobs run one at a time, as the lake's do."""

from __future__ import annotations

import duckdb
import pytest

from pipelines.settings import DUCKDB_FILE_LOADER_MEMORY_LIMIT, LOADER_MEMORY_LIMIT_ENV
from pipelines.warehouse.destinations import duckdb_target, ducklake_target, make_pipeline
from tests.support.lakes import lake_in

SETTINGS_SQL = (
    "select current_setting('memory_limit'), current_setting('threads'), "
    "current_setting('preserve_insertion_order')"
)


def _loader_settings(target, pipelines_dir) -> tuple:
    with make_pipeline(target, pipelines_dir).sql_client() as client:
        return tuple(client.execute_sql(SETTINGS_SQL)[0])


def _as_duckdb_says(memory_limit: str) -> str:
    """How DuckDB reports `memory_limit` once set to this value (it rounds and renames the unit)."""
    with duckdb.connect(config={"memory_limit": memory_limit}) as con:
        return con.execute("select current_setting('memory_limit')").fetchone()[0]


def test_the_duckdb_files_loader_is_bounded_single_threaded_and_loads_one_table_at_a_time(
    tmp_path, monkeypatch
):
    monkeypatch.delenv(LOADER_MEMORY_LIMIT_ENV, raising=False)
    target = duckdb_target(tmp_path / "warehouse.duckdb")
    assert _loader_settings(target, tmp_path / "dlt") == (
        _as_duckdb_says(DUCKDB_FILE_LOADER_MEMORY_LIMIT),
        1,
        False,
    )
    assert target.destination.capabilities().loader_parallelism_strategy == "sequential"


@pytest.mark.parametrize("destination", ["duckdb", "ducklake"])
def test_the_configured_loader_memory_limit_reaches_either_warehouses_loader(
    destination, tmp_path, monkeypatch
):
    monkeypatch.setenv(LOADER_MEMORY_LIMIT_ENV, "1GB")
    target = (
        duckdb_target(tmp_path / "warehouse.duckdb")
        if destination == "duckdb"
        else ducklake_target(lake_in(tmp_path))
    )
    assert _loader_settings(target, tmp_path / "dlt") == (_as_duckdb_says("1GB"), 1, False)
