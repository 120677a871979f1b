"""Reading and shaping the embedded DuckDB warehouse: connections with spatial loaded, table lookups,
row counts, and the typed-geometry view over the raw map features."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import closing, contextmanager
from pathlib import Path

import duckdb

from pipelines.settings import DATASET_NAME
from pipelines.warehouse.locks import connect_waiting
from pipelines.warehouse.spatial import load_spatial

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


def table_exists(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
    """True when the table (or view) exists: dlt creates a table only once it has received rows."""
    query = "select count(*) from information_schema.tables where table_schema = ? and table_name = ?"
    return con.execute(query, [schema, table]).fetchone()[0] > 0


@contextmanager
def connect(
    path: str | Path, *, read_only: bool = False, search_path: Sequence[str] = ()
) -> Iterator[duckdb.DuckDBPyConnection]:
    """A DuckDB connection with the spatial extension loaded and, of `search_path`, the schemas that exist
    on the search path (DuckDB refuses a missing one, and a read-only connection cannot create it)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    con = connect_waiting(path, read_only=read_only)
    try:
        load_spatial(con)
        existing = {row[0] for row in con.execute("select schema_name from information_schema.schemata").fetchall()}
        schemas = [schema for schema in search_path if schema in existing]
        if schemas:
            con.execute(f"set search_path = '{','.join(schemas)}'")
        yield con
    finally:
        con.close()


def create_geometry_view(duckdb_path: Path, dataset_name: str = DATASET_NAME) -> None:
    """(Re)create `map_features_geo`, the map features with GEOMETRY columns, once the table exists."""
    with connect(duckdb_path) as con:
        if table_exists(con, dataset_name, "map_features"):
            con.execute(MAP_FEATURES_GEO_VIEW.format(dataset=dataset_name))


def table_row_counts(duckdb_path: Path, dataset_name: str = DATASET_NAME, *, views: bool = False) -> dict[str, int]:
    """Rows per table of a schema (dlt's own bookkeeping tables left out; views too when `views`), for
    summaries and run metadata."""
    kinds = ["BASE TABLE", "VIEW"] if views else ["BASE TABLE"]
    with closing(connect_waiting(duckdb_path, read_only=True)) as con:
        tables = [
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_schema = ? "
                "and list_contains(?, table_type) and table_name not like '\\_dlt%' escape '\\' "
                "order by table_name",
                [dataset_name, kinds],
            ).fetchall()
        ]
        return {
            table: con.execute(f'select count(*) from {dataset_name}."{table}"').fetchone()[0]
            for table in tables
        }
