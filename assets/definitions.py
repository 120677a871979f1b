"""The Dagster code location: `dagster dev` at the project root loads it (`[tool.dagster]` in pyproject).

Environment (all optional except the key, which is read only when a run talks to the API):
`SOURCES__OCEAN_TRACKING__API_KEY`, `SOURCES__OCEAN_TRACKING__BASE_URL`, `SOURCES__OCEAN_TRACKING__APP_URL`,
`SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS`, `OCEAN_TRACKING_DUCKDB` (the warehouse file),
`OCEAN_TRACKING_PIPELINES_DIR` (dlt working folders). A variable that is set reaches Dagster as
`dg.EnvVar` (the UI shows its name, not its value); an unset one falls back to the default.
"""

import os

import dagster as dg
from dagster_dlt import DagsterDltResource

from assets.checks import ingest_checks
from assets.ingest import ocean_tracking_assets
from assets.maps import map_assets
from assets.models import model_assets, model_checks
from assets.resources import API_KEY_ENV, OceanTrackingApi, Warehouse
from assets.schedules import (
    build_refresh_schedule,
    current_plan,
    full_sync_job,
    full_sync_schedule,
    refresh_job,
)
from assets.sensors import follow_up_job, pending_tracking_requests_sensor
from assets.writeback import writeback_jobs
from pipelines.config import DEFAULT_APP_URL, DEFAULT_BASE_URL
from pipelines.pipeline import DEFAULT_DUCKDB_PATH

BASE_URL_ENV = "SOURCES__OCEAN_TRACKING__BASE_URL"
APP_URL_ENV = "SOURCES__OCEAN_TRACKING__APP_URL"
RATE_WINDOW_ENV = "SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS"
DUCKDB_ENV = "OCEAN_TRACKING_DUCKDB"


def env_or(name: str, default: str):
    """`dg.EnvVar(name)` when the variable is set (resolved at run time, shown by name), else the
    default: EnvVar has no default of its own and fails on an unset variable."""
    return dg.EnvVar(name) if os.environ.get(name) else default


def build_resources() -> dict[str, dg.ConfigurableResource]:
    """The shared resources, configured from the environment."""
    rate_window = float(os.environ.get(RATE_WINDOW_ENV) or 60.0)
    return {
        "ocean_tracking_api": OceanTrackingApi(
            api_key=dg.EnvVar(API_KEY_ENV),
            base_url=env_or(BASE_URL_ENV, DEFAULT_BASE_URL),
            app_url=env_or(APP_URL_ENV, DEFAULT_APP_URL),
            rate_window_seconds=rate_window,
        ),
        "warehouse": Warehouse(duckdb_path=env_or(DUCKDB_ENV, str(DEFAULT_DUCKDB_PATH))),
        "dlt": DagsterDltResource(),
    }


resources = build_resources()
# The refresh cron is planned from the warehouse the definitions point at (read-only, at load).
_plan, _plan_source = current_plan(Warehouse(duckdb_path=os.environ.get(DUCKDB_ENV) or str(DEFAULT_DUCKDB_PATH)))
refresh_schedule = build_refresh_schedule(_plan, _plan_source)

defs = dg.Definitions(
    assets=[ocean_tracking_assets, *model_assets, *map_assets],
    asset_checks=[*ingest_checks, *model_checks],
    jobs=[full_sync_job, refresh_job, follow_up_job, *writeback_jobs],
    schedules=[full_sync_schedule, refresh_schedule],
    sensors=[pending_tracking_requests_sensor],
    resources=resources,
)
