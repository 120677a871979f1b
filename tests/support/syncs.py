"""Syncs for the tests: a client and a CLI process's environment pointed at a sandbox, one sync into the lake
of a work folder, and reading what it loaded."""

from __future__ import annotations

import os
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.settings import (
    DATASET_NAME,
    DESTINATION_ENV,
    DUCKDB_ENV,
    DUCKLAKE_CATALOG_ENV,
    DUCKLAKE_STORAGE_ENV,
)
from pipelines.source import TABLES
from pipelines.warehouse import WarehouseStore
from tests.support.lakes import lake_in
from tests.support.sandboxes import FULL_KEY, REPO

# The raw tables of entities the service lists (a full sync lands rows in each): those of a JSON:API type.
ENTITY_TABLES = tuple(name for name, table in TABLES.items() if table.jsonapi_type)
# How long a test waits for a CLI sync of the suite's world with its models: 21.5 s alone on 2 cores, and over 120 s
# on a CI machine twice as slow under the suite's load (stop 47). A hung sync fails on the client's timeouts first.
SYNC_TIMEOUT_SECONDS = 400
# Where a CLI process would otherwise load (a developer's shell may set them): `cli_env` leaves them out,
# so its sync goes to the default destination, `lake_in(workdir / "data")`.
WAREHOUSE_ENV = (DESTINATION_ENV, DUCKDB_ENV, DUCKLAKE_CATALOG_ENV, DUCKLAKE_STORAGE_ENV)


@dataclass
class SyncResult:
    """What one sync spent and where it wrote."""

    stats: dict[str, Any]
    store: WarehouseStore

    @property
    def workdir(self) -> Path:
        """The work folder of the lake (`workdir/data/ducklake/catalog.sqlite`), where `sync_once` also keeps
        the sync's dlt and limiter folders."""
        return Path(self.store.catalog_file).parents[2]

    def query(self, sql: str) -> list[tuple]:
        """Run SQL against the dataset (schema `ocean_tracking` is the search path), read-only."""
        with self.store.connect(read_only=True, search_path=(DATASET_NAME,)) as con:
            return con.execute(sql).fetchall()

    def scalar(self, sql: str) -> Any:
        """First column of the first row."""
        return self.query(sql)[0][0]

    @property
    def requests(self) -> int:
        """Requests sent in all buckets (retries included)."""
        return sum(self.stats["requests"].values())


def make_client(server, workdir: Path, *, key: str = FULL_KEY, window: float = 0.05, **overrides) -> OceanTrackingClient:
    """A client for `server` whose limiter matches the sandbox's (scaled) window and lives in workdir."""
    settings = load_settings(
        api_key=key,
        base_url=server.base_url,
        app_url=overrides.pop("app_url", server.app_url),
        rate_window_seconds=window,
        limiter_path=workdir / "limiter.sqlite",
        **overrides,
    )
    return OceanTrackingClient(settings)


def cli_env(base_url: str, workdir: Path, *, window: float = 0.05, **extra: str) -> dict[str, str]:
    """The environment of a `python -m pipelines ...` process pointed at a sandbox: the key and URL as
    variables (never on the command line), the rate window, and the limiter, dlt and data folders in
    `workdir` (so the default warehouse is the DuckLake `lake_in(workdir / "data")`)."""
    return {
        **{name: value for name, value in os.environ.items() if name not in WAREHOUSE_ENV},
        "SOURCES__OCEAN_TRACKING__API_KEY": FULL_KEY,
        "SOURCES__OCEAN_TRACKING__BASE_URL": base_url,
        "SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS": str(window),
        "SOURCES__OCEAN_TRACKING__LIMITER_PATH": str(workdir / "limiter.sqlite"),
        "DLT_DATA_DIR": str(workdir / "dlt-home"),
        "OCEAN_TRACKING_DATA_DIR": str(workdir / "data"),  # the lake and outputs (GeoParquet) stay out of the repo
        "PYTHONPATH": str(REPO),
        **extra,
    }


def sync_once(
    server,
    workdir: Path,
    *,
    key: str = FULL_KEY,
    window: float = 0.05,
    settings: dict[str, Any] | None = None,
    **source_args,
) -> SyncResult:
    """One full sync of `server` into the DuckLake under `workdir/data` (where `cli_env` points a CLI
    process too) with a pipeline dir in workdir; `settings` overrides client settings (timeouts, attempts)."""
    from pipelines.sync import sync_account
    from pipelines.warehouse.destinations import ducklake_target

    target = ducklake_target(lake_in(workdir / "data"))
    with make_client(server, workdir, key=key, window=window, **(settings or {})) as client:
        result = sync_account(client, target, pipelines_dir=workdir / "dlt", models=False, **source_args)
        return SyncResult(result.api_stats, target.store)


def snapshot(result: SyncResult) -> dict[str, list[tuple]]:
    """Every entity row (dlt's load bookkeeping left out), nested holds and fees by their container,
    and the map features by (container, index), all ordered: equal snapshots mean equal warehouses."""
    tables = {
        table: result.query(f"select columns(c -> not starts_with(c, '_dlt_')) from {table} order by id")
        for table in ENTITY_TABLES
    }
    for nested in ("holds_at_pod_terminal", "fees_at_pod_terminal"):
        exists = result.scalar(
            f"select count(*) from information_schema.tables where table_name = 'containers__{nested}'"
        )
        if exists:
            tables[nested] = result.query(
                f"select c.id, n.* exclude (_dlt_parent_id, _dlt_id, _dlt_list_idx, _dlt_root_id) "
                f"from containers__{nested} n join containers c on c._dlt_id = n._dlt_parent_id order by all"
            )
    tables["map_features"] = result.query(
        "select container_id, feature_index, feature_type, geometry from map_features order by 1, 2"
    )
    return tables


def sync_command(*extra: str) -> list[str]:
    """`python -m pipelines sync` without the live progress line, plus `extra`."""
    return [sys.executable, "-m", "pipelines", "sync", "--no-progress", *extra]


def one_error_line(done: subprocess.CompletedProcess) -> str:
    """The one error line, which must end stderr (a notice of what the run waited for may precede it)."""
    assert done.returncode == 2, done.stdout + done.stderr
    lines = done.stderr.strip().splitlines()
    errors = [line for line in lines if line.startswith("error:")]
    assert len(errors) == 1 and lines[-1] == errors[0] and "Traceback" not in done.stderr, done.stderr
    return errors[0]


# What a sync says when it first finished the load a killed one left.
FINISHED_PENDING = "Finished the load an interrupted sync had left pending"
# dlt's working folder: extracted packages, packages being normalized, normalized (to load), loaded
STAGES = ("normalize/extracted", "load/new", "load/normalized", "load/loaded")


def packages_left(workdir: Path) -> tuple[int, ...]:
    """How many load packages dlt's working folder holds in each of `STAGES`."""
    (root,) = (workdir / "dlt").glob("*/ocean_tracking")
    return tuple(sum(1 for p in (root / stage).glob("*") if p.is_dir()) for stage in STAGES)
