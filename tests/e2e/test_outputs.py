"""Other destinations and files: the Parquet/Delta lake, GeoParquet, and no key anywhere on disk."""

from __future__ import annotations

from pathlib import Path

import duckdb
import geopandas as gpd
from deltalake import DeltaTable

from pipelines.geo.geoparquet import export_map_features_geoparquet
from pipelines.sync import sync_account
from pipelines.warehouse.destinations import lake_target
from tests.conftest import FULL_KEY
from tests.e2e.conftest import api_total, make_client, sync_once


def _lake_sync(server, workdir: Path) -> None:
    target = lake_target(workdir / "lake")
    with make_client(server, workdir) as client:
        sync_account(client, target, pipelines_dir=workdir / "dlt")


def test_parquet_lake_merges_instead_of_appending(sandbox, tmp_path):
    _lake_sync(sandbox, tmp_path)
    _lake_sync(sandbox, tmp_path)

    shipments = DeltaTable(str(tmp_path / "lake" / "ocean_tracking" / "shipments")).to_pyarrow_table()
    assert shipments.num_rows == api_total(sandbox, "/shipments")
    assert len(set(shipments.column("id").to_pylist())) == shipments.num_rows
    features = DeltaTable(str(tmp_path / "lake" / "ocean_tracking" / "map_features")).to_pyarrow_table()
    assert features.num_rows > 0
    # no scd2 on Delta: one version per shipment after two syncs of an unchanged world
    history = DeltaTable(str(tmp_path / "lake" / "ocean_tracking" / "shipment_eta_history")).to_pyarrow_table()
    assert len(set(history.column("shipment_id").to_pylist())) == shipments.num_rows


def test_map_features_export_as_geoparquet(sandbox, tmp_path):
    result = sync_once(sandbox, tmp_path)

    path = export_map_features_geoparquet(result.store, tmp_path / "map_features.parquet")

    frame = gpd.read_parquet(path)
    assert frame.crs.to_epsg() == 4326
    assert len(frame) == result.scalar("select count(*) from map_features")
    assert frame.geometry.is_valid.all()
    assert set(frame.geom_type) <= {"Point", "LineString"}
    assert set(frame.geometry_split.geom_type) <= {"Point", "LineString", "MultiLineString"}
    # DuckDB reads the GeoParquet metadata and types the column as GEOMETRY with no extension
    kind = duckdb.sql(f"select typeof(geometry) from read_parquet('{path}') limit 1").fetchone()[0]
    assert kind.startswith("GEOMETRY")


def test_api_key_is_in_no_file_the_sync_writes(sandbox, tmp_path):
    result = sync_once(sandbox, tmp_path)
    export_map_features_geoparquet(result.store, tmp_path / "map_features.parquet")

    written = [path for path in tmp_path.rglob("*") if path.is_file()]
    assert len(written) > 5
    needle = FULL_KEY.encode()
    leaking = [str(path) for path in written if needle in path.read_bytes()]
    assert leaking == []
