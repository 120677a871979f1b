"""`lake migrate`: a plain DuckDB warehouse into the lake with one command.

The whole flow runs as a user runs it, against the sandbox over HTTP: a CLI sync into a DuckDB file, the
world moves on, the file is migrated, and the next CLI sync goes into the lake. It must spend no more
requests than the same sync into the DuckDB file (dlt restored its state from the migrated tables: the ids
fetched once and the map schedule), end with the same rows, and keep the ETA history's earlier versions.
A small hand-made file covers what dlt never creates: types the lake cannot hold, views, the journal."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import duckdb
import pytest

from pipelines.errors import ConfigurationError
from pipelines.journals.writes import WritebackStore
from pipelines.settings import WRITEBACK_JOURNAL_FILE_NAME
from pipelines.warehouse import WarehouseStore, duckdb_store
from pipelines.warehouse.destinations import lake_type, migrate_duckdb
from tests.support.lakes import lake_in
from tests.support.sandboxes import advance_clock, requests_served
from tests.support.syncs import ENTITY_TABLES, SYNC_TIMEOUT_SECONDS, cli_env

HISTORY = "ocean_tracking.shipment_eta_history"


def _pipelines(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    run = subprocess.run([sys.executable, "-m", "pipelines", *args], env=env, capture_output=True, text=True,
                         timeout=SYNC_TIMEOUT_SECONDS)  # fmt: skip
    assert run.returncode == 0, run.stdout + run.stderr
    return run


def _rows(
    store: WarehouseStore, table: str, *, exclude: tuple[str, ...] = ("_dlt_load_id", "_dlt_id")
) -> list[str]:
    """The rows of a table over its columns in name order, dlt's per-load columns left out, each as text,
    sorted (a multiset, whatever the storage order)."""
    with store.connect(read_only=True) as con:
        columns = sorted(
            row[0] for row in con.execute(f"describe {table}").fetchall() if row[0] not in exclude
        )
        names = ", ".join(f'"{column}"' for column in columns)
        return sorted(repr(dict(zip(columns, row, strict=True)))
                      for row in con.execute(f"select {names} from {table}").fetchall())  # fmt: skip


def _history(store: WarehouseStore) -> list[tuple]:
    with store.connect(read_only=True) as con:
        return con.execute(f"select _dlt_id, _dlt_valid_from, _dlt_valid_to from {HISTORY}").fetchall()


@pytest.mark.slow
def test_a_migrated_warehouse_syncs_on_in_the_lake_as_it_would_have_in_the_file(own_sandbox, tmp_path):
    env = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=own_sandbox.app_url)
    file = tmp_path / "data" / "warehouse.duckdb"
    duckdb_sync = ["sync", "--no-progress", "--destination", "duckdb", "--duckdb", str(file)]
    served = requests_served(own_sandbox)
    _pipelines(*duckdb_sync, env=env)
    first_sync = requests_served(own_sandbox) - served
    earlier_versions = _history(duckdb_store(file))
    advance_clock(own_sandbox, 5 * 86400)

    migrated = _pipelines("lake", "migrate", "--from", str(file), env=env)
    assert "ocean_tracking._dlt_pipeline_state" in migrated.stdout
    assert "not recreated" not in migrated.stderr, migrated.stderr
    with lake_in(tmp_path / "data").connect(read_only=True) as con:  # the models' views work before any sync
        assert con.execute("select count(*) from analytics.container_free_time").fetchone()[0] > 0

    served = requests_served(own_sandbox)
    _pipelines("sync", "--no-progress", env=env)  # the lake, the default
    lake_sync = requests_served(own_sandbox) - served
    served = requests_served(own_sandbox)
    _pipelines(*duckdb_sync, env=env)  # the same sync, uninterrupted in the DuckDB file
    file_sync = requests_served(own_sandbox) - served

    assert lake_sync <= file_sync < first_sync, (lake_sync, file_sync, first_sync)
    lake, warehouse = lake_in(tmp_path / "data"), duckdb_store(file)
    for table in (*ENTITY_TABLES, "map_features", "analytics.container_status"):
        name = table if "." in table else f"ocean_tracking.{table}"
        rows = _rows(lake, name)
        assert rows and rows == _rows(warehouse, name), name

    history = _history(lake)
    kept = {(row_id, valid_from) for row_id, valid_from, _ in history}
    assert {(row_id, valid_from) for row_id, valid_from, _ in earlier_versions} <= kept, (
        "earlier versions kept"
    )
    retired = [row for row in history if row[2] is not None]
    assert retired, "the clock moved ETAs: some versions were closed"
    assert len(history) == len(_history(warehouse))
    in_file = _rows(warehouse, HISTORY, exclude=("_dlt_load_id", "_dlt_valid_from", "_dlt_valid_to"))
    assert _rows(lake, HISTORY, exclude=("_dlt_load_id", "_dlt_valid_from", "_dlt_valid_to")) == in_file


@pytest.fixture
def odd_warehouse(tmp_path) -> Path:
    """A DuckDB file with a dlt dataset and its staging schema, analytics tables of types the lake cannot
    hold (1000 rows, so they reach Parquet rather than the catalog), views, and a write-back journal."""
    file = tmp_path / "old" / "warehouse.duckdb"
    file.parent.mkdir()
    with duckdb.connect(str(file)) as con:
        con.execute("""
            create schema ocean_tracking;
            create table ocean_tracking._dlt_version (version bigint not null);
            insert into ocean_tracking._dlt_version values (1);
            create table ocean_tracking.things (id varchar not null, n bigint);
            insert into ocean_tracking.things select 't' || range, range from range(1000);
            create schema ocean_tracking_staging;
            create table ocean_tracking_staging.things (id varchar, n bigint);
            create schema _ocean_tracking_staging;
            create table _ocean_tracking_staging.things (id varchar, n bigint);
            create schema analytics;
            create type mood as enum ('up', 'down');
            create table analytics.odd as select
                n, (n - 500) * interval 1 hour as delta, (case when n % 2 = 0 then 'up' else 'down' end)::mood as mood,
                [n::varchar, 'b', 'c']::varchar[3] as triple, n::int::union(a int, b varchar) as u
            from ocean_tracking.things;
            create view analytics.thing_count as select count(*) as n from ocean_tracking.things;
            create view analytics.late as select * from odd where n > 500;  -- `odd`: its own schema
            create view analytics.later as select * from odd where delta > interval 0 hours;
            -- as dbt-duckdb writes a model's view: every name qualified by the file's own catalog
            create view warehouse.analytics.up_count as
                select count(*) as n, 'warehouse.analytics.odd' as source from "warehouse".analytics.odd
                where mood = 'up';
        """)  # fmt: skip
    journal = WritebackStore(file.parent / WRITEBACK_JOURNAL_FILE_NAME)
    journal.audit("create_tracking_request", "MEDU1", "created", http_status=201)
    journal.close()
    return file


@pytest.mark.slow
def test_types_the_lake_cannot_hold_views_and_the_journal_come_along(odd_warehouse, tmp_path):
    store = lake_in(tmp_path / "data")
    journal = tmp_path / "data" / WRITEBACK_JOURNAL_FILE_NAME

    report = migrate_duckdb(odd_warehouse, store, journal=journal)

    assert report.tables == {
        "analytics.odd": 1000,
        "ocean_tracking._dlt_version": 1,
        "ocean_tracking.things": 1000,
    }
    assert sorted(report.views) == ["analytics.late", "analytics.thing_count", "analytics.up_count"], (
        report.warnings
    )
    assert report.warnings[0].startswith("view analytics.later not recreated: Binder Error: Cannot compare")
    assert report.warnings[1].endswith(f"was copied to {journal}")
    assert len(report.retyped) == 4, report.retyped
    with store.connect(read_only=True) as con:
        types = dict(con.execute("select column_name, data_type from duckdb_columns() where table_name = 'odd' "
                                 "and database_name = current_database()").fetchall())  # fmt: skip
        assert types == {
            "n": "BIGINT",
            "delta": "VARCHAR",
            "mood": "VARCHAR",
            "triple": "VARCHAR[]",
            "u": "VARCHAR",
        }
        delta, mood, triple = con.execute(
            "select delta::interval, mood, triple from analytics.odd where n = 1"
        ).fetchone()
        assert (delta, mood, triple) == (timedelta(hours=-499), "down", ["1", "b", "c"])
        assert con.execute("select n from analytics.thing_count").fetchone() == (1000,)
        assert con.execute("select count(*) from analytics.late").fetchone() == (499,)
        assert con.execute("select * from analytics.up_count").fetchone() == (500, "warehouse.analytics.odd")
        schemas = {row[0] for row in con.execute("select schema_name from duckdb_schemas() "
                                                 "where database_name = current_database()").fetchall()}  # fmt: skip
        assert not {"ocean_tracking_staging", "_ocean_tracking_staging"} & schemas, (
            "dlt's staging stays behind"
        )
    copied = WritebackStore(journal)
    try:
        assert copied.rows("select count(*) from audit_log") == [(1,)]
    finally:
        copied.close()

    with pytest.raises(
        ConfigurationError, match=r"already has analytics \(1 table\), ocean_tracking \(2 tables\)"
    ):
        migrate_duckdb(odd_warehouse, store, journal=journal)


@pytest.mark.parametrize(
    ("duckdb_type", "kept"),
    [
        ("TIMESTAMP WITH TIME ZONE", "TIMESTAMP WITH TIME ZONE"),
        ("STRUCT(a INTERVAL, b VARCHAR)[]", "STRUCT(a VARCHAR, b VARCHAR)[]"),
        ("ENUM('it''s', 'b')", "VARCHAR"),
        ("INTEGER[2][]", "INTEGER[][]"),
        ("MAP(VARCHAR, BIT)", "MAP(VARCHAR, VARCHAR)"),
        ("DECIMAL(38,0)", "DECIMAL(38,0)"),
    ],
)
def test_lake_type(duckdb_type, kept):
    assert lake_type(duckdb_type) == kept
