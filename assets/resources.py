"""Dagster resources: the tracking API (one client config for ingest and write-back) and the warehouse.

The API key reaches Dagster only as `EnvVar("SOURCES__OCEAN_TRACKING__API_KEY")`: Dagster shows the
variable's name in the UI and run config, never its value.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
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
    default_destination,
    duckdb_path,
)

if TYPE_CHECKING:
    from pipelines.api.client import OceanTrackingClient
    from pipelines.warehouse.destinations import Target
    from pipelines.warehouse.store import WarehouseStore

# One pool for everything that spends the account's rate budget or writes the warehouse: two runs never
# split the budget or race a commit (the warehouse's writer lock also keeps out a CLI sync). Readers
# (checks, maps) are not in it. Its limit (1) lives in dagster.yaml.
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
    """The embedded warehouse the raw dataset and the analytics models live in: the DuckLake (default;
    analysts read while runs write) or a plain DuckDB file (`destination: duckdb`)."""

    destination: str = default_destination()
    catalog: str = ""  # the lake's catalog URL; empty: dlt's configuration, else data/ducklake/catalog.sqlite
    data_path: str = ""  # the lake's data path; empty: dlt's configuration, else data/ducklake/files
    duckdb_path: str = str(duckdb_path())
    dataset_name: str = DATASET_NAME
    analytics_schema: str = ANALYTICS_SCHEMA

    def store(self) -> WarehouseStore:
        """Where the warehouse lives and how to open it (`pipelines.warehouse.store`)."""
        from pipelines.warehouse.store import ducklake_store, embedded_store

        if self.destination == "ducklake":
            return ducklake_store(self.catalog or None, self.data_path or None)
        return embedded_store(self.destination, self.duckdb_path if self.destination == "duckdb" else None)

    def target(self) -> Target:
        """The dlt target for ingest (creates the folder)."""
        from pipelines.warehouse.destinations import duckdb_target, ducklake_target

        store = self.store()
        if store.is_lake:
            return ducklake_target(store, self.dataset_name)
        return duckdb_target(store.duckdb_file, self.dataset_name)

    @contextmanager
    def connect(self, read_only: bool = False) -> Iterator[duckdb.DuckDBPyConnection]:
        """A session with the spatial extension loaded and the raw dataset and the models on the search
        path. Writers open it inside `writing()`."""
        with self.store().connect(read_only=read_only, search_path=(self.dataset_name, self.analytics_schema)) as con:
            yield con

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the warehouse's one writer lock (a DuckDB file is its own): see `WarehouseStore.writing`."""
        with self.store().writing():
            yield
