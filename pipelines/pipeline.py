"""The dlt pipeline around the `ocean_tracking` source: destinations, loading and post-load views.

DuckDB at `data/warehouse.duckdb` is the embedded default. `destination="filesystem"` writes a
Parquet lake (Delta tables, so merge keeps one row per id instead of silently appending); any other
dlt destination name works with dlt's own configuration (`DESTINATION__<NAME>__CREDENTIALS`, ...).
"""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt
import duckdb
from dlt.common.pipeline import LoadInfo
from dlt.sources import DltSource

from pipelines.source import history_without_scd2
from pipelines.spatial import load_spatial

PIPELINE_NAME = "ocean_tracking"
DATASET_NAME = "ocean_tracking"
DATA_DIR = Path(os.environ.get("OCEAN_TRACKING_DATA_DIR", "data"))
# Not `ocean_tracking.duckdb`: a DuckDB file named like the dataset makes `ocean_tracking.<table>`
# ambiguous (catalog or schema?) to the binder, and dlt fails its DDL.
DEFAULT_DUCKDB_PATH = DATA_DIR / "warehouse.duckdb"
DEFAULT_LAKE_URL = DATA_DIR / "lake"

# A view, not a retyped column: dlt owns the raw table and loads WKB as BLOB, and DuckDB has no
# BLOB -> GEOMETRY cast that its loader could use, so the typed geometry is derived on read.
MAP_FEATURES_GEO_VIEW = """
create or replace view {dataset}.map_features_geo as
select
    * exclude (geometry, geometry_split),
    st_geomfromwkb(geometry) as geometry,
    st_geomfromwkb(geometry_split) as geometry_split
from {dataset}.map_features
"""


@dataclass(frozen=True)
class Target:
    """Where a sync loads: a dlt destination plus what it needs locally."""

    destination: Any
    dataset_name: str = DATASET_NAME
    duckdb_path: Path | None = None
    table_format: str | None = None


def duckdb_target(path: str | Path = DEFAULT_DUCKDB_PATH, dataset_name: str = DATASET_NAME) -> Target:
    """The embedded default: one DuckDB file (its folder is created)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    return Target(dlt.destinations.duckdb(str(path)), dataset_name, duckdb_path=path)


def lake_target(bucket_url: str | Path = DEFAULT_LAKE_URL, dataset_name: str = DATASET_NAME) -> Target:
    """A Parquet lake through dlt's filesystem destination, as Delta tables so merges stay merges."""
    url = str(bucket_url)
    if "://" not in url:
        Path(url).mkdir(parents=True, exist_ok=True)
        url = Path(url).resolve().as_uri()
    return Target(dlt.destinations.filesystem(url), dataset_name, table_format="delta")


def named_target(destination: str, dataset_name: str = DATASET_NAME) -> Target:
    """Any other dlt destination by name, configured the dlt way (env vars or .dlt/secrets.toml)."""
    return Target(destination, dataset_name)


def make_pipeline(target: Target, pipelines_dir: str | Path | None = None) -> dlt.Pipeline:
    """A dlt pipeline for the target. Arrow tables (map features) get `_dlt_load_id` like dict rows."""
    os.environ.setdefault("NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID", "true")
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    return dlt.pipeline(
        pipeline_name=PIPELINE_NAME,
        destination=target.destination,
        dataset_name=target.dataset_name,
        pipelines_dir=str(pipelines_dir) if pipelines_dir else None,
    )


def run_sync(pipeline: dlt.Pipeline, source: DltSource, target: Target) -> LoadInfo:
    """Extract, normalize and load one sync, then refresh the derived views."""
    if target.table_format:
        for resource in source.resources.values():
            resource.apply_hints(table_format=target.table_format)
        history_without_scd2(source)
    info = pipeline.run(source, loader_file_format="parquet")
    if target.duckdb_path is not None:
        create_geometry_view(target.duckdb_path, target.dataset_name)
    return info


def table_exists(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
    """True when the table (or view) exists: dlt creates a table only once it has received rows."""
    query = "select count(*) from information_schema.tables where table_schema = ? and table_name = ?"
    return con.execute(query, [schema, table]).fetchone()[0] > 0


def create_geometry_view(duckdb_path: Path, dataset_name: str = DATASET_NAME) -> None:
    """(Re)create `map_features_geo`, the map features with GEOMETRY columns, once the table exists."""
    with duckdb.connect(str(duckdb_path)) as con:
        if table_exists(con, dataset_name, "map_features"):
            load_spatial(con)
            con.execute(MAP_FEATURES_GEO_VIEW.format(dataset=dataset_name))


def table_row_counts(duckdb_path: Path, dataset_name: str = DATASET_NAME) -> dict[str, int]:
    """Rows per loaded table (dlt's own bookkeeping tables left out), for the end-of-run summary."""
    with duckdb.connect(str(duckdb_path), read_only=True) as con:
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables "
                "where table_schema = ? and table_type = 'BASE TABLE' and table_name not like '\\_dlt%' escape '\\' "
                "order by table_name",
                [dataset_name],
            ).fetchall()
        ]
        return {
            table: con.execute(f'select count(*) from {dataset_name}."{table}"').fetchone()[0]
            for table in tables
        }
