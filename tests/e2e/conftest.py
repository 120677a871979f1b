"""Helpers for whole-flow tests: a client pointed at a sandbox, one sync into a DuckLake, reads back."""

from __future__ import annotations

import os
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
import requests

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.settings import (
    DATASET_NAME,
    DESTINATION_ENV,
    DUCKDB_ENV,
    DUCKLAKE_CATALOG_ENV,
    DUCKLAKE_STORAGE_ENV,
)
from pipelines.sync import sync_account
from pipelines.warehouse.destinations import ducklake_target
from pipelines.warehouse.store import WarehouseStore
from tests.conftest import FULL_KEY, SANDBOX_START, lake_in


@dataclass
class SyncResult:
    """What one sync spent and where it wrote."""

    stats: dict[str, Any]
    store: WarehouseStore

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


def make_client(server, workdir: Path, *, key: str = FULL_KEY, window: float = 0.05, **overrides):
    """A client for `server` whose limiter matches the sandbox's (scaled) window and lives in workdir."""
    settings = load_settings(
        api_key=key,
        base_url=server.base_url,
        app_url=server.app_url,
        rate_window_seconds=window,
        limiter_path=workdir / "limiter.sqlite",
        **overrides,
    )
    return OceanTrackingClient(settings)


# Where a CLI process would otherwise load (a developer's shell may set them): `cli_env` leaves them out,
# so its sync goes to the default destination, `lake_in(workdir / "data")`.
WAREHOUSE_ENV = (DESTINATION_ENV, DUCKDB_ENV, DUCKLAKE_CATALOG_ENV, DUCKLAKE_STORAGE_ENV)


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
        "PYTHONPATH": str(Path(__file__).resolve().parents[2]),
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
    target = ducklake_target(lake_in(workdir / "data"))
    with make_client(server, workdir, key=key, window=window, **(settings or {})) as client:
        result = sync_account(client, target, pipelines_dir=workdir / "dlt", models=False, **source_args)
        return SyncResult(result.api_stats, target.store)


def advance_clock(server, seconds: float) -> None:
    """Move the sandbox's simulated clock forward."""
    response = requests.post(f"{server.root_url}/_sandbox/clock", json={"advance_seconds": seconds}, timeout=10)
    response.raise_for_status()


def sandbox_stats(server) -> dict[str, Any]:
    """The sandbox's own counters (requests per key fingerprint and bucket, 429s, faults)."""
    return requests.get(f"{server.root_url}/_sandbox/stats", timeout=10).json()


def requests_served(server) -> int:
    """Requests the sandbox received so far, under every key and bucket."""
    return sum(sum(buckets.values()) for buckets in sandbox_stats(server)["requests_by_key"].values())


def api_total(server, path: str, key: str = FULL_KEY) -> int:
    """The service's own count of a list endpoint, read from `meta.total`."""
    response = requests.get(
        f"{server.base_url}{path}", params={"page[size]": 1}, headers={"Authorization": f"Token {key}"}, timeout=10
    )
    response.raise_for_status()
    return response.json()["meta"]["total"]


ENTITY_TABLES = (
    "shipments",
    "containers",
    "transport_events",
    "tracking_requests",
    "parties",
    "terminals",
    "ports",
    "vessels",
    "shipping_lines",
    "custom_field_definitions",
    "custom_fields",
)
FROZEN_START = SANDBOX_START
GENEROUS_LIMITS = {"default": 100_000, "tracking_requests_create": 100_000, "infer_number": 100_000, "refresh": 100_000}


@pytest.fixture
def fresh_sandbox(make_sandbox):
    """A sandbox of our own with generous limits and a frozen clock: only the test moves time, so two
    syncs a few seconds apart see the same world unless the test says otherwise."""
    return make_sandbox(limits=GENEROUS_LIMITS, start=FROZEN_START, speed=0.0)
