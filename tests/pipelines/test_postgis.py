"""After a load into a REAL PostgreSQL: the PostGIS view of the map features (or, without PostGIS, WKB
columns that say what they hold), and an unreachable server reported in one line."""

from __future__ import annotations

import logging
import subprocess
import sys
from datetime import timedelta
from pathlib import Path

import dlt
import pyarrow as pa
import pytest
import shapely

from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse import GEO_VIEW, table_row_counts
from pipelines.warehouse.destinations import publish_geometry_view
from pipelines.warehouse.models import BUILD_RECORD_TABLE, project_models, seed_names, staging_schema
from tests.support.lakes import lake_in
from tests.support.postgres import free_port
from tests.support.sandboxes import FULL_KEY, GENEROUS_LIMITS, SANDBOX_START
from tests.support.syncs import SYNC_TIMEOUT_SECONDS, cli_env

LINE = shapely.LineString([(170.0, 10.0), (179.5, 12.0), (-175.0, 14.0)])


def _load_features(database, tmp_path) -> dlt.Pipeline:
    """A dlt pipeline into `database` that has loaded two map features (a route and a port) as WKB."""
    features = pa.table({
        "container_id": ["c1", "c1"],
        "feature_index": pa.array([0, 1], pa.int32()),
        "feature_type": ["estimated_full_legs", "port"],
        "geometry": pa.array(shapely.to_wkb([LINE, shapely.Point(4.4, 51.9)]).tolist(), pa.binary()),
        "geometry_split": pa.array([shapely.to_wkb(LINE), None], pa.binary()),
    })  # fmt: skip
    pipeline = dlt.pipeline(
        "postgis_test", destination=dlt.destinations.postgres(database.dsn), dataset_name="ocean_tracking",
        pipelines_dir=str(tmp_path / "dlt"),
    )  # fmt: skip
    pipeline.run(features, table_name="map_features", loader_file_format="parquet").raise_on_failed_jobs()
    return pipeline


def test_the_view_types_the_wkb_columns_as_postgis_geometry_in_4326(postgres_database, tmp_path):
    pipeline = _load_features(postgres_database, tmp_path)

    assert publish_geometry_view(pipeline, "ocean_tracking") is True
    assert publish_geometry_view(pipeline, "ocean_tracking") is True  # replaced on every load

    rows = postgres_database.query(
        f"select feature_index, st_srid(geometry), st_geometrytype(geometry), st_astext(geometry), "
        f"geometry_split is null from ocean_tracking.{GEO_VIEW} order by feature_index"
    )
    assert [row[:3] + row[4:] for row in rows] == [(0, 4326, "ST_LineString", False), (1, 4326, "ST_Point", True)]
    assert shapely.from_wkt(rows[0][3]).equals_exact(LINE, 0) and rows[1][3] == "POINT(4.4 51.9)"
    columns = (
        "select column_name from information_schema.columns where table_schema = 'ocean_tracking' "
        "and table_name = %s order by ordinal_position"
    )
    assert postgres_database.query(columns, (GEO_VIEW,)) == postgres_database.query(columns, ("map_features",))


def test_without_postgis_the_geometries_stay_wkb_and_say_so(postgres_database, tmp_path, caplog):
    postgres_database.query("drop extension postgis")
    pipeline = _load_features(postgres_database, tmp_path)

    with caplog.at_level(logging.WARNING, logger="pipelines.warehouse.destinations"):
        assert publish_geometry_view(pipeline, "ocean_tracking") is False

    [record] = caplog.records
    assert "WKB in EPSG:4326" in record.getMessage() and "\n" not in record.getMessage()
    assert postgres_database.query(
        "select count(*) from information_schema.views where table_name = %s", (GEO_VIEW,)
    ) == [(0,)]
    [(comment,)] = postgres_database.query(
        "select col_description('ocean_tracking.map_features'::regclass, 4)"  # the 4th column: geometry
    )
    assert "EPSG:4326" in comment and "WKB" in comment


@pytest.mark.slow
def test_an_unreachable_postgres_is_one_line_naming_host_and_port(sandbox, tmp_path):
    port, password = free_port(), "not-shown-anywhere"
    env = cli_env(sandbox.base_url, tmp_path,
                  DESTINATION__POSTGRES__CREDENTIALS=f"postgresql://loader:{password}@127.0.0.1:{port}/warehouse")  # fmt: skip
    result = subprocess.run(
        [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--destination", "postgres"],
        env=env, capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert result.returncode == 2
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1, result.stderr
    assert f"127.0.0.1:{port}" in lines[0] and "DESTINATION__POSTGRES__CREDENTIALS" in lines[0]
    assert password not in result.stdout + result.stderr


# ---- a sync into PostgreSQL + PostGIS --------------------------------------------------------------------
# `python -m pipelines sync --destination postgres` into a REAL PostgreSQL + PostGIS server: the same raw
# tables and rows as the default DuckLake, the map features' geometries typed by PostGIS, and the same dbt
# models (built by the sync, their tests green) with the same rows and geodesic lengths.


ROUTE_FEATURES = ("past_vessel_locations", "estimated_full_legs", "estimated_partial_leg")


def _sync(server, workdir: Path, *args: str, **env: str) -> subprocess.CompletedProcess:
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", *args]
    result = subprocess.run(
        command, env=cli_env(server.base_url, workdir, SOURCES__OCEAN_TRACKING__APP_URL=server.app_url, **env),
        capture_output=True, text=True, timeout=SYNC_TIMEOUT_SECONDS,
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


WEBHOOK_MODELS = {"webhook_freshness", "stg_notifications_applied"}


@pytest.mark.slow
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
    # a table with a json column that no row reached would be missing (`resources.INSERT_VALUES_EMPTY_DESTINATIONS`)
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
    # the marts in `analytics` and the staging models and seeds in their own schema, as on the lake
    seeds = set(seed_names())
    for schema, layer, extra in ((ANALYTICS_SCHEMA, "marts", set()), (staging_schema(), "staging", seeds)):
        in_postgres_models = _postgres_row_counts(postgres_database, schema, views=True)
        assert set(in_postgres_models) == {model.name for model in project_models() if model.layer == layer} | extra
        # every model has rows but those of the webhooks: no webhook ever followed this world
        assert all(rows > 0 for name, rows in in_postgres_models.items() if name not in WEBHOOK_MODELS), \
            in_postgres_models
        in_lake_models = table_row_counts(lake, schema, views=True)
        in_lake_models.pop(BUILD_RECORD_TABLE, None)  # the lake's record of its last build: what it builds next
        assert in_postgres_models == in_lake_models
    schemas = {name for (name,) in postgres_database.query("select schema_name from information_schema.schemata")}
    assert f"_{DATASET_NAME}_staging" in schemas and f"{DATASET_NAME}_staging" not in schemas, "dlt's staging, internal"

    # the LFDs' local dates: PostgreSQL's time zone conversion gives DuckDB's dates
    lfds = "select container_id, last_free_day_local, last_free_day_time_zone from analytics.container_status"
    with lake.connect(read_only=True) as con:
        by_duckdb = set(con.execute(lfds).fetchall())
    assert set(postgres_database.query(lfds)) == by_duckdb
    assert any(local is not None for _, local, _ in by_duckdb)

    # the percentiles (percentile_cont against quantile_cont), the emissions, the reliability and the ETA
    # accuracy: the same on both engines, floats to 1e-9 (relative) or 0.0101 (absolute, see below)
    for sql, key_columns in (
        ("select measure, dimension, dimension_value, observations, p50_hours, p90_hours, mean_hours "
         "from analytics.transit_dwell_percentiles", 3),
        ("select container_id, leg_sequence, distance_method, co2e_kg from analytics.leg_emissions", 3),
        ("select schedule_basis, carrier_scac, lane, arrival_month, arrivals, arrivals_on_time, reliability, "
         "mean_delay_days_of_late from analytics.schedule_reliability", 4),
        ("select dimension, dimension_value, arrival, lead_time_days, arrivals_with_eta, "
         "mean_absolute_error_hours, bias_hours from analytics.eta_accuracy_summary", 4),
        ("select container_id, valid_from, blocking_hold_count, fees_total from analytics.container_charge_versions", 2),
    ):  # fmt: skip
        with lake.connect(read_only=True) as con:
            by_duckdb = {row[:key_columns]: row[key_columns:] for row in con.execute(sql).fetchall()}
        by_postgres = {row[:key_columns]: row[key_columns:] for row in postgres_database.query(sql)}
        assert by_duckdb and by_postgres.keys() == by_duckdb.keys()
        for key, values in by_postgres.items():
            values, expected = ([-1 if value is None else value for value in row] for row in (values, by_duckdb[key]))
            # a half rounded to 2 decimals may go either way: a numeric on PostgreSQL, a double on DuckDB
            assert values == pytest.approx(expected, rel=1e-9, abs=0.0101), key

    # each day's exposure: the same days, last free days, fees and estimates on both engines
    exposure = ("select container_id, local_date, last_free_day_local, days_past_last_free_day, fees_total, "
                "estimated_accrued_amount, trusted from analytics.demurrage_exposure")  # fmt: skip
    with lake.connect(read_only=True) as con:
        by_duckdb = set(con.execute(exposure).fetchall())
    assert by_duckdb and set(postgres_database.query(exposure)) == by_duckdb

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
