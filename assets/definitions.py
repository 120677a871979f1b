"""The Dagster code location `ocean_tracking`: `assets/` is the project's defs folder (`[tool.dg]` in
pyproject.toml, which `dg`, `dagster dev`, `dagster-daemon run` and `dagster-webserver` started at the
project root all read), and this module, `[tool.dg.project]`'s `code_location_target_module`, is its entry:
the folder's definitions (`dg.load_from_defs_folder`: every module-level asset, check, job, schedule and
sensor of each module, an object imported by several modules counted once) with the resources and the
executor. The location is named in `[tool.dg.project]`, not after the folder the repository lies in.

This module is one of the folder's own: the folder is loaded while it is being imported, so it contributes
what it defines above that call (classes and functions, no definition); `dg list defs` and `dg check defs`
load the location through this module as every Dagster process does.

Loading it reads no database, writes no file and opens no connection: resources read the environment
lazily, the refresh schedule plans its cadence at each tick, and the models come from the dbt manifest
`sql/target/manifest.json` that `dbt parse --project-dir sql --profiles-dir sql` made at setup
(`scripts/bootstrap.sh`); without it loading fails with one line saying so.

Environment (all optional except the key, which is read only when a run talks to the API):
`SOURCES__OCEAN_TRACKING__API_KEY`, `SOURCES__OCEAN_TRACKING__BASE_URL`, `SOURCES__OCEAN_TRACKING__APP_URL`,
`SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS`, `OCEAN_TRACKING_DESTINATION` (`ducklake`, the default,
or `duckdb`), `DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG` and `..._STORAGE__BUCKET_URL` (the lake's
catalog and data path), `OCEAN_TRACKING_DUCKDB` (the file when the destination is `duckdb`),
`OCEAN_TRACKING_DATA_DIR` (outputs), `OCEAN_TRACKING_PIPELINES_DIR` (dlt working folders). A variable
that is set reaches Dagster as `dg.EnvVar` (the UI shows its name, not its value); an unset one falls
back to the default. `OCEAN_TRACKING_ACCOUNTS` (names, comma-separated) partitions the assets by account, each
with its own key variable instead of the shared one: see `assets.accounts`.
"""

import os
from pathlib import Path

import dagster as dg

from assets.accounts import account_partitions
from assets.resources import OceanTrackingApi, Warehouse
from pipelines.settings import (
    API_KEY_ENV,
    APP_URL_ENV,
    BASE_URL_ENV,
    DEFAULT_APP_URL,
    DEFAULT_BASE_URL,
    DESTINATION_ENV,
    DUCKDB_ENV,
    RATE_WINDOW_ENV,
    RATE_WINDOW_SECONDS,
    default_destination,
    duckdb_path,
)


def env_or(name: str, default: str):
    """`dg.EnvVar(name)` when the variable is set (resolved at run time, shown by name), else the
    default: EnvVar has no default of its own and fails on an unset variable."""
    return dg.EnvVar(name) if os.environ.get(name) else default


def build_resources() -> dict[str, dg.ConfigurableResource]:
    """The shared resources, configured from the environment. With several accounts the API resource holds no
    key: each account's is read by its own runs (`OceanTrackingApi.client`), so an account whose key is
    missing fails its runs only."""
    return {
        "ocean_tracking_api": OceanTrackingApi(
            api_key=dg.EnvVar(API_KEY_ENV) if account_partitions is None else None,
            base_url=env_or(BASE_URL_ENV, DEFAULT_BASE_URL),
            app_url=env_or(APP_URL_ENV, DEFAULT_APP_URL),
            rate_window_seconds=float(os.environ.get(RATE_WINDOW_ENV) or RATE_WINDOW_SECONDS),
        ),
        "warehouse": Warehouse(
            destination=env_or(DESTINATION_ENV, default_destination()),
            duckdb_path=env_or(DUCKDB_ENV, str(duckdb_path())),
        ),
    }


defs = dg.Definitions.merge(
    # every asset, check, job, schedule and sensor the modules of this folder define, each taken once
    dg.load_from_defs_folder(path_within_project=Path(__file__).parent),
    dg.Definitions(
        resources=build_resources(),
        # Every run (scheduled, sensor, automation, UI) executes its steps in the run worker's one process:
        # the code location is imported once a run, not once a step, and steps share it one after the other,
        # which the one-slot pool and the writer lock required anyway (see BENCHMARKS.md, daemon runs).
        executor=dg.in_process_executor,
    ),
)
