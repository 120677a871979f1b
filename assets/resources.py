"""Dagster resources: the tracking API (one client config for ingest and write-back) and the warehouse.

The API key reaches Dagster only as `EnvVar("SOURCES__OCEAN_TRACKING__API_KEY")`: Dagster shows the
variable's name in the UI and run config, never its value. With several accounts (`assets.accounts`) the
resource holds no key: each account's is read when a run of that account builds its client, from the
account's own variable or secrets table (`pipelines.api.config.load_settings`), so a missing key fails only
that account's runs. Both resources take the account a step works for (`client(account)`,
`for_account(account)`); the single account `Account()` is what they did before accounts existed.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

import dagster as dg
import duckdb
from pydantic import Field

from assets.accounts import SINGLE_ACCOUNT
from pipelines.settings import (
    ANALYTICS_SCHEMA,
    API_KEY_ENV,
    DATASET_NAME,
    DEFAULT_APP_URL,
    DEFAULT_BASE_URL,
    ENV_PREFIX,
    RATE_WINDOW_SECONDS,
    Account,
    default_destination,
    duckdb_path,
)

if TYPE_CHECKING:
    from pipelines.api.client import OceanTrackingClient
    from pipelines.warehouse import WarehouseStore
    from pipelines.warehouse.destinations import Target

# One pool for everything that spends the account's rate budget or writes the warehouse: two runs never
# split the budget or race a commit (the warehouse's writer lock also keeps out a CLI sync). Readers
# (checks, maps) are not in it. Its limit (1) lives in dagster.yaml.
OCEAN_TRACKING_POOL = "ocean_tracking"
# The files made from the warehouse (the GeoParquet, the PNG maps, the team page): one run at a time writes
# them, in a pool of their own, so a webhook refresh never waits for a drawing (on the lake a reader never
# waits for a writer; on the plain DuckDB file it waits for the writer's file, bounded).
EXPORTS_POOL = "ocean_tracking_exports"


class OceanTrackingApi(dg.ConfigurableResource):
    """Where the tracking API is and how to reach it; `client()` builds the one HTTP client."""

    api_key: str | None = Field(
        default=dg.EnvVar(API_KEY_ENV),
        description=f"The single account's key, as the variable {API_KEY_ENV}. None with several accounts: "
        f"each account's key is read when its run starts, from {ENV_PREFIX}ACCOUNTS__<NAME>__API_KEY.",
    )
    base_url: str = DEFAULT_BASE_URL
    app_url: str = DEFAULT_APP_URL
    rate_window_seconds: float = RATE_WINDOW_SECONDS

    def setting(self, name: str, account: Account = SINGLE_ACCOUNT) -> Any:
        """A non-secret setting (`base_url`, `app_url`, `rate_window_seconds`) for `account`: the resource's
        for the single account; for a named one its own override, else the shared section, else the
        resource's (`lookup_setting` reads them the dlt way)."""
        if account.name is None:
            return getattr(self, name)
        from pipelines.api.config import lookup_setting

        own = lookup_setting(name, account=account)
        return getattr(self, name) if own is None else own

    def client(self, account: Account = SINGLE_ACCOUNT) -> OceanTrackingClient:
        """A client with the host-wide limiter (shared by every step process of every run), holding the key
        of `account` (its own rate budget: the limiter is keyed by the key)."""
        # dlt's HTTP client comes with it: imported when a run needs it, not when the definitions load
        from pipelines.api.client import OceanTrackingClient
        from pipelines.api.config import load_settings

        settings = load_settings(
            api_key=self.api_key if account.name is None else None,
            base_url=self.setting("base_url", account),
            app_url=self.setting("app_url", account),
            rate_window_seconds=self.setting("rate_window_seconds", account),
            account=account,
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

    def for_account(self, account: Account = SINGLE_ACCOUNT) -> Warehouse:
        """This warehouse seen by `account`: its raw dataset and its models schema (the same resource for the
        single account), so every reader and writer taking a `Warehouse` works on the account's tables."""
        if account.name is None:
            return self
        return Warehouse(destination=self.destination, catalog=self.catalog, data_path=self.data_path,
                         duckdb_path=self.duckdb_path, dataset_name=account.dataset_name,
                         analytics_schema=account.analytics_schema)

    def store(self) -> WarehouseStore:
        """Where the warehouse lives and how to open it (`pipelines.warehouse`)."""
        from pipelines.warehouse import ducklake_store, embedded_store

        if self.destination == "ducklake":
            return ducklake_store(self.catalog or None, self.data_path or None)
        return embedded_store(self.destination, self.duckdb_path if self.destination == "duckdb" else None)

    def target(self, account: Account = SINGLE_ACCOUNT) -> Target:
        """The dlt target for ingest into the dataset of `account` (creates the folder)."""
        from pipelines.warehouse.destinations import duckdb_target, ducklake_target

        dataset_name = self.for_account(account).dataset_name
        store = self.store()
        if store.is_lake:
            return ducklake_target(store, dataset_name)
        return duckdb_target(store.duckdb_file, dataset_name)

    @contextmanager
    def connect(self, read_only: bool = False, account: Account = SINGLE_ACCOUNT) -> Iterator[duckdb.DuckDBPyConnection]:
        """A session with the spatial extension loaded and the raw dataset and the models of `account` on
        the search path. Writers open it inside `writing()`."""
        seen = self.for_account(account)
        with self.store().connect(read_only=read_only, search_path=(seen.dataset_name, seen.analytics_schema)) as con:
            yield con

    @contextmanager
    def writing(self) -> Iterator[None]:
        """Hold the warehouse's one writer lock (a DuckDB file is its own): see `WarehouseStore.writing`."""
        with self.store().writing():
            yield
