"""Files derived from the loaded warehouse: GeoParquet of the map features for GIS tools."""

from __future__ import annotations

from pathlib import Path

from pipelines.geo.features import write_geoparquet
from pipelines.settings import DATASET_NAME
from pipelines.warehouse.store import WarehouseStore
from pipelines.warehouse.tables import table_exists


def export_map_features_geoparquet(
    store: WarehouseStore, out_path: Path, dataset_name: str = DATASET_NAME
) -> Path | None:
    """Write every loaded map feature as GeoParquet (EPSG:4326); None when no map was loaded.

    Reads the raw WKB columns through Arrow (no per-row Python) and lets geopandas write the
    GeoParquet metadata that QGIS, GDAL and DuckDB's reader expect.
    """
    with store.connect(read_only=True) as con:
        if not table_exists(con, dataset_name, "map_features"):
            return None
        table = con.execute(
            f"select columns(c -> not starts_with(c, '_dlt_')) from {dataset_name}.map_features "
            "order by container_id, feature_index"
        ).fetch_arrow_table()
    return write_geoparquet(table, out_path)
