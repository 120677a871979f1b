"""Looking after a DuckLake: maintenance (compaction, snapshot expiry and file cleanup, with figures), and backup
and restore (`lake maintain`, `lake backup`, `lake restore`).

Every sync commits snapshots, and a merge writes new Parquet files plus delete files for the rows it
replaced (re-merging unchanged rows grows the lake until maintenance; a DuckDB file stays flat), so
without maintenance a lake's file count and size grow with every sync. One run, in this order:
1. rewrite data files whose rows are partly deleted (`ducklake_rewrite_data_files`), then merge small
   adjacent files (`ducklake_merge_adjacent_files`): fewer, larger files for every reader;
2. expire the snapshots that hold a step of a sync rather than its state (`thin_snapshots`): each table's
   merge while a load runs, each model's rebuild while a build runs; every completed load, every complete
   build and every other named commit stays, so each sync's state stays queryable by snapshot and by time;
3. expire snapshots older than the retention (default 30 days), to the second (`expire_snapshots`): time
   travel reaches back that far;
4. delete the files no remaining snapshot needs (`ducklake_cleanup_old_files`) and files no snapshot ever
   referenced, left by a writer killed mid-commit (`ducklake_delete_orphaned_files`); both only past a
   grace period (an hour, by exact times: `cleanup_old_files`, which every load runs too),
   so a session that began before this run still finds the files of its snapshot.
The run holds the writer lock (compaction commits snapshots too); readers go on reading throughout.

Backup and restore of the embedded lake: its SQLite catalog, the data files it references, and the
write-back journal, as one consistent folder.

A backup is a folder (not an archive: the Parquet files are already compressed, and a folder can be
checked, synced and copied with ordinary tools):

    DEST/backup.json                what, when and from where (`lake restore` reads it)
    DEST/catalog.sqlite             the catalog, by sqlite3's online backup API (one consistent copy)
    DEST/files/<path>               every data and delete file the catalog references, at its path under
                                    the data path (older snapshots' files included: time travel survives)
    DEST/writeback_journal.sqlite   the write-back journal, by the same API, when there is one

The copy holds the writer lock, so no sync, model run, publish or maintenance commits or deletes files
while it runs; readers are not affected. Files the catalog only lists as scheduled for deletion (no
snapshot needs them) are left out, and so is their listing. A restore puts the three where a process
with `OCEAN_TRACKING_DATA_DIR=DIR` (or the configured catalog and data path) finds them and points the
catalog at its new data folder: DuckLake keeps the data path in the catalog (`ducklake_metadata`, key
`data_path`), and readers attach without one, trusting the catalog.

Only a SQLite catalog with a local data path is covered: a PostgreSQL catalog is backed up with
`pg_dump`, object-store data with the store's own versioning or replication.
"""

from __future__ import annotations

import json
import os
import shutil
import sqlite3
import time
from collections.abc import Iterator
from contextlib import closing
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import duckdb

from pipelines.errors import ConfigurationError, InputError, PipelineError
from pipelines.settings import (
    LAKE_NAME,
    WRITEBACK_JOURNAL_FILE_NAME,
    cleanup_grace,
    lake_retention_days,
    lock_timeout_seconds,
)
from pipelines.warehouse import LOAD_COMMITS, WarehouseStore, lake_data_path

# A data file with at least this share of its rows deleted is rewritten without them.
DELETE_THRESHOLD = 0.1


@dataclass(frozen=True)
class LakeFigures:
    """The size of a lake at one moment: live data files and their bytes, files on disk, snapshots."""

    data_files: int
    data_bytes: int
    files_on_disk: int
    snapshots: int


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance run did, before and after."""

    before: LakeFigures
    after: LakeFigures
    files_rewritten: int
    files_merged: int
    snapshots_expired: int
    files_deleted: int
    orphans_deleted: int
    retention_days: float
    seconds: float

    def as_metadata(self) -> dict[str, float | int]:
        """Flat figures (`data_files_before`, ..., `seconds`) for Dagster metadata and the CLI."""
        flat: dict[str, float | int] = {}
        for moment in ("before", "after"):
            for name, value in asdict(getattr(self, moment)).items():
                flat[f"{name}_{moment}"] = value
        for name, value in asdict(self).items():
            if name not in ("before", "after"):
                flat[name] = round(value, 2) if isinstance(value, float) else value
        return flat


def lake_figures(con: duckdb.DuckDBPyConnection) -> LakeFigures:
    """Count the live data files (and bytes) of every table, the files under the data path, and the
    snapshots of the lake attached as `LAKE_NAME`."""
    tables = con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = ?", [LAKE_NAME]
    ).fetchall()
    files = size = 0
    for schema, table in tables:
        count, total = con.execute(
            f"select count(*), coalesce(sum(data_file_size_bytes), 0) "
            f"from ducklake_list_files('{LAKE_NAME}', ?, schema => ?)",
            [table, schema],
        ).fetchone()
        files, size = files + count, size + total
    on_disk = con.execute(
        "select count(*) from glob(?)", [lake_data_path(con).rstrip("/") + "/**/*.parquet"]
    ).fetchone()[0]
    snapshots = con.execute(f"select count(*) from {LAKE_NAME}.snapshots()").fetchone()[0]
    return LakeFigures(files, int(size), on_disk, snapshots)


def maintain_lake(
    store: WarehouseStore,
    *,
    retention_days: float | None = None,
    grace: timedelta | None = None,
    now: datetime | None = None,
) -> MaintenanceReport:
    """Compact, expire snapshots older than `retention_days` (default: the configured retention, 30
    days) and clean up files, under the writer lock; returns the figures before and after.

    A snapshot's age is measured from `now` (default: the current time) on the lake's clock, the time
    its commits are stamped with; a run that simulates the passage of time (bench/soak.py) passes the
    instant its simulated clock stands for. The cleanup's `grace` (default: the configured one, an hour)
    protects readers of the real clock and is always measured from the current time (`cleanup_old_files`)."""
    if not store.is_lake:
        raise ConfigurationError(f"{store.place} is a plain DuckDB file: maintenance is for the DuckLake.")
    store.require_exists()
    retention = lake_retention_days() if retention_days is None else retention_days
    grace = cleanup_grace() if grace is None else grace
    started = time.monotonic()
    with store.writing(), store.connect() as con:
        before = lake_figures(con)
        rewritten = _sum(
            con, f"call ducklake_rewrite_data_files('{LAKE_NAME}', delete_threshold => {DELETE_THRESHOLD})"
        )
        merged = _sum(con, f"call ducklake_merge_adjacent_files('{LAKE_NAME}')")
        expired = thin_snapshots(con, datetime.now(UTC) - grace, metadata_schema=store.catalog_tables_schema)
        expired += expire_snapshots(con, (now or datetime.now(UTC)) - timedelta(days=retention))
        deleted = cleanup_old_files(con, grace, metadata_schema=store.catalog_tables_schema)
        orphans = len(con.execute(
            f"call ducklake_delete_orphaned_files('{LAKE_NAME}', older_than => now() - to_seconds(?::double))",
            [grace.total_seconds()],
        ).fetchall())  # fmt: skip
        after = lake_figures(con)
    return MaintenanceReport(
        before, after, rewritten, merged, expired, deleted, orphans, retention, time.monotonic() - started
    )


def thin_snapshots(con: duckdb.DuckDBPyConnection, before: datetime, *, metadata_schema: str) -> int:
    """Expire the snapshots committed before `before` that hold a step of a sync, not its state; returns how
    many. A sync commits some forty snapshots, one a step: dlt's staging tables emptied and filled, each table
    chain's merge, the schema, then the load's row in `_dlt_loads` (all named `sync <load id>: dlt load`,
    `pipelines.sync.load_waiting`); then one a model its build rebuilt (named
    `<build>: <model>`, `macros/lake_commits.sql`) and the build's record (named `<build>`). In between, a
    reader at that snapshot would see some tables of the sync and not others. DuckLake reads its SQLite
    catalog's tables whole at every transaction (no filter reaches SQLite), so every snapshot kept slows every
    query and commit: measured on a soak's lake after one simulated day of hourly syncs, 1,131 snapshots, a
    one-row query took 14.3 ms, 8.7 ms once thinned (BENCHMARKS.md).

    Kept: a snapshot that completed a load (inserted a row into a `_dlt_loads` table: every raw table as that
    sync left it), every named commit but a load's step or a model's (a complete build's record: every mart as that sync left
    it; maintenance, write-back, retype), and the newest. So time travel by snapshot or by timestamp finds
    each sync's state; a timestamp inside a sync finds the sync before it, or its completed load. Never a
    snapshot after the one a build record (`models_built`, any account's) was built through: the next build
    learns what changed from their `changes` (`pipelines.warehouse.models.tables_changed_since`)."""
    from pipelines.warehouse.models import BUILD_RECORD_TABLE, project_models

    records = con.execute(
        "select table_schema from information_schema.tables where table_catalog = ? and table_name = ?",
        [LAKE_NAME, BUILD_RECORD_TABLE]).fetchall()  # fmt: skip
    built_through = [con.execute(f'select built_through_snapshot from {LAKE_NAME}."{schema}"."{BUILD_RECORD_TABLE}"')
                     .fetchone() for (schema,) in records]  # fmt: skip
    below = min((row[0] for row in built_through if row and row[0] is not None), default=None)
    loads = {str(table_id) for (table_id,) in con.execute(
        f"select table_id from __ducklake_metadata_{LAKE_NAME}.{metadata_schema}.ducklake_table "
        "where table_name = '_dlt_loads'").fetchall()}  # fmt: skip
    step_suffixes = (f": {LOAD_COMMITS}", *(f": {model.name}" for model in project_models()))
    steps = []
    for snapshot_id, changes, message in con.execute(
        f"select snapshot_id, changes, commit_message from {LAKE_NAME}.snapshots() where snapshot_time < ? "
        f"and snapshot_id < (select max(snapshot_id) from {LAKE_NAME}.snapshots()) and snapshot_id < ? "
        "order by snapshot_id",
        [before, below if below is not None else 2**62],
    ).fetchall():
        completes_load = any(table in loads for key in ("tables_inserted_into", "inlined_insert")
                             for table in (changes or {}).get(key) or [])  # fmt: skip
        if snapshot_id > 0 and not completes_load and (message is None or message.endswith(step_suffixes)):
            steps.append(snapshot_id)
    if not steps:
        return 0
    return len(con.execute(f"call ducklake_expire_snapshots('{LAKE_NAME}', versions => ?)", [steps]).fetchall())


def expire_snapshots(con: duckdb.DuckDBPyConnection, before: datetime) -> int:
    """Expire every snapshot committed before `before` (never the newest); returns how many.

    By their ids (`versions =>`), chosen on the snapshots' times as DuckDB reads them: on a SQLite catalog
    `ducklake_expire_snapshots(older_than => T)` compares by day (measured with DuckLake 1.0: a T at 00:00
    expires every snapshot of that day, the newest hours included), so a retention would lose up to a day
    and a retention under a day would expire everything."""
    versions = con.execute(
        f"select coalesce(list(snapshot_id order by snapshot_id), []) from {LAKE_NAME}.snapshots() "
        f"where snapshot_time < ? and snapshot_id < (select max(snapshot_id) from {LAKE_NAME}.snapshots())",
        [before],
    ).fetchone()[0]
    if not versions:
        return 0
    return len(
        con.execute(f"call ducklake_expire_snapshots('{LAKE_NAME}', versions => ?)", [versions]).fetchall()
    )


def cleanup_old_files(con: duckdb.DuckDBPyConnection, grace: timedelta, *, metadata_schema: str) -> int:
    """Delete the files DuckLake scheduled for deletion more than `grace` ago (by the catalog's exact
    schedule times); returns how many. The caller holds the writer lock. The nightly maintenance calls it, and
    so does every load before it writes (`pipelines.sync.load_waiting`: syncs, refreshes, the Dagster ingest):
    what the maintenance expired at night, and what the day's merges replaced, leave the disk once past the
    grace, not a night later.

    Not `ducklake_cleanup_old_files(older_than => now() - grace)`: on a SQLite catalog that call compares
    schedule times by day (measured with DuckLake 1.0: `now() - 1 hour` deleted a file scheduled a second
    before, `now() - 20 hours` across midnight did not), so it either deletes what an open session may still
    read or keeps a day's files. So the files scheduled within the grace are set aside from DuckLake's list,
    `cleanup_all` deletes the rest (DuckLake resolves their paths, local or in object storage, and removes
    them from its list), and the set-aside rows are put back. The three steps commit apart: DuckLake's
    cleanup writes the catalog on its own connection, which an open transaction of ours would lock out. A
    run killed between them loses rows of files still in their grace: those files are then orphans, which
    `ducklake_delete_orphaned_files` deletes once they are older than the grace."""
    scheduled = f"__ducklake_metadata_{LAKE_NAME}.{metadata_schema}.ducklake_files_scheduled_for_deletion"
    within_grace = "schedule_start::timestamptz >= now() - to_seconds(?::double)"
    rows = con.execute(f"select *, {within_grace} as young from {scheduled}", [grace.total_seconds()]).fetchall()
    young = [row[:-1] for row in rows if row[-1]]
    if len(young) == len(rows):  # nothing past the grace (a load's usual case): one read, no catalog write
        return 0
    con.execute(f"delete from {scheduled} where {within_grace}", [grace.total_seconds()])
    try:
        return len(con.execute(f"call ducklake_cleanup_old_files('{LAKE_NAME}', cleanup_all => true)").fetchall())
    finally:
        if young:
            con.executemany(f"insert into {scheduled} values ({', '.join('?' * len(young[0]))})", young)


def _sum(con: duckdb.DuckDBPyConnection, call: str) -> int:
    """Files processed by a compaction call (its rows: schema, table, files_processed, files_created)."""
    return sum(row[2] for row in con.execute(call).fetchall())


MANIFEST = "backup.json"
CATALOG = "catalog.sqlite"
FILES = "files"
FORMAT = 1
# The catalog tables that name files, each with `path` and `path_is_relative`. A relative data or delete
# file is under its table's path, a relative table path under its schema's, a schema's under the data path.
PATH_TABLES = ("ducklake_schema", "ducklake_table", "ducklake_data_file", "ducklake_delete_file")


@dataclass(frozen=True)
class BackupReport:
    """What a backup or restore copied: data files and their bytes, and whether a journal was there."""

    folder: Path
    files: int
    bytes: int
    journal: bool
    seconds: float


def require_local_sqlite(store: WarehouseStore, action: str) -> Path:
    """The catalog file of a lake with a SQLite catalog and a local data path; anything else is one line
    saying what backs it up instead."""
    if not store.is_lake:
        raise ConfigurationError(
            f"{action} works on the DuckLake; {store.place} is a plain DuckDB file: copy it."
        )
    if store.catalog_file is None:
        raise ConfigurationError(
            f"{action} covers a lake with a SQLite catalog only; this lake's catalog is in PostgreSQL: use "
            "PostgreSQL's own backups (pg_dump, point-in-time recovery) for the catalog and the bucket's "
            "(versioning, replication) for the data files."
        )
    if "://" in (store.data_path or ""):
        raise ConfigurationError(
            f"{action} covers a local data path only; {store.data_path} is in an object store: use its "
            "versioning or replication for the files, and copy the catalog with sqlite3's .backup."
        )
    return store.catalog_file


def copy_sqlite(source: Path, target: Path) -> None:
    """A consistent copy of a live SQLite database (WAL content included) by the online backup API, as
    one self-contained file (rollback journal, no -wal beside it). Writers to `source` are only held up
    for the copy's duration by the busy timeout; readers never."""
    timeout = lock_timeout_seconds()
    with closing(sqlite3.connect(source, timeout=timeout)) as src, closing(sqlite3.connect(target)) as dst:
        src.backup(dst)
        dst.execute("pragma journal_mode = delete")


def use_wal(path: Path) -> None:
    """Put a restored SQLite file back in WAL mode, as its owners create it: a read-only DuckLake attach
    asks for WAL and cannot switch a file that is not in WAL already."""
    with closing(sqlite3.connect(path)) as con:
        con.execute("pragma journal_mode = wal")


def referenced_files(catalog: sqlite3.Connection, data_path: str) -> Iterator[str]:
    """The path, relative to `data_path`, of every data and delete file the catalog references (current
    and older snapshots). A file outside the data path cannot be carried along: one line saying so."""
    root = data_path.rstrip("/") + "/"

    def under_root(path: str, relative: int, parent: str) -> str:
        full = parent + path if relative else path
        if not full.startswith(root):
            raise PipelineError(
                f"The lake references {full}, outside its data path {root}: copy it yourself."
            )
        return full

    schemas = {
        schema_id: under_root(path, relative, root)
        for schema_id, path, relative in catalog.execute(
            "select schema_id, path, path_is_relative from ducklake_schema"
        )
    }
    tables = {
        table_id: under_root(path, relative, schemas[schema_id])
        for table_id, schema_id, path, relative in catalog.execute(
            "select table_id, schema_id, path, path_is_relative from ducklake_table"
        )
    }
    for kind in ("ducklake_data_file", "ducklake_delete_file"):
        for table_id, path, relative in catalog.execute(
            f"select table_id, path, path_is_relative from {kind}"
        ):
            yield under_root(path, relative, tables[table_id])[len(root) :]


def catalog_data_path(catalog: sqlite3.Connection) -> str:
    """The data path a DuckLake catalog names (`ducklake_metadata`, key `data_path`, lake-wide scope)."""
    row = catalog.execute(
        "select value from ducklake_metadata where key = 'data_path' and scope is null"
    ).fetchone()
    if row is None:
        raise InputError(
            "The catalog names no data path (ducklake_metadata.data_path): is it a DuckLake catalog?"
        )
    return row[0]


def point_catalog_at(catalog: sqlite3.Connection, data_path: str) -> None:
    """Move a catalog to a new data folder: its `data_path`, and the prefix of any absolute path under
    the old one (DuckLake writes relative paths; files added by path can be absolute)."""
    old = catalog_data_path(catalog)
    catalog.execute(
        "update ducklake_metadata set value = ? where key = 'data_path' and scope is null", [data_path]
    )
    for table in (*PATH_TABLES, "ducklake_files_scheduled_for_deletion"):
        catalog.execute(
            f"update {table} set path = ? || substr(path, length(?) + 1) "
            "where path_is_relative = 0 and substr(path, 1, length(?)) = ?",
            [data_path, old, old, old],
        )
    catalog.commit()


def _copy_files(names: list[str], source: Path, target: Path) -> int:
    size = 0
    for name in names:
        destination = target / name
        destination.parent.mkdir(parents=True, exist_ok=True)
        try:
            shutil.copy2(source / name, destination)
        except FileNotFoundError:
            raise PipelineError(
                f"{source / name} is referenced by the catalog but missing: the lake is damaged."
            ) from None
        size += destination.stat().st_size
    return size


def backup_lake(store: WarehouseStore, destination: Path, *, journal: Path) -> BackupReport:
    """Copy the lake (catalog, referenced files) and the write-back `journal` into the new folder
    `destination`, under the writer lock. Written into `<destination>.partial` and renamed at the end,
    so a folder named like the backup is always a whole one."""
    started = datetime.now(UTC)
    catalog_file = require_local_sqlite(store, "lake backup")
    store.require_exists()
    if destination.exists() and (not destination.is_dir() or any(destination.iterdir())):
        raise InputError(
            f"{destination} exists and is not an empty folder: name a new folder for the backup."
        )
    partial = destination.with_name(destination.name + ".partial")
    shutil.rmtree(partial, ignore_errors=True)
    (partial / FILES).mkdir(parents=True)
    try:
        with store.writing():
            copy_sqlite(catalog_file, partial / CATALOG)
            with closing(sqlite3.connect(partial / CATALOG)) as catalog:
                data_path = catalog_data_path(catalog)
                names = sorted(set(referenced_files(catalog, data_path)))
                catalog.execute("delete from ducklake_files_scheduled_for_deletion")  # no snapshot needs them
                catalog.commit()
            size = _copy_files(names, Path(data_path), partial / FILES)
            has_journal = journal.exists()
            if has_journal:
                copy_sqlite(journal, partial / WRITEBACK_JOURNAL_FILE_NAME)
        manifest = {
            "format": FORMAT, "created_at": started.isoformat(), "catalog": str(catalog_file),
            "data_path": data_path, "journal": str(journal) if has_journal else None, "files": len(names),
            "bytes": size, "duckdb": duckdb.__version__,
        }  # fmt: skip
        (partial / MANIFEST).write_text(json.dumps(manifest, indent=2) + "\n")
        if destination.exists():
            destination.rmdir()  # empty, checked above
        partial.rename(destination)
    except BaseException:
        shutil.rmtree(partial, ignore_errors=True)
        raise
    seconds = (datetime.now(UTC) - started).total_seconds()
    return BackupReport(destination, len(names), size, has_journal, seconds)


def read_manifest(source: Path) -> dict:
    """The manifest of a backup folder made by `backup_lake`; one line when `source` is not one."""
    try:
        manifest = json.loads((source / MANIFEST).read_text())
    except (OSError, ValueError):
        raise InputError(
            f"{source} is not a lake backup (no readable {MANIFEST}): name a folder `lake backup` made."
        ) from None
    if manifest.get("format") != FORMAT or not (source / CATALOG).is_file():
        raise InputError(f"{source} is not a lake backup of format {FORMAT} (or its {CATALOG} is missing).")
    return manifest


def restore_lake(source: Path, store: WarehouseStore, *, journal: Path) -> BackupReport:
    """Put a backup's catalog, files and journal where `store` and `journal` say, and point the catalog
    at the store's data folder. Refuses to overwrite anything: the lake, its data folder and the journal
    must not exist yet (or the folder be empty). What it copied is removed again when it fails."""
    started = datetime.now(UTC)
    catalog_file = require_local_sqlite(store, "lake restore")
    manifest = read_manifest(source)
    data = Path(store.data_path)
    if store.exists():
        raise ConfigurationError(
            f"A lake exists at {catalog_file}: restore into an empty data dir (--data-dir)."
        )
    if data.exists() and any(data.iterdir()):
        raise ConfigurationError(f"{data} already holds files: restore into an empty data dir (--data-dir).")
    if manifest["journal"] and journal.exists():
        raise ConfigurationError(f"A write-back journal exists at {journal}: restore into an empty data dir.")
    written: list[Path] = []
    try:
        catalog_file.parent.mkdir(parents=True, exist_ok=True)
        staged = catalog_file.with_name(catalog_file.name + ".restoring")
        written.append(staged)
        shutil.copy2(source / CATALOG, staged)
        with closing(sqlite3.connect(staged)) as catalog:
            names = sorted(set(referenced_files(catalog, catalog_data_path(catalog))))
            point_catalog_at(catalog, store.data_path)
        written += [data / name for name in names]
        size = _copy_files(names, source / FILES, data)
        if manifest["journal"]:
            journal.parent.mkdir(parents=True, exist_ok=True)
            written.append(journal)
            shutil.copy2(source / WRITEBACK_JOURNAL_FILE_NAME, journal)
            use_wal(journal)
        use_wal(staged)
        os.replace(staged, catalog_file)  # last: the lake exists only once it is whole
    except BaseException:
        for path in written:
            path.unlink(missing_ok=True)
        raise
    seconds = (datetime.now(UTC) - started).total_seconds()
    return BackupReport(source, len(names), size, bool(manifest["journal"]), seconds)
