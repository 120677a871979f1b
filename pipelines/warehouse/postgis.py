"""After a load into PostgreSQL: the map features' geometries typed for PostGIS, and one clear line when the
server cannot be reached.

dlt loads the WKB columns of `map_features` (`geometry`, `geometry_split`) as `bytea`, with no SRID: a
load cannot type them, since dlt owns the table and has no geometry type. So, as `map_features_geo` does on
the DuckLake, the typed geometry is a view beside the table: `<dataset>.map_features_geo`, every column of
`map_features` with the two WKB columns as PostGIS `geometry(Geometry, 4326)`. It is created (or
replaced, so it follows columns dlt adds) after every load when the database has the `postgis` extension;
without it the columns stay WKB, and the column comments and one log line say so (EPSG:4326, longitude
then latitude). Everything goes through the destination's own client (`pipeline.sql_client()`).
"""

from __future__ import annotations

import logging

import dlt
from dlt.destinations.exceptions import DestinationConnectionError

from pipelines.errors import DestinationUnreachableError

logger = logging.getLogger(__name__)

POSTGRES_TYPE = "dlt.destinations.postgres"
FEATURES_TABLE = "map_features"
GEO_VIEW = "map_features_geo"
GEOMETRY_COLUMNS = ("geometry", "geometry_split")  # the WKB columns pipelines.geo writes
SRID = 4326
WKB_COMMENT = "WKB geometry in EPSG:4326 (longitude, latitude); typed as PostGIS geometry in map_features_geo"
NO_POSTGIS_COMMENT = "WKB geometry in EPSG:4326 (longitude, latitude); ST_GeomFromWKB(col, 4326) with PostGIS"


def is_postgres(pipeline: dlt.Pipeline) -> bool:
    """True when the pipeline loads into PostgreSQL (dlt's `postgres` destination, whatever its name)."""
    destination = pipeline.destination
    return destination is not None and destination.destination_type == POSTGRES_TYPE


def unreachable(pipeline: dlt.Pipeline, error: BaseException) -> DestinationUnreachableError | None:
    """The one-line error for `error` when it (or its cause) is dlt's connection failure to a server
    destination (credentials with a host and port), naming where it was looked for and what to do; None for
    any other error, and for the embedded warehouses (their lock and file errors are reported elsewhere)."""
    cause: BaseException | None = error
    seen: set[int] = set()
    while cause is not None and id(cause) not in seen and not _connection_failure(cause):
        seen.add(id(cause))
        cause = getattr(cause, "exception", None) or cause.__cause__  # PipelineStepFailed keeps it in .exception
    if cause is not None and id(cause) in seen:
        cause = None
    if cause is None:
        return None
    try:  # only a server (host and port): an embedded warehouse's failures are reported as they are
        credentials = pipeline.destination_client().config.credentials
        place = f"{credentials.host}:{credentials.port}"
    except Exception:
        return None
    name = pipeline.destination.destination_name
    reason = str(cause.__cause__ or cause).strip().splitlines()[0].strip()
    return DestinationUnreachableError(
        f"Cannot reach the {name} destination at {place} ({reason}). Start the server, or fix "
        f"DESTINATION__{name.upper()}__CREDENTIALS (environment or .dlt/secrets.toml)."
    )


def _connection_failure(error: BaseException) -> bool:
    # dlt wraps a failed connect in DestinationConnectionError in its load jobs, but not while it restores
    # the state (`sync`): there psycopg2's OperationalError arrives as is (the driver is an optional extra,
    # so it is recognised by name, not imported).
    if isinstance(error, DestinationConnectionError):
        return True
    kind = type(error)
    return kind.__name__ == "OperationalError" and kind.__module__.startswith("psycopg2") and (
        "connection to server" in str(error) or "could not connect" in str(error)
    )


def publish_geometry_view(pipeline: dlt.Pipeline, dataset_name: str) -> bool | None:
    """After a load into PostgreSQL: comment the WKB columns and, when PostGIS is installed in the database,
    create or replace `<dataset>.map_features_geo` with them as `geometry(Geometry, 4326)`.

    Returns True when the view was made, False when PostGIS is absent (logged once), None when there is
    nothing to do (another destination, or no map feature loaded yet)."""
    if not is_postgres(pipeline):
        return None
    with pipeline.sql_client() as client:
        columns = client.execute_sql(
            "select column_name, data_type from information_schema.columns "
            "where table_schema = %s and table_name = %s order by ordinal_position",
            dataset_name,
            FEATURES_TABLE,
        )
        if not columns:
            return None
        wkb = [name for name, data_type in columns if name in GEOMETRY_COLUMNS and data_type == "bytea"]
        has_postgis = bool(client.execute_sql("select 1 from pg_extension where extname = 'postgis'"))
        table = client.make_qualified_table_name(FEATURES_TABLE)
        with client.begin_transaction():
            comment = WKB_COMMENT if has_postgis else NO_POSTGIS_COMMENT
            for name in wkb:
                client.execute_sql(f"comment on column {table}.{client.escape_column_name(name)} is '{comment}'")
            if has_postgis:
                client.execute_sql(_view_sql(client, table, [name for name, _ in columns], wkb))
    if not has_postgis:
        logger.warning(
            "PostGIS is not installed in the destination database: %s.%s keeps its geometries as WKB in "
            "EPSG:4326 (CREATE EXTENSION postgis, then the next sync adds the view %s).",
            dataset_name, FEATURES_TABLE, GEO_VIEW,
        )  # fmt: skip
    return has_postgis


def _view_sql(client, table: str, columns: list[str], wkb: list[str]) -> str:
    selected = []
    for name in columns:
        column = client.escape_column_name(name)
        if name in wkb:
            column = f"st_setsrid(st_geomfromwkb({column}), {SRID})::geometry(Geometry, {SRID}) as {column}"
        selected.append(column)
    view = client.make_qualified_table_name(GEO_VIEW)
    return f"create or replace view {view} as select {', '.join(selected)} from {table}"
