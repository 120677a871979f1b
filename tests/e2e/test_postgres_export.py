"""`python -m pipelines sync --destination postgres` into a REAL PostgreSQL + PostGIS server: the same
raw tables and rows as the default DuckLake, the map features' geometries typed by PostGIS, and the same
dbt models (built by the sync, their tests green) with the same rows and geodesic lengths."""

from __future__ import annotations

import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import pytest

from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.models import project_models, staging_schema
from pipelines.warehouse.postgis import GEO_VIEW
from pipelines.warehouse.tables import table_row_counts
from tests.support.lakes import lake_in
from tests.support.sandboxes import FULL_KEY, GENEROUS_LIMITS, SANDBOX_START
from tests.support.syncs import cli_env

pytestmark = pytest.mark.slow

ROUTE_FEATURES = ("past_vessel_locations", "estimated_full_legs", "estimated_partial_leg")


def _sync(server, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", *args]
    result = subprocess.run(
        command, env=cli_env(server.base_url, workdir, SOURCES__OCEAN_TRACKING__APP_URL=server.app_url, **env),
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr
    assert FULL_KEY not in result.stdout + result.stderr
    return result


def _postgres_row_counts(database, schema: str = DATASET_NAME, *, views: bool = False) -> dict[str, int]:
    kinds = ["BASE TABLE", "VIEW"] if views else ["BASE TABLE"]
    tables = database.query(
        "select table_name from information_schema.tables where table_schema = %s and table_type = any(%s) "
        "and table_name not like '\\_dlt%%' order by table_name",
        (schema, kinds),
    )
    return {table: database.query(f'select count(*) from {schema}."{table}"')[0][0] for (table,) in tables}


# Three days into the frozen world a container is held at its terminal: every model has rows, the
# holds' child table included (dlt creates it only once some container had a hold).
HELD_START = SANDBOX_START + timedelta(days=3)


@pytest.fixture
def held_sandbox(make_sandbox):
    """A frozen sandbox at a moment when some container has a hold."""
    return make_sandbox(limits=GENEROUS_LIMITS, start=HELD_START, speed=0.0)


def test_postgres_holds_the_same_raw_tables_as_the_lake_with_postgis_geometries(
    held_sandbox, postgres_database, tmp_path
):
    synced = _sync(held_sandbox, tmp_path / "pg", "--destination", "postgres",
                   DESTINATION__POSTGRES__CREDENTIALS=postgres_database.dsn)  # fmt: skip
    assert postgres_database.dsn.split(":")[2].split("@")[0] not in synced.stdout + synced.stderr  # the password
    assert "Rows in postgres" in synced.stdout and "analytics.voyage_legs" in synced.stdout
    assert "No GeoParquet written: the GeoParquet export and the PNG route maps are made from the embedded " \
           f"warehouse only (--destination ducklake or duckdb); the map features are in {DATASET_NAME}.map_features, " \
           f"typed by PostGIS in {DATASET_NAME}.{GEO_VIEW}." in " ".join(synced.stdout.split())
    _sync(held_sandbox, tmp_path / "lake")  # the default destination: lake_in(tmp_path / "lake" / "data")
    lake = lake_in(tmp_path / "lake" / "data")

    in_postgres, in_lake = _postgres_row_counts(postgres_database), table_row_counts(lake, DATASET_NAME)
    # the same tables, those no row reached yet too (`departed_shipments`: no shipment left the account); only
    # a table with a json column that no row reached would be missing (`hints.INSERT_VALUES_EMPTY_DESTINATIONS`)
    assert in_postgres == in_lake and in_lake["departed_shipments"] == 0
    assert in_lake["shipments"] > 0 and in_lake["map_features"] > 0

    # the view types both WKB columns as geometry(Geometry, 4326), and every value carries that SRID
    registered = postgres_database.query(
        "select f_geometry_column, srid, type from geometry_columns "
        "where f_table_schema = %s and f_table_name = %s order by 1",
        (DATASET_NAME, GEO_VIEW),
    )
    assert registered == [("geometry", 4326, "GEOMETRY"), ("geometry_split", 4326, "GEOMETRY")]
    [(rows, srids)] = postgres_database.query(
        f"select count(*), array_agg(distinct st_srid(geometry)) from {DATASET_NAME}.{GEO_VIEW} "
        "where geometry is not null"
    )
    assert rows > 0 and srids == [4326]
    # the raw table's columns say what they hold
    [(comment,)] = postgres_database.query(
        f"select col_description('{DATASET_NAME}.map_features'::regclass, ordinal_position::int) "
        "from information_schema.columns where table_schema = %s and table_name = 'map_features' "
        "and column_name = 'geometry'",
        (DATASET_NAME,),
    )
    assert "EPSG:4326" in comment

    # every route's length, PostGIS against DuckDB spatial on the lake's copy of the same feature
    lengths = (
        f"select container_id, feature_index, st_length(geometry), st_length(geometry_split) "
        f"from {DATASET_NAME}.{GEO_VIEW} where feature_type in {ROUTE_FEATURES} and geometry is not null"
    )
    by_postgis = {(c, i): (a, b) for c, i, a, b in postgres_database.query(lengths)}
    with lake.connect(read_only=True) as con:
        by_duckdb = {(c, i): (a, b) for c, i, a, b in con.execute(lengths).fetchall()}
    assert by_postgis and by_postgis.keys() == by_duckdb.keys()
    for key, (length, split_length) in by_postgis.items():
        assert length == pytest.approx(by_duckdb[key][0], abs=1e-6), key
        assert split_length == pytest.approx(by_duckdb[key][1], abs=1e-6), key

    # the sync built every dbt model there (a failing model or test fails the sync): same rows as the lake,
    # the marts in `analytics` and the staging models in their own schema, as on the lake
    for schema, layer in ((ANALYTICS_SCHEMA, "marts"), (staging_schema(), "staging")):
        in_postgres_models = _postgres_row_counts(postgres_database, schema, views=True)
        assert set(in_postgres_models) == {model.name for model in project_models() if model.layer == layer}
        assert all(rows > 0 for rows in in_postgres_models.values()), in_postgres_models
        assert in_postgres_models == table_row_counts(lake, schema, views=True)
    schemas = {name for (name,) in postgres_database.query("select schema_name from information_schema.schemata")}
    assert f"_{DATASET_NAME}_staging" in schemas and f"{DATASET_NAME}_staging" not in schemas, "dlt's staging, internal"

    # the LFDs' local dates: PostgreSQL's time zone conversion gives DuckDB's dates
    lfds = "select container_id, last_free_day_local, last_free_day_time_zone from analytics.container_status"
    with lake.connect(read_only=True) as con:
        by_duckdb = set(con.execute(lfds).fetchall())
    assert set(postgres_database.query(lfds)) == by_duckdb
    assert any(local is not None for _, local, _ in by_duckdb)

    # geodesic leg lengths: PostGIS (geography) against DuckDB spatial (spheroid), relative 1e-6
    legs = "select container_id, leg_sequence, length_km from analytics.voyage_legs where length_km is not null"
    by_postgis = {(c, i): km for c, i, km in postgres_database.query(legs)}
    with lake.connect(read_only=True) as con:
        by_duckdb = {(c, i): km for c, i, km in con.execute(legs).fetchall()}
    assert by_postgis and by_postgis.keys() == by_duckdb.keys()
    for key, km in by_postgis.items():
        assert km == pytest.approx(by_duckdb[key], rel=1e-6), key

    # deep links: PostgreSQL's url encoding (a dispatch macro) gives DuckDB's links
    links = "select kind, id, url from analytics.deep_links"
    with lake.connect(read_only=True) as con:
        assert set(postgres_database.query(links)) == set(con.execute(links).fetchall())
