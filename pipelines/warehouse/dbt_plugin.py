"""The dbt-duckdb plugin of `sql/profiles.yml` (`Plugin`): DuckDB extensions offline, and the DuckLake attached.
A module of its own because dbt-duckdb loads it by name and its base class imports dbt (0.6 s): the runner
(`pipelines.warehouse.models`), and so every CLI command, imports dbt only when it builds.

dbt-duckdb's own `extensions:` setting runs `INSTALL <name>` (a download), which production hosts behind
firewalls and CI cannot do; its `attach:` setting cannot express the lake's catalog options. dbt-duckdb
calls a plugin's `configure_connection` on the connection it opens, before its own `attach:` entries, so
this plugin installs the bundled binaries (`install_bundled_extensions`), loads spatial, and,
on the `ducklake` target, attaches the lake with the same ATTACH statement every other writer uses
(`WarehouseStore.attach_sql`). The profile's `attach:` entry only tells dbt-duckdb the lake's name.

The lake: the one the runner names in the build's environment (`LAKE_CATALOG_ENV`, `LAKE_DATA_PATH_ENV`,
read when connecting, not when dbt parses), else the plugin config of the profile, for runs by hand:
`lake_catalog` and `lake_data_path` (empty: the configured or default lake, as `ducklake_store` resolves
it); without `lake_catalog` in the config the plugin attaches nothing (the `duckdb` target, a plain file). A lake whose files are in object storage gets the same S3 secret
dlt's loader creates (`create_storage_secret`), from the same dlt configuration keys.
"""

from __future__ import annotations

import os
from typing import Any

import duckdb
from dbt.adapters.duckdb.plugins import BasePlugin

from pipelines.settings import LAKE_NAME
from pipelines.warehouse import create_storage_secret, ducklake_store, is_remote
from pipelines.warehouse.connections import (
    OFFLINE_CONFIG,
    in_memory_config,
    install_bundled_extensions,
    load_spatial,
)
from pipelines.warehouse.models import LAKE_CATALOG_ENV, LAKE_DATA_PATH_ENV


class Plugin(BasePlugin):
    """Offline extensions for every DuckDB target, plus the lake's ATTACH on the `ducklake` target."""

    def initialize(self, plugin_config: dict[str, Any]) -> None:
        """Remember whether this target is the lake, and which one (empty values: the configured lake)."""
        self.attach_lake = "lake_catalog" in plugin_config
        self.lake_catalog = plugin_config.get("lake_catalog") or None
        self.lake_data_path = plugin_config.get("lake_data_path") or None

    def update_connection_config(self, creds: Any, config: dict[str, Any]) -> None:
        """Never let DuckDB download an extension (a missing one is a clear error instead), and write the
        way dlt's load connections do: the lake's Parquet row-group cap (`LAKE_WRITE_OPTIONS`, kept in its
        catalog) needs `preserve_insertion_order` off. The lake's target is an in-memory database: it spills into a
        folder of its own (`in_memory_config`)."""
        config.update(in_memory_config() if creds.path == ":memory:" else OFFLINE_CONFIG)
        config["preserve_insertion_order"] = False

    def configure_connection(self, conn: duckdb.DuckDBPyConnection) -> None:
        """Install the bundled extension binaries, load spatial, and attach the lake when this is its target."""
        install_bundled_extensions(conn)
        load_spatial(conn)
        if self.attach_lake:
            store = ducklake_store(os.environ.get(LAKE_CATALOG_ENV) or self.lake_catalog,
                                   os.environ.get(LAKE_DATA_PATH_ENV) or self.lake_data_path)  # fmt: skip
            store.create_folders()
            if is_remote(store.data_path):  # the lake's files in object storage: the secret dlt's loader uses
                create_storage_secret(conn, store.data_path)
            conn.execute(store.attach_sql(read_only=False))
            conn.execute(f"use {LAKE_NAME}")
