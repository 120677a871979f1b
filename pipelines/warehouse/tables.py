"""Reading and shaping the embedded warehouse: table lookups, row counts, and the typed-geometry view
over the raw map features. Each takes a session (`con`), or a store to open one: inside a sync the session is
the loader's own (`loader_session`), attached once for the whole sync."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING

import duckdb

from pipelines.settings import DATASET_NAME
from pipelines.warehouse.store import WarehouseStore

if TYPE_CHECKING:
    import dlt

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
    """True when the table (or view) exists in the session's warehouse: dlt creates a table only once it
    has received rows."""
    query = (
        "select count(*) from information_schema.tables "
        "where table_catalog = current_database() and table_schema = ? and table_name = ?"
    )
    return con.execute(query, [schema, table]).fetchone()[0] > 0


@contextmanager
def loader_session(pipeline: dlt.Pipeline, store: WarehouseStore) -> Iterator[duckdb.DuckDBPyConnection]:
    """A session on the embedded warehouse `pipeline` loads into, for the little a sync reads and writes
    around its load (the writer's options, the geometry view, row counts). On a lake it is dlt's own
    connection: inside `pipelines.compat.lake_connections_kept` the one the load attached, so the sync attaches
    the lake once instead of once more for each; a DuckDB file is opened as `store.connect` opens it. Writes
    through it belong inside `store.writing()`, like any other."""
    if not store.is_lake:
        with store.connect() as con:
            yield con
        return
    with pipeline.sql_client() as client:
        yield client.native_connection


def create_geometry_view(store: WarehouseStore, dataset_name: str = DATASET_NAME) -> None:
    """`ensure_geometry_view` in a session of its own."""
    with store.connect() as con:
        ensure_geometry_view(con, dataset_name)


def ensure_geometry_view(con: duckdb.DuckDBPyConnection, dataset_name: str = DATASET_NAME) -> None:
    """Create `map_features_geo`, the map features with GEOMETRY columns, once the table exists. Only
    once: the view selects `*`, so it follows new columns, and on a lake every DDL is a new snapshot."""
    if table_exists(con, dataset_name, "map_features") and not table_exists(con, dataset_name, "map_features_geo"):
        con.execute(MAP_FEATURES_GEO_VIEW.format(dataset=dataset_name))


def table_row_counts(store: WarehouseStore, dataset_name: str = DATASET_NAME, *, views: bool = False) -> dict[str, int]:
    """`count_rows` in a read-only session of its own."""
    with store.connect(read_only=True) as con:
        return count_rows(con, dataset_name, views=views)


def count_rows(con: duckdb.DuckDBPyConnection, dataset_name: str = DATASET_NAME, *, views: bool = False) -> dict[str, int]:
    """Rows per table of a schema (dlt's own bookkeeping tables left out; views too when `views`), for
    summaries and run metadata."""
    kinds = ["BASE TABLE", "VIEW"] if views else ["BASE TABLE"]
    tables = [
        row[0]
        for row in con.execute(
            "select table_name from information_schema.tables where table_catalog = current_database() "
            "and table_schema = ? and list_contains(?, table_type) "
            "and table_name not like '\\_dlt%' escape '\\' order by table_name",
            [dataset_name, kinds],
        ).fetchall()
    ]
    return {table: con.execute(f'select count(*) from {dataset_name}."{table}"').fetchone()[0] for table in tables}


def newest_loads(con: duckdb.DuckDBPyConnection, dataset_name: str = DATASET_NAME) -> dict[str, float]:
    """When each root table of a dataset last received rows, as a Unix timestamp: the newest dlt load id
    among its rows (dlt's load ids are the load's start time). A table merged again with unchanged rows
    keeps its time: this is how fresh the data is, not when a sync last ran."""
    tables = [
        row[0]
        for row in con.execute(
            "select table_name from information_schema.columns where table_catalog = current_database() "
            "and table_schema = ? and column_name = '_dlt_load_id' and table_name not like '\\_dlt%' escape '\\'",
            [dataset_name],
        ).fetchall()
    ]
    newest = {table: con.execute(f'select max(_dlt_load_id) from {dataset_name}."{table}"').fetchone()[0] for table in tables}
    return {table: float(load_id) for table, load_id in newest.items() if load_id is not None}
