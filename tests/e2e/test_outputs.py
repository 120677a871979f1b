"""Other destinations and files: the Parquet/Delta lake, GeoParquet, and no key anywhere on disk."""

from __future__ import annotations

from pathlib import Path

import duckdb
import geopandas as gpd
import pytest
import shapely
from deltalake import DeltaTable

from pipelines.geo import GeoParquetExport, export_map_features_geoparquet
from pipelines.sync import sync_account
from pipelines.warehouse.destinations import lake_target
from tests.support.sandboxes import FULL_KEY, api_total
from tests.support.syncs import SyncResult, make_client


def _lake_sync(server, workdir: Path) -> None:
    target = lake_target(workdir / "lake")
    with make_client(server, workdir) as client:
        sync_account(client, target, pipelines_dir=workdir / "dlt")


@pytest.mark.slow
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


@pytest.fixture(scope="module")
def exported(synced, tmp_path_factory) -> tuple[SyncResult, Path, GeoParquetExport]:
    """The GeoParquet exported from the shared `synced` lake into a folder of this module's."""
    out = tmp_path_factory.mktemp("exported") / "map_features.parquet"
    return synced, out, export_map_features_geoparquet(synced.store, out)


@pytest.mark.slow
def test_map_features_export_as_geoparquet(exported):
    result, out, export = exported

    assert export == GeoParquetExport(out, result.scalar("select count(*) from map_features"), written=True)
    frame = gpd.read_parquet(out)
    assert frame.crs.to_epsg() == 4326 and frame["geometry_split"].crs.to_epsg() == 4326
    assert len(frame) == export.rows
    assert not [c for c in frame.columns if c.startswith("_dlt_")]
    warehouse = result.query(
        "select container_id, feature_index, geometry, geometry_split from map_features order by container_id, feature_index"
    )
    assert list(zip(frame.container_id, frame.feature_index, strict=True)) == [row[:2] for row in warehouse]
    assert frame.geometry.name == "geometry_split"  # the primary column: split at the antimeridian
    assert list(shapely.to_wkb(frame["geometry"].values)) == [row[2] for row in warehouse]
    assert list(shapely.to_wkb(frame.geometry_split.values)) == [row[3] for row in warehouse]
    assert frame["geometry"].is_valid.all()
    assert set(frame["geometry"].geom_type) <= {"Point", "LineString"}
    assert set(frame.geometry_split.geom_type) <= {"Point", "LineString", "MultiLineString"}
    # DuckDB reads the GeoParquet metadata and types the column as GEOMETRY with its CRS (PROJJSON of
    # EPSG:4326 as written; named EPSG:4326 once spatial is loaded), no extension needed
    kind = duckdb.sql(f"select typeof(geometry) from read_parquet('{out}') limit 1").fetchone()[0]
    assert kind.startswith("GEOMETRY(") and '"id":{"authority":"EPSG","code":4326}}' in kind
    assert [p.name for p in out.parent.glob("*map_features*")] == [out.name]  # no partial file left behind


@pytest.mark.slow
def test_geoparquet_is_rewritten_only_when_the_map_features_changed(synced_copy, tmp_path):
    result = synced_copy  # the test deletes rows: its own copy of the shared lake
    out = tmp_path / "map_features.parquet"
    first = export_map_features_geoparquet(result.store, out)
    written = (out.read_bytes(), out.stat().st_mtime_ns)

    again = export_map_features_geoparquet(result.store, out)

    assert again == GeoParquetExport(out, first.rows, written=False)
    assert (out.read_bytes(), out.stat().st_mtime_ns) == written

    out.write_bytes(written[0][: len(written[0]) // 2])  # a half file (a copy cut short): rewritten, no error
    assert export_map_features_geoparquet(result.store, out).written
    assert out.read_bytes() == written[0]
    out.unlink()
    assert export_map_features_geoparquet(result.store, out).written

    # the table changes: one container's map dropped (a refresh would swap its rows under a new load id)
    gone = result.scalar("select min(container_id) from map_features")
    with result.store.writing(), result.store.connect() as con:
        dropped = con.execute("delete from ocean_tracking.map_features where container_id = ?", [gone]).fetchone()[0]
    changed = export_map_features_geoparquet(result.store, out)

    assert changed == GeoParquetExport(out, first.rows - dropped, written=True)
    assert duckdb.sql(f"select count(*) from read_parquet('{out}') where container_id = '{gone}'").fetchone() == (0,)


def test_api_key_is_in_no_file_the_sync_writes(exported):
    synced, out, _ = exported

    written = [out, *(path for path in synced.workdir.rglob("*") if path.is_file())]
    assert len(written) > 5
    needle = FULL_KEY.encode()
    leaking = [str(path) for path in written if needle in path.read_bytes()]
    assert leaking == []
