"""Fixtures for write-back tests: an isolated sandbox (frozen clock, generous limits), a client, a store (its
journal a SQLite file, then a real PostgreSQL database), the DuckLake the commands publish into, and helpers
that flip the sandbox's fault profile and read its own counters."""

from __future__ import annotations

from pathlib import Path

import pytest
import requests

from pipelines.warehouse.store import WarehouseStore
from pipelines.writeback.store import WritebackStore
from tests.conftest import FULL_KEY, lake_in
from tests.e2e.conftest import FROZEN_START, GENEROUS_LIMITS, make_client


@pytest.fixture
def server(make_sandbox):
    """A sandbox of our own: generous limits, frozen clock (only tests move time), no faults."""
    return make_sandbox(limits=GENEROUS_LIMITS, start=FROZEN_START, speed=0.0)


@pytest.fixture
def client(server, tmp_path):
    """A client for `server` with its limiter in tmp_path; 0.2 s backoff keeps retries quick."""
    with make_client(server, tmp_path, backoff_factor=0.2) as c:
        yield c


@pytest.fixture
def lake(tmp_path) -> WarehouseStore:
    """The DuckLake a write-back command (CLI or Dagster job) run in this test looks up in and publishes
    into: the default warehouse of `tmp_path/data`."""
    return lake_in(tmp_path / "data")


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_location(request: pytest.FixtureRequest, tmp_path) -> Path | str:
    """Where a test's write-back journal lives: `tmp_path/journal.sqlite`, or the URL of a fresh PostgreSQL
    database (the real server of `tests.postgres_server`, started only when a PostgreSQL case runs)."""
    if request.param == "sqlite":
        return tmp_path / "journal.sqlite"
    return request.getfixturevalue("postgres_database").dsn


@pytest.fixture
def store(journal_location):
    """The write-back journal, on each backend in turn (`store.rows(sql)` reads its tables by their bare names)."""
    journal = WritebackStore(journal_location)
    yield journal
    journal.close()


def set_faults(server, profile: str, rate: float = 1.0, seed: int = 0) -> None:
    """Switch the sandbox's fault profile at runtime (control endpoint, never faulted itself)."""
    response = requests.post(f"{server.root_url}/_sandbox/faults",
                             json={"profile": profile, "rate": rate, "seed": seed}, timeout=10)
    response.raise_for_status()


def routes(server) -> dict[str, int]:
    """Requests the sandbox handled per route (injected faults never reach a handler, so a route count is
    the number of times the service really processed that call)."""
    return requests.get(f"{server.root_url}/_sandbox/stats", timeout=10).json()["requests_by_route"]


def api_get(server, path: str, **params) -> dict:
    """A raw GET on the sandbox API (independent of the client under test)."""
    response = requests.get(f"{server.base_url}{path}", params=params,
                            headers={"Authorization": f"Token {FULL_KEY}"}, timeout=10)
    response.raise_for_status()
    return response.json()


def tracking_count(server, number: str) -> int:
    """How many tracking requests the service holds for one request_number."""
    return api_get(server, "/tracking_requests", **{"filter[request_number]": number})["meta"]["total"]
