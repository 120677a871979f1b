"""After a load into a REAL PostgreSQL: the PostGIS view of the map features (or, without PostGIS, WKB
columns that say what they hold), and an unreachable server reported in one line."""

from __future__ import annotations

import logging
import subprocess
import sys

import dlt
import pyarrow as pa
import shapely

from pipelines.warehouse.postgis import GEO_VIEW, publish_geometry_view
from tests.support.postgres import free_port
from tests.support.syncs import cli_env

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

    with caplog.at_level(logging.WARNING, logger="pipelines.warehouse.postgis"):
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
