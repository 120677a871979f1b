"""Geometry: GeoJSON map features to Arrow/WKB with the antimeridian split (`features`), the frame, land and
labels of the PNG route maps (`frame`), the maps themselves (`render`), and here the GeoParquet of the map
features for GIS tools, derived from the loaded warehouse. The Dagster code location imports this module
while it loads: it needs no geopandas, pyarrow or shapely.

DuckDB writes the file itself (`COPY ... TO ... (FORMAT parquet)`): the raw WKB columns become GEOMETRY
with `st_geomfromwkb`, and DuckDB streams row groups to disk with the GeoParquet 1.0 `geo` metadata
(encoding, geometry types, bbox, CRS). No Arrow table or GeoDataFrame of the whole table is held in
Python, as the geopandas writer before it did.

Rows are ordered by container and feature, in slices: one `ORDER BY` over the whole table holds all of it
in memory (measured with DuckDB 1.5: 3 GiB for 820k features, and under a memory limit it fails instead of
spilling these large BLOB rows), so each slice (a range of container ids holding about `SLICE_BYTES` of
geometry) is sorted into a part file, and one last COPY streams the parts, in order, into the
GeoParquet. One thread, so that COPY buffers one row group at a time and keeps the parts' order. Peak
memory then follows the slice, not the table.

The primary geometry (GeoParquet's `primary_column`, the one GIS tools draw and geopandas makes active)
is `geometry_split`, the antimeridian-split variant (DuckDB makes the first GEOMETRY column primary, so it
comes first): a line over the antimeridian is a MultiLineString cut at +/-180. The unsplit `geometry`,
whose lines there jump from one edge of the world to the other, is kept as the second geometry column.

The geometry is typed `GEOMETRY('EPSG:4326')`: without a CRS DuckDB leaves `crs` out of the metadata,
which readers take as OGC:CRS84 (same axes on disk, but geopandas then reports no EPSG code); with it the
metadata carries EPSG:4326's PROJJSON, as geopandas wrote before. Coordinates stay longitude, latitude:
GeoParquet fixes WKB's axis order whatever the CRS says.

The file's footer records which state of `map_features` it was written from (`STATE_KEY`); an export
from an unchanged table leaves the file alone, so a schedule that syncs often rewrites it only after a
map changed.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass
from itertools import pairwise
from pathlib import Path

import duckdb

from pipelines.settings import DATASET_NAME
from pipelines.warehouse import WarehouseStore

# The land outline the maps draw (Natural Earth 1:110m, vendored: `pipelines.geo.frame` says how it was made).
LAND_PATH = Path(__file__).resolve().parent / "reference_data" / "land_110m.geojson"
STATE_KEY = "ocean_tracking_map_state"  # the footer key-value entry naming the table state written
EXPORT_VERSION = 2  # part of the recorded state: a change to the export's SQL rewrites every old file
GEOMETRY_TYPE = "GEOMETRY('EPSG:4326')"
# What a slice sorts at a time: the geometry of a range of containers, plus an estimate of a row's other
# columns. Measured at 820k features (~100k shipments, ~1.1 kB of WKB a row): 24 MB slices (~20k rows)
# peak at 280 MiB on a lake in 9 s, 60 MB slices at 400 MiB in 6 s; the geopandas writer took 5.5 GiB.
SLICE_BYTES = 24_000_000
ROW_BYTES = 100
ROW_GROUP_ROWS = 10_000  # rows the writer buffers before flushing a row group
# The export session's settings (see the module docstring), reset afterwards: a DuckDB file's database
# may be shared with other sessions of the process. The memory limit makes a slice's sort spill (to a
# folder beside the output) and bounds what a DuckDB file's buffer pool keeps of the table across slices.
SESSION_SETTINGS = {"threads": "1", "preserve_insertion_order": "true", "memory_limit": "'256MB'"}


@dataclass(frozen=True)
class GeoParquetExport:
    """The exported file, its rows, and whether this export wrote it (False: unchanged, left alone)."""

    path: Path
    rows: int
    written: bool


def map_features_state(con: duckdb.DuckDBPyConnection, dataset_name: str = DATASET_NAME) -> str | None:
    """A short token that changes whenever `map_features` does: the newest load id and the row count
    (a refreshed map is deleted and inserted under a new load id). None when the table does not exist.

    Used to skip files derived from the table (the GeoParquet, the overview map) when nothing changed."""
    found = _newest_load_and_rows(con, dataset_name)
    return None if found is None else _token(dataset_name, *found)


def _newest_load_and_rows(con: duckdb.DuckDBPyConnection, dataset_name: str) -> tuple[str | None, int] | None:
    # Asks the table, not the catalog: on a lake, listing the catalog's tables costs ~0.5 s and ~90 MiB,
    # this query a few milliseconds. Inside a transaction a missing table aborts it.
    try:
        return con.execute(f"select max(_dlt_load_id), count(*) from {dataset_name}.map_features").fetchone()
    except duckdb.CatalogException:  # dlt creates the table with its first rows
        return None


def _token(dataset_name: str, load_id: str | None, rows: int) -> str:
    return f"v{EXPORT_VERSION}:{dataset_name}:{load_id}:{rows}"


def _sql_string(text: str) -> str:
    return "'" + text.replace("'", "''") + "'"


def recorded_state(con: duckdb.DuckDBPyConnection, path: Path) -> tuple[str, int] | None:
    """The table state and row count an earlier export wrote into `path`'s footer; None when the file is
    missing, unreadable (half written by a killed process, not Parquet) or has no recorded state."""
    if not path.is_file():
        return None
    try:  # no query parameters: the first on a session with a lake attached costs ~1 s (measured, DuckDB 1.5)
        found = con.execute(
            f"select decode(value) from parquet_kv_metadata({_sql_string(str(path))}) "
            f"where decode(key) = {_sql_string(STATE_KEY)}"
        ).fetchone()
        (rows,) = con.execute(f"select num_rows from parquet_file_metadata({_sql_string(str(path))})").fetchone()
    except duckdb.Error:
        return None
    return (found[0], int(rows)) if found else None


def export_map_features_geoparquet(
    store: WarehouseStore, out_path: Path, dataset_name: str = DATASET_NAME
) -> GeoParquetExport | None:
    """Write every loaded map feature as GeoParquet (EPSG:4326; primary geometry `geometry_split`, then
    the unsplit `geometry`), ordered by container and feature, unless
    `out_path` already holds the table's current state; None when no map was loaded (no table or no rows).

    One read-only session and one snapshot (a transaction) for the state and the rows, so the recorded
    state is the one written. The file appears whole or not at all: it is written beside its place and
    renamed into it."""
    out_path = Path(out_path)
    with store.connect(read_only=True) as con:
        recorded = recorded_state(con, out_path)  # outside the transaction: a failed read would abort it
        for name, value in SESSION_SETTINGS.items():
            con.execute(f"set {name} = {value}")
        try:
            con.execute("begin transaction")
            try:
                return _export(con, out_path, dataset_name, recorded)
            finally:
                con.execute("rollback")  # read only: nothing to keep; ends the snapshot before the detach
        finally:
            for name in (*SESSION_SETTINGS, "temp_directory"):
                con.execute(f"reset {name}")


def _export(
    con: duckdb.DuckDBPyConnection, out_path: Path, dataset_name: str, recorded: tuple[str, int] | None
) -> GeoParquetExport | None:
    found = _newest_load_and_rows(con, dataset_name)
    if found is None or found[1] == 0:  # DuckDB writes no GeoParquet metadata into a file of no rows
        return None
    state = _token(dataset_name, *found)
    if recorded is not None and recorded[0] == state:
        return GeoParquetExport(out_path, recorded[1], written=False)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
    with tempfile.TemporaryDirectory(prefix=f".{out_path.name}.", dir=out_path.parent) as parts_dir:
        con.execute(f"set temp_directory = {_sql_string(parts_dir)}")
        parts = _sorted_parts(con, dataset_name, Path(parts_dir))
        query = (
            "select * exclude (geometry, geometry_split), "
            f"st_geomfromwkb(geometry_split)::{GEOMETRY_TYPE} as geometry_split, "
            f"st_geomfromwkb(geometry)::{GEOMETRY_TYPE} as geometry "
            f"from read_parquet([{', '.join(_sql_string(str(part)) for part in parts)}])"
        )
        options = (
            f"format parquet, geoparquet_version 'V1', row_group_size {ROW_GROUP_ROWS}, "
            f"kv_metadata {{{STATE_KEY}: {_sql_string(state)}}}"
        )
        try:
            (rows,) = con.execute(f"copy ({query}) to {_sql_string(str(partial))} ({options})").fetchone()
            os.replace(partial, out_path)
        finally:
            partial.unlink(missing_ok=True)
    return GeoParquetExport(out_path, int(rows), written=True)


def _sorted_parts(con: duckdb.DuckDBPyConnection, dataset_name: str, folder: Path) -> list[Path]:
    """The table (dlt's columns left out) as part files, each a range of container ids sorted by container
    and feature, in order. A slice ends where the containers so far reach `SLICE_BYTES` (their geometry
    plus `ROW_BYTES` a row), so a container's rows stay in one part and long routes make smaller slices."""
    table = f"{dataset_name}.map_features"
    starts = con.execute(
        f"""
        with containers as (
            select container_id,
                   sum(coalesce(octet_length(geometry), 0) + coalesce(octet_length(geometry_split), 0) + {ROW_BYTES})
                       as bytes
            from {table} group by container_id
        ), reached as (
            select container_id, sum(bytes) over (order by container_id rows unbounded preceding) - bytes as before
            from containers
        )
        select min(container_id) from reached group by before // {SLICE_BYTES} order by 1
        """
    ).fetchall()
    bounds = [start for (start,) in starts[1:]]
    parts = []
    for index, (low, high) in enumerate(pairwise([None, *bounds, None])):
        conditions = []
        if low is not None:
            conditions.append(f"container_id >= {_sql_string(low)}")
        if high is not None:
            conditions.append(f"container_id < {_sql_string(high)}")
        where = f"where {' and '.join(conditions)}" if conditions else ""
        part = folder / f"part-{index:05d}.parquet"
        con.execute(
            f"copy (select columns(c -> not starts_with(c, '_dlt_')) from {table} {where} "
            f"order by container_id, feature_index) to {_sql_string(str(part))} "
            f"(format parquet, row_group_size {ROW_GROUP_ROWS})"
        )
        parts.append(part)
    return parts
