"""Dagster resources: the tracking API (one client config for ingest and write-back) and the warehouse.

The API key reaches Dagster only as `EnvVar("SOURCES__OCEAN_TRACKING__API_KEY")`: Dagster shows the
variable's name in the UI and run config, never its value.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path

import dagster as dg
import duckdb

from pipelines.client import OceanTrackingClient
from pipelines.config import DEFAULT_APP_URL, DEFAULT_BASE_URL, load_settings
from pipelines.pipeline import DATASET_NAME, DEFAULT_DUCKDB_PATH, Target, duckdb_target
from pipelines.spatial import load_spatial

# One pool for everything that spends the account's rate budget or writes the DuckDB file: two runs
# never split the budget or fight over DuckDB's single writer. Its limit (1) lives in dagster.yaml.
OCEAN_TRACKING_POOL = "ocean_tracking"
API_KEY_ENV = "SOURCES__OCEAN_TRACKING__API_KEY"
ANALYTICS_SCHEMA = "analytics"


class OceanTrackingApi(dg.ConfigurableResource):
    """Where the tracking API is and how to reach it; `client()` builds the one HTTP client."""

    api_key: str = dg.EnvVar(API_KEY_ENV)
    base_url: str = DEFAULT_BASE_URL
    app_url: str = DEFAULT_APP_URL
    rate_window_seconds: float = 60.0

    def client(self) -> OceanTrackingClient:
        """A client with the host-wide limiter (shared by every step process of every run)."""
        settings = load_settings(
            api_key=self.api_key,
            base_url=self.base_url,
            app_url=self.app_url,
            rate_window_seconds=self.rate_window_seconds,
        )
        return OceanTrackingClient(settings)


class Warehouse(dg.ConfigurableResource):
    """The DuckDB file the raw dataset and the analytics models live in."""

    duckdb_path: str = str(DEFAULT_DUCKDB_PATH)
    dataset_name: str = DATASET_NAME
    analytics_schema: str = ANALYTICS_SCHEMA

    @property
    def path(self) -> Path:
        """The DuckDB file as a Path."""
        return Path(self.duckdb_path)

    def target(self) -> Target:
        """The dlt target for ingest (creates the folder)."""
        return duckdb_target(self.path, self.dataset_name)

    @contextmanager
    def connect(self, read_only: bool = False):
        """A DuckDB connection with the spatial extension loaded and the raw dataset on the search path."""
        self.path.parent.mkdir(parents=True, exist_ok=True)
        con = duckdb.connect(str(self.path), read_only=read_only)
        try:
            load_spatial(con)
            # only schemas that exist: DuckDB refuses a search path naming a missing one, and a read-only
            # connection cannot create it (checks run before the first model builds `analytics`)
            existing = {row[0] for row in con.execute("select schema_name from information_schema.schemata").fetchall()}
            path = [s for s in (self.dataset_name, self.analytics_schema) if s in existing]
            if path:
                con.execute(f"set search_path = '{','.join(path)}'")
            yield con
        finally:
            con.close()
