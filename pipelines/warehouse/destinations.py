"""Where a sync loads: dlt destinations and the dlt pipeline around the `ocean_tracking` source.

The embedded default is a DuckLake (dlt's `ducklake` destination: a SQLite catalog and Parquet files
under `data/ducklake/`) that analysts query while the schedule writes; `duckdb` is the plain file
`data/warehouse.duckdb`. Both are a `WarehouseStore` the rest of the pipeline reads and writes through.
`destination="filesystem"` writes a Parquet lake (Delta tables, so merge keeps one row per id instead of
silently appending); any other dlt destination name works with dlt's own configuration
(`DESTINATION__<NAME>__CREDENTIALS`, ...).
"""

from __future__ import annotations

import difflib
import hashlib
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt
from dlt.common.pipeline import get_dlt_pipelines_dir

from pipelines import compat, settings
from pipelines.errors import ConfigurationError
from pipelines.settings import DATASET_NAME, INTERNAL_STAGING_LAYOUT, LAKE_NAME, lake_url
from pipelines.warehouse.extensions import OFFLINE_CONFIG, ensure_bundled_extensions
from pipelines.warehouse.postgres_catalog import as_url
from pipelines.warehouse.store import WarehouseStore, duckdb_store, ducklake_store

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
    # credentials dlt resolves from its own keys (`..._STORAGE__CREDENTIALS__*`), as `storage.py` does
    credentials = DuckLakeCredentials(
        LAKE_NAME, metadata_schema=store.metadata_schema, catalog=catalog, storage=store.data_path
    )
    # dlt's loader connections: never download an extension (they are installed from the wheels); row
    # order is never relied on, and keeping it costs the merges memory; one thread, so one row group is
    # buffered per data file written (a full 10k-shipment load peaked at 714 MiB with two, 595 MiB with
    # one, about as fast); a memory limit when configured
    credentials.global_config = {**OFFLINE_CONFIG, "preserve_insertion_order": False, "threads": 1}
    if memory_limit := settings.loader_memory_limit():
        credentials.global_config["memory_limit"] = memory_limit
    return Target(dlt.destinations.ducklake(credentials=credentials), dataset_name, store=store)


def duckdb_target(path: str | Path | None = None, dataset_name: str = DATASET_NAME) -> Target:
    """The plain DuckDB file option (its folder is created): one process at a time."""
    store = duckdb_store(path)
    store.duckdb_file.parent.mkdir(parents=True, exist_ok=True)
    return Target(dlt.destinations.duckdb(str(store.duckdb_file)), dataset_name, store=store)


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
