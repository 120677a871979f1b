# longer than 500 lines because every target the pipeline loads into is here, with what follows a load into one: the PostGIS view, lake migrate.
"""Where a sync loads: dlt destinations and the dlt pipeline around the `ocean_tracking` source; what follows a
load into PostgreSQL; and a plain DuckDB warehouse moved into the lake.

The embedded default is a DuckLake (dlt's `ducklake` destination: a SQLite catalog and Parquet files
under `data/ducklake/`) that analysts query while the schedule writes; `duckdb` is the plain file
`data/warehouse.duckdb`. Both are a `WarehouseStore` the rest of the pipeline reads and writes through.
`destination="filesystem"` writes a Parquet lake (Delta tables, so merge keeps one row per id instead of
silently appending); any other dlt destination name works with dlt's own configuration
(`DESTINATION__<NAME>__CREDENTIALS`, ...).

After a load into PostgreSQL: the map features' geometries typed for PostGIS (`publish_geometry_view`), and
one clear line when the server cannot be reached (`unreachable`). dlt loads the WKB columns of `map_features` (`geometry`, `geometry_split`) as `bytea`, with no SRID: a
load cannot type them, since dlt owns the table and has no geometry type. So, as `map_features_geo` does on
the DuckLake, the typed geometry is a view beside the table: `<dataset>.map_features_geo`, every column of
`map_features` with the two WKB columns as PostGIS `geometry(Geometry, 4326)`. It is created (or
replaced, so it follows columns dlt adds) after every load when the database has the `postgis` extension;
without it the columns stay WKB, and the column comments and one log line say so (EPSG:4326, longitude
then latitude). Everything goes through the destination's own client (`pipeline.sql_client()`).

Moving a plain DuckDB warehouse into the lake with one command, keeping everything (`migrate_duckdb`,
`lake migrate`). Every table of every dlt dataset in the file comes along with dlt's own `_dlt_pipeline_state`,
`_dlt_loads` and `_dlt_version`: a sync into the lake restores its state from there (the pipeline name is
the same), so the ids fetched once, the map schedule, the incremental cursors and the SCD2 history of
ETAs carry on instead of being fetched or started again. The `writeback` schema (published outcomes), the
`analytics` models and every other schema and view come too; dlt's staging schemas do not (dlt recreates
them). The copy is one lake transaction inside the writer lock: all of it, or nothing. A view that names
the file's own catalog (dbt-duckdb writes `"warehouse"."analytics"."container_status"` into a model's view)
names the lake instead, as dbt writes it there.

DuckLake stores what Parquet can hold. Types dlt creates in DuckDB all survive; a column of a type the
lake refuses becomes the nearest type it keeps, and the report names each one: INTERVAL (Parquet has no
negative interval), ENUM, UNION, BIT and BIGNUM become VARCHAR (cast back with `::interval` etc.), and a
fixed-size ARRAY a list.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dlt
import duckdb
from dlt.common.pipeline import get_dlt_pipelines_dir
from dlt.destinations.exceptions import DestinationConnectionError

from pipelines import compat, settings
from pipelines.errors import ConfigurationError, DestinationUnreachableError, InputError, PipelineError
from pipelines.settings import (
    DATASET_NAME,
    INTERNAL_STAGING_LAYOUT,
    LAKE_NAME,
    lake_url,
    writeback_journal_path,
)
from pipelines.warehouse import (
    FEATURES_TABLE,
    GEO_VIEW,
    WarehouseStore,
    create_geometry_view,
    duckdb_store,
    ducklake_store,
)
from pipelines.warehouse.connections import OFFLINE_CONFIG, as_url, ensure_bundled_extensions, locked_error
from pipelines.warehouse.maintenance import copy_sqlite

logger = logging.getLogger(__name__)

# The destinations dlt ships, for "did you mean" when a name is mistyped.
KNOWN_DESTINATIONS = tuple(sorted(dlt.destinations.__all__))


@dataclass(frozen=True)
class Target:
    """Where a sync loads: a dlt destination plus what it needs locally."""

    destination: Any
    dataset_name: str = DATASET_NAME
    store: WarehouseStore | None = None  # the embedded warehouse we read back (models, exports, checks)
    table_format: str | None = None


def ducklake_target(store: WarehouseStore | None = None, dataset_name: str = DATASET_NAME) -> Target:
    """The embedded default: a DuckLake, through dlt's `ducklake` destination, on the store's catalog and
    data path (see `ducklake_store` for where they come from): a SQLite catalog and a local folder, or,
    across hosts, a PostgreSQL catalog and S3-compatible object storage."""
    from dlt.destinations.impl.ducklake.configuration import DuckLakeCredentials

    compat.install()  # dlt's lake connections: one attach a sync, a spill folder each (compat's doc)
    store = store or ducklake_store()
    # dlt's connections autoload the lake's extensions but never install them: a new host's home has none
    ensure_bundled_extensions()
    catalog = store.catalog
    store.create_folders()
    if store.catalog_file:
        catalog = f"sqlite:///{store.catalog_file}"
    elif store.catalog_on_postgres:
        catalog = as_url(store.catalog)
    # a PostgreSQL catalog is created here, once, under the writer lock every host takes (see `create_if_missing`)
    store.create_if_missing()
    # the same PostgreSQL schema our own connections attach (`WarehouseStore.metadata_schema`); the storage
    # credentials dlt resolves from its own keys (`..._STORAGE__CREDENTIALS__*`), as `create_storage_secret` does
    credentials = DuckLakeCredentials(
        LAKE_NAME, metadata_schema=store.metadata_schema, catalog=catalog, storage=store.data_path
    )
    credentials.global_config = loader_config()
    # dlt runs a SQL job (a table chain's merge: its deletes, then its inserts) in one transaction only when
    # the destination says it supports transactions, which its DuckDB-family capabilities leave unset: each
    # statement committed alone, a lake snapshot each, and a reader between them saw the table's changed rows
    # deleted and not yet inserted. DuckLake's transactions hold them: one snapshot a job, all or nothing.
    destination = dlt.destinations.ducklake(credentials=credentials, supports_transactions=True)
    return Target(destination, dataset_name, store=store)


def loader_config(default_memory_limit: str | None = None) -> dict[str, Any]:
    """The DuckDB settings of dlt's loader connections to the embedded warehouse, the lake's and the file's:
    never download an extension (they are installed from the wheels); row order is never relied on, and
    keeping it costs the merges memory; one thread, so one row group is buffered per data file written (a
    full 10k-shipment load into the lake peaked at 714 MiB with two, 595 MiB with one, about as fast); the
    configured memory limit, else `default_memory_limit` (None: DuckDB's)."""
    config: dict[str, Any] = {**OFFLINE_CONFIG, "preserve_insertion_order": False, "threads": 1}
    if memory_limit := settings.loader_memory_limit(default_memory_limit):
        config["memory_limit"] = memory_limit
    return config


def duckdb_target(path: str | Path | None = None, dataset_name: str = DATASET_NAME) -> Target:
    """The plain DuckDB file option (its folder is created): one process at a time.

    Loaded as the lake is: `loader_config`, with the file's own memory limit (`DUCKDB_FILE_LOADER_MEMORY_LIMIT`:
    the file caches what a load writes up to it), and one table job at a time, as dlt loads the lake, so
    DuckDB holds the blocks of one table's job, not of every table's at once (a first load of 10k shipments
    peaked at 865 MiB in parallel, 607 MiB in sequence, 315 MiB with the limit too; BENCHMARKS.md)."""
    from dlt.destinations.impl.duckdb.configuration import DuckDbCredentials

    store = duckdb_store(path)
    store.duckdb_file.parent.mkdir(parents=True, exist_ok=True)
    credentials = DuckDbCredentials(str(store.duckdb_file))
    credentials.global_config = loader_config(settings.DUCKDB_FILE_LOADER_MEMORY_LIMIT)
    # a SQL job's statements in one transaction, as on the lake (`ducklake_target`): a kill cannot split them
    destination = dlt.destinations.duckdb(credentials, loader_parallelism_strategy="sequential",
                                          supports_transactions=True)  # fmt: skip
    return Target(destination, dataset_name, store=store)


def lake_target(bucket_url: str | Path | None = None, dataset_name: str = DATASET_NAME) -> Target:
    """A Parquet lake through dlt's filesystem destination, as Delta tables so merges stay merges."""
    url = str(bucket_url if bucket_url is not None else lake_url())
    if "://" not in url:
        Path(url).mkdir(parents=True, exist_ok=True)
        url = Path(url).resolve().as_uri()
    return Target(dlt.destinations.filesystem(url), dataset_name, table_format="delta")


def named_target(destination: str, dataset_name: str = DATASET_NAME) -> Target:
    """Any other dlt destination by name, configured the dlt way (env vars or .dlt/secrets.toml)."""
    if destination not in KNOWN_DESTINATIONS:
        close = difflib.get_close_matches(destination, KNOWN_DESTINATIONS, n=1)
        hint = f" Did you mean {close[0]}?" if close else f" Known: {', '.join(KNOWN_DESTINATIONS)}."
        raise ConfigurationError(f"Unknown destination {destination!r}.{hint}")
    return Target(destination, dataset_name)


def resolve_target(
    destination: str,
    *,
    duckdb_file: str | Path | None = None,
    lake: str | Path | None = None,
    dataset_name: str = DATASET_NAME,
) -> Target:
    """The target a destination name stands for: `ducklake` (the embedded default), `duckdb` (a file),
    `filesystem` (a Delta lake), or any dlt name, loading into `dataset_name` (one dataset per account
    when several share a warehouse)."""
    if destination == "ducklake":
        return ducklake_target(dataset_name=dataset_name)
    if destination == "duckdb":
        return duckdb_target(duckdb_file, dataset_name)
    if destination == "filesystem":
        return lake_target(lake, dataset_name)
    return named_target(destination, dataset_name)


def target_fingerprint(target: Target) -> str:
    """A short stable id of where the target loads (file, bucket or destination name, and dataset)."""
    if target.store is not None:
        place = target.store.place if target.store.is_lake else str(target.store.duckdb_file.resolve())
    else:
        place = str(getattr(target.destination, "config_params", {}).get("bucket_url") or target.destination)
    return hashlib.sha256(f"{place}|{target.dataset_name}".encode()).hexdigest()[:12]


def make_pipeline(target: Target, pipelines_dir: str | Path | None = None) -> dlt.Pipeline:
    """A dlt pipeline for the target. Arrow tables (map features) get `_dlt_load_id` like dict rows, and a
    loaded package's data files are deleted (`LOAD__DELETE_COMPLETED_JOBS`, unless set otherwise).

    Each target gets its own working folder under `pipelines_dir` (when None: $OCEAN_TRACKING_PIPELINES_DIR,
    else dlt's default folder): the
    folder holds incremental cursors and pending load packages, and a cursor kept for one warehouse must
    never decide what another receives. The pipeline is named after its dataset (`ocean_tracking` by
    default, `ocean_tracking_<account>` for a named account): dlt restores the state from the destination by
    that name, so every host finds it, and two datasets never share one pipeline's state. dlt's merge
    staging beside the dataset is named as internal (`_ocean_tracking_staging`, `INTERNAL_STAGING_LAYOUT`)
    unless DESTINATION__STAGING_DATASET_NAME_LAYOUT says otherwise."""
    os.environ.setdefault("DESTINATION__STAGING_DATASET_NAME_LAYOUT", INTERNAL_STAGING_LAYOUT)
    os.environ.setdefault("NORMALIZE__PARQUET_NORMALIZER__ADD_DLT_LOAD_ID", "true")
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    # a loaded package keeps its schema and state (small), not its data files: the disk stays flat
    os.environ.setdefault("LOAD__DELETE_COMPLETED_JOBS", "true")
    base = Path(pipelines_dir) if pipelines_dir else settings.pipelines_dir(default=Path(get_dlt_pipelines_dir()))
    return dlt.pipeline(
        pipeline_name=target.dataset_name,
        destination=target.destination,
        dataset_name=target.dataset_name,
        pipelines_dir=str(base / target_fingerprint(target)),
    )


POSTGRES_TYPE = "dlt.destinations.postgres"
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


SOURCE_ALIAS = "migrating_from"
DLT_VERSION_TABLE = "_dlt_version"
# dlt's staging dataset beside each dataset, transient and recreated by dlt: its name now, and dlt's default
STAGING_LAYOUTS = (INTERNAL_STAGING_LAYOUT, "%s_staging")
# Types a DuckLake table cannot hold (whole, or nested in a STRUCT, LIST or MAP), and what they become.
_UNSUPPORTED = (
    (re.compile(r"\bINTERVAL\b"), "VARCHAR"),
    (re.compile(r"\bENUM\((?:'(?:[^']|'')*'(?:,\s*)?)*\)"), "VARCHAR"),
    (re.compile(r"\bBIT\b"), "VARCHAR"),
    (re.compile(r"\b(?:BIGNUM|VARINT)\b"), "VARCHAR"),
    (re.compile(r"\[\d+\]"), "[]"),  # a fixed-size ARRAY: a LIST
)


@dataclass
class MigrationReport:
    """What a migration copied: rows per table (`schema.table`), views made, columns retyped, the journal."""

    tables: dict[str, int] = field(default_factory=dict)
    views: list[str] = field(default_factory=list)
    retyped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def lake_type(data_type: str) -> str:
    """The type a column of DuckDB type `data_type` gets in the lake (the same, when the lake keeps it)."""
    if data_type.startswith("UNION("):
        return "VARCHAR"
    for pattern, replacement in _UNSUPPORTED:
        data_type = pattern.sub(replacement, data_type)
    return data_type


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _schemas_to_move(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Tables per schema of the source file, dlt's staging schemas left out."""
    tables: dict[str, list[str]] = {}
    for schema, table in con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = ? order by all",
        [SOURCE_ALIAS],
    ).fetchall():
        tables.setdefault(schema, []).append(table)
    datasets = {schema for schema, names in tables.items() if DLT_VERSION_TABLE in names}
    staging = {layout % dataset for dataset in datasets for layout in STAGING_LAYOUTS}
    return {schema: names for schema, names in tables.items() if schema not in staging}


def _copy_table(con: duckdb.DuckDBPyConnection, schema: str, table: str, report: MigrationReport) -> None:
    columns = con.execute(
        "select column_name, data_type, is_nullable from duckdb_columns() "
        "where database_name = ? and schema_name = ? and table_name = ? order by column_index",
        [SOURCE_ALIAS, schema, table],
    ).fetchall()
    definitions, selects = [], []
    for name, data_type, nullable in columns:
        kept = lake_type(data_type)
        definitions.append(f"{_quoted(name)} {kept}{'' if nullable else ' not null'}")
        if kept == data_type:
            selects.append(_quoted(name))
        else:
            selects.append(f"cast({_quoted(name)} as {kept}) as {_quoted(name)}")
            report.retyped.append(f"{schema}.{table}.{name}: {data_type} -> {kept}")
    target = f"{_quoted(schema)}.{_quoted(table)}"
    con.execute(f"create table {target} ({', '.join(definitions)})")
    con.execute(f"insert into {target} select {', '.join(selects)} from {SOURCE_ALIAS}.{target}")


def _refuse_existing(con: duckdb.DuckDBPyConnection, store: WarehouseStore, schemas: list[str]) -> None:
    present = con.execute(
        "select schema_name, count(*) from duckdb_tables() where database_name = current_database() "
        "and list_contains(?, schema_name) group by all order by all",
        [schemas],
    ).fetchall()
    if present:
        held = ", ".join(f"{schema} ({count} table{'s' * (count != 1)})" for schema, count in present)
        raise ConfigurationError(
            f"Not migrated: {store.place} already has {held}; migrate only into a lake without them "
            "(a new data dir, or another DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG)."
        )


def migrate_duckdb(source: Path, store: WarehouseStore, *, journal: Path) -> MigrationReport:
    """Copy the DuckDB warehouse `source` (left untouched) into the lake `store`, in one transaction
    under the writer lock, then recreate its views and check every table's row count. The write-back
    journal beside `source` is copied to `journal` when that is another file and does not exist yet.
    Refuses when the lake already has tables in any schema the file brings."""
    if not store.is_lake:
        raise ConfigurationError(
            "lake migrate moves a DuckDB file into the DuckLake; the target is not a lake."
        )
    if not source.is_file():
        raise InputError(f"No DuckDB warehouse at {source}: name it with --from.")
    report = MigrationReport()
    with store.writing():
        with store.connect() as con:
            tables = _copy_into_lake(con, source, store, report)
        for dataset in (schema for schema, names in tables.items() if DLT_VERSION_TABLE in names):
            create_geometry_view(store, dataset)
    _carry_journal(source, journal, report)
    return report


def _copy_into_lake(
    con: duckdb.DuckDBPyConnection, source: Path, store: WarehouseStore, report: MigrationReport
) -> dict[str, list[str]]:
    """Attach `source` read-only beside the lake `con` is using, copy its tables in one transaction,
    then its views, and check the counts; the tables per schema that were copied."""
    quoted = str(source).replace("'", "''")
    try:
        con.execute(f"attach '{quoted}' as {SOURCE_ALIAS} (read_only)")
    except duckdb.Error as error:
        unusable = InputError(
            f"{source} cannot be opened as a DuckDB warehouse: {str(error).splitlines()[0]}"
        )
        raise (locked_error(error, source) or unusable) from None
    try:
        tables = _schemas_to_move(con)
        if not tables:
            raise InputError(f"{source} holds no tables: nothing to migrate.")
        _refuse_existing(con, store, list(tables))
        con.begin()
        try:
            for schema, names in tables.items():
                con.execute(f"create schema if not exists {_quoted(schema)}")
                for table in names:
                    _copy_table(con, schema, table, report)
            con.commit()
        except Exception:
            con.rollback()
            raise
        # DuckDB names a file's catalog after its stem: a view's fully qualified names carry it
        _recreate_views(con, source.stem, report)
        _check_counts(con, tables, report)
    finally:
        con.execute(f"detach {SOURCE_ALIAS}")
    return tables


def in_the_lake(view_sql: str, catalog: str) -> str:
    """`view_sql` with every name qualified by the file's `catalog` (`catalog.schema.table`) qualified by the
    lake's instead; quoted or not, never inside a string. DuckDB's own tokenizer finds the names."""
    tokens = duckdb.tokenize(view_sql)
    ends = [start for start, _ in tokens[1:]] + [len(view_sql)]
    texts = [view_sql[start:end].strip() for (start, _), end in zip(tokens, ends, strict=True)]
    pieces, position = [], 0
    for index, ((start, kind), text) in enumerate(zip(tokens, texts, strict=True)):
        after = texts[index + 1 : index + 4]  # `.schema.` when this is the catalog of `catalog.schema.table`
        names_the_catalog = (index == 0 or texts[index - 1] != ".") and after[0::2] == [".", "."]
        if kind == duckdb.token_type.identifier and text.strip('"') == catalog and names_the_catalog:
            pieces += [view_sql[position:start], LAKE_NAME]
            position = start + len(text)
    return "".join(pieces) + view_sql[position:]


def _recreate_views(con: duckdb.DuckDBPyConnection, catalog: str, report: MigrationReport) -> None:
    """Every view of the file but the geometry view, from its SQL (names of the file's `catalog` made the
    lake's), in the order they were made, then again for those that read a view made after them (a mart
    over a staging view dbt made again later), until a pass makes none; one that still does not bind is
    reported, not fatal (the tables are already in)."""
    pending = [row for row in con.execute(
        "select schema_name, view_name, sql from duckdb_views() where database_name = ? and not internal "
        "order by view_oid", [SOURCE_ALIAS]).fetchall()
        if row[1] != GEO_VIEW]  # fmt: skip  # the geometry view is recreated by `create_geometry_view`, not copied
    failed: dict[tuple[str, str], str] = {}
    while pending:
        failed = {}
        for schema, view, sql in pending:
            try:
                con.execute(f"create schema if not exists {_quoted(schema)}")
                con.execute(f"set schema = '{schema}'")  # an unqualified name in the view means its own schema
                con.execute(in_the_lake(sql, catalog))
                report.views.append(f"{schema}.{view}")
            except duckdb.Error as error:
                failed[schema, view] = str(error).splitlines()[0]
            finally:
                con.execute("set schema = 'main'")
        if len(failed) == len(pending):
            break
        pending = [row for row in pending if (row[0], row[1]) in failed]
    report.warnings += [f"view {schema}.{view} not recreated: {error}" for (schema, view), error in failed.items()]


def _check_counts(
    con: duckdb.DuckDBPyConnection, tables: dict[str, list[str]], report: MigrationReport
) -> None:
    for schema, names in tables.items():
        for table in names:
            name = f"{_quoted(schema)}.{_quoted(table)}"
            (copied,) = con.execute(f"select count(*) from {name}").fetchone()
            (original,) = con.execute(f"select count(*) from {SOURCE_ALIAS}.{name}").fetchone()
            if copied != original:
                raise PipelineError(
                    f"{schema}.{table}: {original} rows in the file but {copied} in the lake."
                )
            report.tables[f"{schema}.{table}"] = copied


def _carry_journal(source: Path, journal: Path, report: MigrationReport) -> None:
    """The write-back journal of the DuckDB warehouse (beside it, unless configured) goes with it."""
    old = writeback_journal_path(source)
    if not old.exists() or old.resolve() == journal.resolve():
        return
    if journal.exists():
        report.warnings.append(f"the lake's write-back journal {journal} exists; {old} was left as it is")
        return
    journal.parent.mkdir(parents=True, exist_ok=True)
    copy_sqlite(old, journal)
    report.warnings.append(f"the write-back journal {old} was copied to {journal}")
