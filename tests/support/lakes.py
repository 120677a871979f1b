"""Lakes for the tests: where a data folder's lake is, a writable copy of one, and a fingerprint of its files
(what the shared states are checked against: a test that wrote into one is found at the end of the run)."""

from __future__ import annotations

import hashlib
import shutil
import sqlite3
from contextlib import closing
from pathlib import Path

from pipelines.settings import DUCKLAKE_DIR_NAME
from pipelines.warehouse import WarehouseStore, default_lake_in, table_row_counts
from pipelines.warehouse.maintenance import point_catalog_at

# Files a reader may create or touch beside a catalog without changing the lake: SQLite's WAL and shared
# memory, and the lock files writers take.
_NOT_CONTENT = ("-wal", "-shm", ".lock")


def lake_in(data_dir: Path) -> WarehouseStore:
    """The DuckLake a process with `OCEAN_TRACKING_DATA_DIR=data_dir` uses by default (the suite's
    default warehouse): its SQLite catalog and data folder under `data_dir/ducklake`."""
    return default_lake_in(data_dir)


def copy_lake(source_data_dir: Path, data_dir: Path) -> WarehouseStore:
    """A writable copy of the lake under `source_data_dir` as the lake of `data_dir`, and nothing else of that
    folder: the catalog and its Parquet files copied, then the copy's catalog pointed at its own files with
    `point_catalog_at` (what `lake restore` does). A copied catalog alone would still name the source's data
    path, so a write through the copy would land in the source's files; attaching it with another DATA_PATH
    is refused unless every attach (dlt's, the dbt plugin's, ours) adds OVERRIDE_DATA_PATH."""
    source, target = source_data_dir / DUCKLAKE_DIR_NAME, data_dir / DUCKLAKE_DIR_NAME
    shutil.copytree(source, target, ignore=shutil.ignore_patterns("*.lock"))  # a WAL is the catalog's too
    store = lake_in(data_dir)
    with closing(sqlite3.connect(store.catalog_file)) as catalog:
        point_catalog_at(catalog, store.data_path)
    return store


def checkpoint(store: WarehouseStore) -> None:
    """Move everything the catalog's WAL holds into its file (a state about to be shared is then whole in one
    file, and readers add nothing to it)."""
    with closing(sqlite3.connect(store.catalog_file)) as catalog:
        catalog.execute("pragma wal_checkpoint(truncate)")


def fingerprint(folder: Path) -> dict[str, str]:
    """Every file under `folder` (WAL, shared memory and lock files left out) by relative path, with the
    sha256 of its content."""
    return {
        str(path.relative_to(folder)): hashlib.sha256(path.read_bytes()).hexdigest()
        for path in sorted(folder.rglob("*"))
        if path.is_file() and not path.name.endswith(_NOT_CONTENT)
    }


def tables_and_rows(store: WarehouseStore, *schemas: str) -> dict[str, int]:
    """{"schema.table": rows} of every table and view in `schemas`: what two load paths are held equal by."""
    return {f"{schema}.{table}": rows for schema in schemas
            for table, rows in table_row_counts(store, schema, views=True).items()}
