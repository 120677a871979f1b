"""Dagster resources: the tracking API (one client config for ingest and write-back) and the warehouse.

The API key reaches Dagster only as `EnvVar("SOURCES__OCEAN_TRACKING__API_KEY")`: Dagster shows the
variable's name in the UI and run config, never its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING

import dagster as dg
import duckdb

from pipelines.settings import (
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    DATASET_NAME,
    DEFAULT_APP_URL,
    DEFAULT_BASE_URL,
    RATE_WINDOW_SECONDS,
    duckdb_path,
)
from pipelines.warehouse.tables import connect

if TYPE_CHECKING:
    from pipelines.api.client import OceanTrackingClient
    from pipelines.warehouse.destinations import Target

# One pool for everything that spends the account's rate budget or writes the DuckDB file: two runs
# never split the budget or fight over DuckDB's single writer. Its limit (1) lives in dagster.yaml.
OCEAN_TRACKING_POOL = "ocean_tracking"


class OceanTrackingApi(dg.ConfigurableResource):
    """Where the tracking API is and how to reach it; `client()` builds the one HTTP client."""

    api_key: str = dg.EnvVar(API_KEY_ENV)
    base_url: str = DEFAULT_BASE_URL
    app_url: str = DEFAULT_APP_URL
    rate_window_seconds: float = RATE_WINDOW_SECONDS

    def client(self) -> OceanTrackingClient:
        """A client with the host-wide limiter (shared by every step process of every run)."""
        # dlt's HTTP client comes with it: imported when a run needs it, not when the definitions load
        from pipelines.api.client import OceanTrackingClient
        from pipelines.api.config import load_settings

        settings = load_settings(
            api_key=self.api_key,
            base_url=self.base_url,
            app_url=self.app_url,
            rate_window_seconds=self.rate_window_seconds,
        )
        return OceanTrackingClient(settings)


class Warehouse(dg.ConfigurableResource):
    """The DuckDB file the raw dataset and the analytics models live in."""

    duckdb_path: str = str(duckdb_path())
    dataset_name: str = DATASET_NAME
    analytics_schema: str = ANALYTICS_SCHEMA

    @property
    def path(self) -> Path:
        """The DuckDB file as a Path."""
        return Path(self.duckdb_path)

    def target(self) -> Target:
        """The dlt target for ingest (creates the folder)."""
        from pipelines.warehouse.destinations import duckdb_target

        return duckdb_target(self.path, self.dataset_name)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A DuckDB connection with the spatial extension loaded and the raw dataset and the models on
        the search path."""
        with connect(self.path, read_only=read_only, search_path=(self.dataset_name, self.analytics_schema)) as con:
            yield con
