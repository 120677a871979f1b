# longer than 500 lines because the store, its storage secret and the table reads every caller shares are the warehouse's one way in
"""The embedded warehouse the pipeline writes and analysts read: a DuckLake by default, or a DuckDB file.

A DuckDB file has one writer and no readers from other processes while it writes, so an analyst who keeps
a session open stops the schedule (and the schedule stops the analyst). A DuckLake keeps its catalog in a
database made for several processes (SQLite in WAL mode by default; PostgreSQL across hosts) and its
data in immutable Parquet files: any number of read-only sessions attach while one writer commits
snapshots, and every reader sees each new snapshot without reconnecting. Measured in
`tests/lake/test_session.py` and `bench/lake_vs_duckdb.py`.

`WarehouseStore` is the one way in for everything that reads or writes the embedded warehouse: the load,
the models, the exports, the write-back records, the checks, the analysts' session. Writers take one lock
(`writing`), so a load, a model run, a maintenance run and a write-back publish never race a commit;
readers take none.
Beside it in this room: `connections` (waiting for held locks, the offline extensions, the PostgreSQL
catalog), `destinations` (where a sync loads), `models` (dbt, the analysts' session), `maintenance`, `retype`
(columns typed by guess, to their declared types).

The lake across hosts is configuration only (dlt's own keys): a PostgreSQL catalog
(`DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG=postgresql://...`) and the data in S3-compatible object
storage (`..._STORAGE__BUCKET_URL=s3://bucket/path/` and its `..._STORAGE__CREDENTIALS__*`). Then our
connections create the same S3 secret dlt's loader does (`create_storage_secret`), attach the catalog in
the PostgreSQL schema dlt uses (`metadata_schema`), and the writer lock is a PostgreSQL advisory lock every
host takes (`connections.advisory_lock`) instead of a local file.

The storage's credentials are dlt's own keys for its `ducklake` destination
(`..._STORAGE__CREDENTIALS__AWS_ACCESS_KEY_ID`, `..._AWS_SECRET_ACCESS_KEY`, `..._ENDPOINT_URL`,
`..._REGION_NAME`, or the same in `.dlt/*.toml`), which dlt turns into a DuckDB `CREATE SECRET (TYPE S3,
...)` on every connection it opens. Every other connection to the lake (readers, models, maintenance, the
analysts' session, write-back publishing) resolves the same keys with dlt's own configuration resolver and
builds the secret with dlt's own builder, so the two can never disagree (endpoint without its scheme,
path-style URLs, SSL from the endpoint's scheme). The secret is temporary (in the connection's memory,
never persisted) and never appears in a log or an error: a failure is one line with the secrets blanked.

Reading and shaping the warehouse: table lookups, column types, row counts, and the typed-geometry view over
the raw map features. Each takes a session (`con`), or a store to open one: inside a sync the session is the
loader's own (`loader_session`), attached once for the whole sync.
"""

from __future__ import annotations

import os
from collections.abc import Iterator, Sequence
from contextlib import contextmanager, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING
from urllib.parse import urlsplit

import duckdb

from pipelines.errors import ConfigurationError, redact
from pipelines.settings import (
    DATASET_NAME,
    DESTINATION_ENV,
    DUCKLAKE_CATALOG_ENV,
    DUCKLAKE_METADATA_SCHEMA_KEY,
    DUCKLAKE_STORAGE_ENV,
    DUCKLAKE_STORAGE_SECTIONS,
    LAKE_NAME,
    default_destination,
    duckdb_path,
    ducklake_catalog_path,
    ducklake_data_path,
    writeback_journal_path,
)
from pipelines.warehouse.connections import (
    advisory_lock,
    catalog_exists,
    catalog_identity,
    catalog_password,
    connect_waiting,
    exclusive_file_lock,
    is_postgres_catalog,
    libpq_dsn,
    load_spatial,
    offline_connection,
)

if TYPE_CHECKING:  # the Dagster definitions import this module, and must not import dlt
    import dlt


# What the lake's SQLite catalog needs for several processes (measured, see STACK-NOTES): WAL, so readers
# never block the writer, and a busy timeout, so a reader waits out a commit instead of failing.
SQLITE_CATALOG_OPTIONS = "META_JOURNAL_MODE 'WAL', META_BUSY_TIMEOUT 10000"
WRITER_LOCK_NAME = "writer.lock"
CREATION_LOCK_NAME = "create.lock"
# One run per dataset of a warehouse at a time, on any host (`WarehouseStore.syncing`): waited for as long as
# the other run takes, never given up on.
SYNC_LOCK_WAIT_SECONDS = float("inf")
# Options a writer sets on the lake (kept in its catalog, so dlt's own load connections use them too).
# DuckDB's Parquet writer holds a whole row group in memory until it is written: DuckLake's default of
# 122,880 rows made a 10k-shipment first load peak at +236 MiB for `map_features` (route geometries) and
# +116 MiB for `transport_events`; 10,000-row groups cost +74 and +25 MiB. A bound in bytes
# (`parquet_row_group_size_bytes`) would be tighter for wide rows, but DuckDB refuses it in a session that
# preserves insertion order, which every writer but the load does (models, maintenance, migrations).
LAKE_WRITE_OPTIONS = {"parquet_row_group_size": "10000"}
SECRET_NAME = "lake_storage"  # the DuckDB secret for the lake's files in object storage


def is_remote(path: str | None) -> bool:
    """True for an object-store URL (`s3://...`), False for a local folder (or `file://`)."""
    return bool(path) and "://" in path and urlsplit(path).scheme not in ("", "file")


def storage_credentials(bucket_url: str):
    """The storage credentials dlt's loader would use for `bucket_url`, resolved by dlt from its own keys
    (`AwsCredentials` for `s3://`, ...)."""
    from dlt.common.configuration import resolve_configuration
    from dlt.common.configuration.exceptions import ConfigFieldMissingException
    from dlt.common.storages.configuration import FilesystemConfiguration

    try:
        config = resolve_configuration(FilesystemConfiguration(bucket_url=bucket_url), sections=DUCKLAKE_STORAGE_SECTIONS)
    except ConfigFieldMissingException as error:
        missing = ", ".join(error.fields)
        raise ConfigurationError(
            f"The lake's data path {bucket_url} needs storage credentials ({missing}): set "
            "DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__CREDENTIALS__AWS_ACCESS_KEY_ID, ..._AWS_SECRET_ACCESS_KEY, "
            "..._ENDPOINT_URL and ..._REGION_NAME (or the same in .dlt/secrets.toml)."
        ) from None
    return config.credentials


def _secret_values(credentials) -> list[str]:
    """The credential values that must never be shown (keys, secrets, tokens)."""
    names = ("aws_secret_access_key", "aws_session_token", "aws_access_key_id", "azure_storage_account_key",
             "azure_storage_sas_token", "private_key", "client_secret")  # fmt: skip
    return [str(value) for name in names if (value := getattr(credentials, name, None))]


def storage_secret_statements(data_path: str) -> tuple[list[str], list[str]]:
    """The `CREATE SECRET` statements (temporary, scoped to `data_path`) that let a DuckDB session read and
    write the lake's files in object storage, exactly as dlt's loader builds them
    (`DuckDbSqlClient._build_secret_statements`), and the secret values in them (to keep out of messages)."""
    from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

    credentials = storage_credentials(data_path)
    statements = DuckDbSqlClient._build_secret_statements(data_path, credentials, SECRET_NAME, "", False)
    if not statements:
        scheme = urlsplit(data_path).scheme
        raise ConfigurationError(
            f"DuckDB cannot reach the lake's data path {data_path} with a secret ({scheme}:// is not supported "
            "here): use s3:// (any S3-compatible server) for the lake's files."
        )
    return [statement.strip() for statement in statements], _secret_values(credentials)


def create_storage_secret(con: duckdb.DuckDBPyConnection, data_path: str) -> None:
    """Create on `con` the secret for the lake's files in object storage (`storage_secret_statements`); a
    failure is one line with the credentials blanked out."""
    statements, secrets = storage_secret_statements(data_path)
    for statement in statements:
        try:
            con.execute(statement)
        except duckdb.Error as error:
            reason = redact(str(error).strip().splitlines()[0], *secrets)
            raise ConfigurationError(
                f"Could not create the DuckDB secret for the lake's data path {data_path}: {reason}"
            ) from None


@dataclass(frozen=True)
class WarehouseStore:
    """Where the embedded warehouse lives: a DuckLake (`catalog` URL + `data_path`) or a DuckDB file."""

    catalog: str | None = None  # sqlite:///abs/catalog.sqlite, postgres:dbname=... (DuckLake)
    data_path: str | None = None  # the lake's Parquet files: a folder or an object-store URL
    duckdb_file: Path | None = None  # the plain DuckDB option
    # the PostgreSQL schema of a server catalog: dlt's `metadata_schema`, by default the lake's name
    metadata_schema: str = LAKE_NAME

    @property
    def is_lake(self) -> bool:
        """True for a DuckLake, False for a plain DuckDB file."""
        return self.duckdb_file is None

    @property
    def catalog_file(self) -> Path | None:
        """The SQLite catalog's file, when the catalog is one."""
        if self.catalog and self.catalog.startswith("sqlite:"):
            return Path(self.catalog.removeprefix("sqlite:").removeprefix("///"))
        return None

    @property
    def catalog_on_postgres(self) -> bool:
        """True when the lake's catalog is a PostgreSQL database (the lake across hosts)."""
        return self.is_lake and is_postgres_catalog(self.catalog)

    @property
    def catalog_tables_schema(self) -> str:
        """The schema of the catalog's own tables (`ducklake_table`, ...) as an attached session reads them under
        `__ducklake_metadata_<lake>`: `main` in a SQLite catalog, the metadata schema in PostgreSQL."""
        return self.metadata_schema if self.catalog_on_postgres else "main"

    @property
    def place(self) -> str:
        """What to call the warehouse in messages and fingerprints (never a password)."""
        if not self.is_lake:
            return str(self.duckdb_file)
        if self.catalog_on_postgres:
            catalog = catalog_identity(self.catalog, self.metadata_schema)
        else:
            catalog = str(self.catalog_file) if self.catalog_file else _without_password(self.catalog or "")
        return f"the DuckLake {catalog} (data in {self.data_path})"

    @property
    def folder(self) -> Path:
        """The local folder the warehouse's own files live in (the writer lock, the default journal)."""
        if not self.is_lake:
            return self.duckdb_file.parent
        return (self.catalog_file or Path(ducklake_catalog_path())).parent

    @property
    def journal_path(self) -> Path:
        """The write-back journal that goes with this warehouse (see `settings.writeback_journal_path`)."""
        return writeback_journal_path(self.duckdb_file if not self.is_lake else None)

    def exists(self) -> bool:
        """True once a sync (or anything else) has created the warehouse."""
        if not self.is_lake:
            return self.duckdb_file.exists()
        if self.catalog_on_postgres:
            return catalog_exists(self.catalog, self.metadata_schema)
        return self.catalog_file.exists() if self.catalog_file else True

    def require_exists(self) -> None:
        """Raise the one-line error for a warehouse nothing has created yet."""
        if not self.exists():
            raise ConfigurationError(f"{self.place} does not exist yet: run a sync first.")

    def create_folders(self) -> None:
        """Create the local folders a writer needs (the catalog's, the data path's); readers create none."""
        if self.catalog_file:
            self.catalog_file.parent.mkdir(parents=True, exist_ok=True)
        if self.data_path and "://" not in self.data_path:
            Path(self.data_path).mkdir(parents=True, exist_ok=True)

    def attach_sql(self, *, read_only: bool) -> str:
        """The ATTACH statement of the lake as `LAKE_NAME`. Readers leave the data path to the catalog (a
        restored or moved lake keeps working); the writer names it, creating the lake if it is new."""
        options = [] if read_only else [f"DATA_PATH '{self.data_path}'"]
        if self.catalog_file:
            target = f"ducklake:sqlite:{self.catalog_file}"
            options.append(SQLITE_CATALOG_OPTIONS)
        elif self.catalog_on_postgres:  # in the PostgreSQL schema dlt's loader attaches it in
            target = f"ducklake:postgres:{libpq_dsn(self.catalog)}"
            options.append(f"METADATA_SCHEMA '{self.metadata_schema}'")
        else:  # another server catalog (MySQL), named as dlt names it
            driver = self.catalog.split(":", 1)[0]
            target = f"ducklake:{driver}:{self.catalog}"
            options.append(f"METADATA_SCHEMA '{self.metadata_schema}'")
        if read_only:
            options.append("READ_ONLY")
        return f"ATTACH '{target}' AS {LAKE_NAME} ({', '.join(options)})"

    @contextmanager
    def connect(self, *, read_only: bool = False, search_path: Sequence[str] = ()) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB session on the warehouse, spatial loaded, and of `search_path` the schemas that exist
        on the search path. On a lake a read-only session never waits and never blocks the writer; a writing
        one belongs inside `writing()`. A DuckDB file held by another process is waited for (bounded, naming
        the holder); a missing one read-only is one line (`require_exists`), not DuckDB's IOException."""
        if self.is_lake:
            con = offline_connection()
            try:
                if read_only:
                    self.require_exists()
                else:
                    self.create_folders()
                if is_remote(self.data_path):
                    create_storage_secret(con, self.data_path)
                self._attach(con, read_only=read_only)
                if read_only and self.catalog_on_postgres and not is_remote(self.data_path):
                    stored = lake_data_path(con)  # a reader told only the catalog: the lake's own data path
                    if is_remote(stored):
                        create_storage_secret(con, stored)
                if not read_only:
                    set_lake_options(con)
                con.execute(f"use {LAKE_NAME}")
            except Exception:
                con.close()
                raise
        else:
            if read_only:
                self.require_exists()
            self.duckdb_file.parent.mkdir(parents=True, exist_ok=True)
            con = connect_waiting(self.duckdb_file, read_only=read_only)
            load_spatial(con)
        try:
            existing = {
                row[0]
                for row in con.execute(
                    "select schema_name from information_schema.schemata where catalog_name = current_database()"
                ).fetchall()
            }
            schemas = [schema for schema in search_path if schema in existing]
            if schemas:
                con.execute(f"set search_path = '{','.join(schemas)}'")
            yield con
        finally:
            if self.is_lake:
                # detach before closing: an attached catalog closed mid-way can be left inconsistent (dlt does the same)
                with suppress(duckdb.Error):
                    con.execute(f"use memory; detach {LAKE_NAME}")
            con.close()

    def _attach(self, con: duckdb.DuckDBPyConnection, *, read_only: bool) -> None:
        """Attach the lake on `con`; a failure on a server catalog is one line without its password."""
        if not self.catalog_on_postgres:
            con.execute(self.attach_sql(read_only=read_only))
            return
        try:
            con.execute(self.attach_sql(read_only=read_only))
        except duckdb.Error as error:
            password = catalog_password(self.catalog)
            reason = redact(str(error).strip().splitlines()[0], password)
            raise ConfigurationError(f"Could not attach {self.place}: {reason}") from None

    def create_if_missing(self) -> None:
        """Create a lake that no writer has created yet, under the writer lock, so processes (or hosts, on a
        PostgreSQL catalog) starting at once create it once; before dlt's own connections touch it (its state
        restore attaches with a data path, which would create the catalog unlocked). Two accounts' first
        syncs into a fresh lake on a SQLite catalog otherwise race its creation: one fails on `database is
        locked` (bench/accounts_parallel.py met it). On a SQLite catalog the creation takes a lock file of its
        own rather than the writer lock, so a sync never waits for a writer before it extracts."""
        if not self.is_lake or self.exists():
            return
        creating = self.writing() if self.catalog_on_postgres else exclusive_file_lock(
            self.folder / CREATION_LOCK_NAME, f"the creation of {self.place}")
        with creating:
            if not self.exists():
                self.prepare_for_load()

    def prepare_for_load(self) -> None:
        """Create the lake if it is new and give it the writer's options (`set_lake_options`) before a
        load that writes it through its own connection (dlt's). Call inside `writing()`."""
        if self.is_lake:
            with self.connect():
                pass

    @contextmanager
    def syncing(self, dataset_name: str) -> Iterator[None]:
        """Hold the sync lock of one dataset of this warehouse for the block: a second run of the same
        account (on this host or, with a PostgreSQL catalog, any host) waits for the first to finish instead
        of extracting the same changes and merging them at the same time. Runs of other datasets never wait
        for it. Kept apart from the writer lock, which every dataset's loads share for their commits only."""
        what = f"the sync lock of dataset {dataset_name} in {self.place} (another run of this account)"
        if self.catalog_on_postgres:
            with advisory_lock(self.catalog, self.metadata_schema, what, timeout=SYNC_LOCK_WAIT_SECONDS,
                               purpose=f"sync|{dataset_name}"):
                yield
            return
        name = f"{self.duckdb_file.name}." if not self.is_lake else ""
        with exclusive_file_lock(self.folder / f"{name}sync.{dataset_name}.lock", what, timeout=SYNC_LOCK_WAIT_SECONDS):
            yield

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the warehouse's one writer lock for the block, waiting (bounded, naming the holder) while
        another process writes. A DuckDB file is its own lock (`connect` waits for it)."""
        if not self.is_lake:
            yield
            return
        what = f"the writer lock of {self.place}"
        if self.catalog_on_postgres:  # writers on several hosts: a lock in the catalog's own server
            with advisory_lock(self.catalog, self.metadata_schema, what):
                yield
            return
        with exclusive_file_lock(self.folder / WRITER_LOCK_NAME, what):
            yield


COMMIT_AUTHOR = "ocean-tracking"  # the author of the lake commits the pipeline names
LOAD_COMMITS = "dlt load"  # how a load's commits end their name: `sync <load id>: dlt load` (`name_commits_after`)


def set_lake_options(con: duckdb.DuckDBPyConnection) -> None:
    """Give the attached lake the writer's options (`LAKE_WRITE_OPTIONS`) it does not have yet: they live
    in the catalog, so this writes only on a new (or older) lake and every later writer, dlt's load
    included, finds them there."""
    current = dict(con.execute(f"select option_name, value from ducklake_options('{LAKE_NAME}')").fetchall())
    for name, value in LAKE_WRITE_OPTIONS.items():
        if name not in current:
            con.execute(f"call {LAKE_NAME}.set_option('{name}', ?)", [value])


def current_snapshot(con: duckdb.DuckDBPyConnection) -> int:
    """The lake's newest snapshot id (what a reader or a writer starting now sees)."""
    return con.execute(f"select max(snapshot_id) from {LAKE_NAME}.snapshots()").fetchone()[0]


def commit_message(con: duckdb.DuckDBPyConnection, message: str) -> None:
    """Name the lake commit of the open transaction `message` (author `ocean-tracking`): DuckLake keeps it
    with the snapshot (`snapshots().commit_message`). It holds only inside an explicit transaction."""
    con.execute(f"call {LAKE_NAME}.set_commit_message(?, ?)", [COMMIT_AUTHOR, message])


def name_commits_after(con: duckdb.DuckDBPyConnection, snapshot: int, message: str, *, metadata_schema: str) -> int:
    """Name `message` (author `ocean-tracking`) the lake's commits after `snapshot` that have no message; returns
    how many. For dlt's load, which commits each job in autocommit, where DuckLake keeps no message: named
    right after, in the catalog's table of snapshot changes (DuckLake's specification; in `metadata_schema`),
    by a writer holding the writer lock, so no other writer's commit is among them."""
    changes = f"__ducklake_metadata_{LAKE_NAME}.{metadata_schema}.ducklake_snapshot_changes"
    return con.execute(f"update {changes} set author = ?, commit_message = ? where snapshot_id > ? and commit_message "
                       "is null", [COMMIT_AUTHOR, message, snapshot]).fetchone()[0]  # fmt: skip


def lake_data_path(con: duckdb.DuckDBPyConnection) -> str:
    """The data path the attached lake keeps in its catalog (where its files are, whatever was configured)."""
    return con.execute(f"select value from {LAKE_NAME}.options() where option_name = 'data_path'").fetchone()[0]


def _without_password(url: str) -> str:
    parts = urlsplit(url)
    if parts.password:
        return url.replace(f":{parts.password}@", ":***@")
    return " ".join(word for word in url.split() if not word.lower().startswith("password="))


def _absolute(path: str) -> str:
    """A local path made absolute (dlt would otherwise place a relative one inside its working folder)."""
    return path if "://" in path else str(Path(path).resolve())


def ducklake_store(catalog: str | None = None, data_path: str | None = None) -> WarehouseStore:
    """The DuckLake as configured: explicit values, else dlt's own keys for its `ducklake` destination
    (`DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG`, `..._STORAGE__BUCKET_URL`, or the same in
    `.dlt/*.toml`), else a SQLite catalog and a data folder under `<data_dir>/ducklake/`."""
    import dlt

    catalog = catalog or os.environ.get(DUCKLAKE_CATALOG_ENV) or dlt.secrets.get("destination.ducklake.credentials.catalog")
    data_path = (
        data_path
        or os.environ.get(DUCKLAKE_STORAGE_ENV)
        or dlt.config.get("destination.ducklake.credentials.storage.bucket_url")
    )
    if catalog is not None and not isinstance(catalog, str):
        raise ConfigurationError(f"{DUCKLAKE_CATALOG_ENV} must be a connection string, e.g. sqlite:///path/catalog.sqlite")
    catalog = catalog or f"sqlite:///{ducklake_catalog_path()}"
    if catalog.startswith("sqlite:"):
        catalog = "sqlite:///" + _absolute(catalog.removeprefix("sqlite:").removeprefix("///"))
    data_path = _absolute(str(data_path or ducklake_data_path()))
    if "://" not in data_path:
        data_path = data_path.rstrip("/") + "/"
    metadata_schema = dlt.config.get(DUCKLAKE_METADATA_SCHEMA_KEY) or LAKE_NAME
    return WarehouseStore(catalog=catalog, data_path=data_path, metadata_schema=str(metadata_schema))


def default_lake_in(data_dir: Path) -> WarehouseStore:
    """The lake a process with `OCEAN_TRACKING_DATA_DIR=data_dir` uses when nothing else is configured
    (a restore's target, the tests' and benchmarks' lakes): `data_dir/ducklake/`."""
    return ducklake_store(f"sqlite:///{ducklake_catalog_path(data_dir)}", str(ducklake_data_path(data_dir)))


def duckdb_store(path: str | Path | None = None) -> WarehouseStore:
    """The plain DuckDB file option (default `<data_dir>/warehouse.duckdb`)."""
    return WarehouseStore(duckdb_file=Path(path) if path is not None else duckdb_path())


def embedded_store(destination: str | None = None, duckdb_file: str | Path | None = None) -> WarehouseStore:
    """The embedded warehouse a command reads and writes: a DuckDB file when one is named, else the
    configured destination's (`OCEAN_TRACKING_DESTINATION`: `ducklake` by default, or `duckdb`)."""
    destination = "duckdb" if duckdb_file is not None else (destination or default_destination())
    if destination == "ducklake":
        return ducklake_store()
    if destination == "duckdb":
        return duckdb_store(duckdb_file)
    raise ConfigurationError(
        f"{DESTINATION_ENV}={destination} is not an embedded warehouse: this needs ducklake or duckdb."
    )


FEATURES_TABLE = "map_features"
GEO_VIEW = "map_features_geo"
# A view, not a retyped column: dlt owns the raw table and loads WKB as BLOB, and DuckDB has no
# BLOB -> GEOMETRY cast that its loader could use, so the typed geometry is derived on read.
MAP_FEATURES_GEO_VIEW = f"""
create or replace view {{dataset}}.{GEO_VIEW} as
select
    * exclude (geometry, geometry_split),
    st_geomfromwkb(geometry) as geometry,
    st_geomfromwkb(geometry_split) as geometry_split
from {{dataset}}.{FEATURES_TABLE}
"""


def table_exists(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> bool:
    """True when the table (or view) exists in the session's warehouse: dlt creates a table only once it
    has received rows."""
    query = (
        "select count(*) from information_schema.tables "
        "where table_catalog = current_database() and table_schema = ? and table_name = ?"
    )
    return con.execute(query, [schema, table]).fetchone()[0] > 0


def replace_rows(con: duckdb.DuckDBPyConnection, schema: str, table: str, query: str, params: list | None = None) -> None:
    """Make `schema.table` hold exactly the rows of `query`, in the caller's transaction, keeping the table
    when its columns stay the same (emptied and refilled) and creating it otherwise.

    Not `create or replace`: on a lake every table created is a new table id with its own inlined-data table
    in the catalog, which DuckLake 1.0 keeps after the table is dropped and its snapshots expired
    (duckdb/ducklake#1237). A SQLite catalog's schema is parsed at every transaction, so each table ever
    created slows every statement: a soak's catalog held 515 of them after 4 simulated days, and a one-row
    query spent a third of its 24 ms parsing them (BENCHMARKS.md)."""
    con.execute(f"create or replace temp table replacement_rows as {query}", params or [])
    target = f'"{schema}"."{table}"'
    shape = "select column_name, data_type from information_schema.columns where {} order by ordinal_position"
    wanted = con.execute(shape.format("table_catalog = 'temp' and table_name = 'replacement_rows'")).fetchall()
    current = con.execute(shape.format("table_catalog = current_database() and table_schema = ? and table_name = ?"),
                          [schema, table]).fetchall()  # fmt: skip
    if current == wanted:
        con.execute(f"delete from {target}")
        con.execute(f"insert into {target} by name select * from temp.replacement_rows")
    else:
        con.execute(f"create or replace table {target} as select * from temp.replacement_rows")
    con.execute("drop table temp.replacement_rows")


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
    if table_exists(con, dataset_name, FEATURES_TABLE) and not table_exists(con, dataset_name, GEO_VIEW):
        con.execute(MAP_FEATURES_GEO_VIEW.format(dataset=dataset_name))


def table_row_counts(store: WarehouseStore, dataset_name: str = DATASET_NAME, *, views: bool = False) -> dict[str, int]:
    """`count_rows` in a read-only session of its own."""
    with store.connect(read_only=True) as con:
        return count_rows(con, dataset_name, views=views)


def loaded_columns(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, dict[str, str]]:
    """{table: {column: type}} of a dataset's base tables, read from a DuckDB connection's
    `information_schema` (a DuckLake attached as the current database included)."""
    rows = con.execute(
        "select c.table_name, c.column_name, c.data_type from information_schema.columns c "
        "join information_schema.tables t on t.table_catalog = c.table_catalog "
        "and t.table_schema = c.table_schema and t.table_name = c.table_name "
        "where c.table_catalog = current_database() and c.table_schema = ? and t.table_type = 'BASE TABLE'",
        [dataset],
    ).fetchall()
    tables: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        tables.setdefault(table, {})[column] = data_type
    return tables


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
