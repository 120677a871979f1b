"""The write-back tests' fixtures: a sandbox of the test's own, a client, the journal (a SQLite file, then a
real PostgreSQL database) and the DuckLake the commands publish into."""

from __future__ import annotations

from pathlib import Path

import pytest

from pipelines.journals.writes import WritebackStore
from pipelines.warehouse import WarehouseStore
from tests.support.lakes import lake_in
from tests.support.syncs import make_client


@pytest.fixture
def server(own_sandbox):
    """The sandbox the batch writes to: the test's own (frozen clock, generous limits, no faults)."""
    return own_sandbox


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
    database (the session's real server, started only when a PostgreSQL case runs)."""
    if request.param == "sqlite":
        return tmp_path / "journal.sqlite"
    return request.getfixturevalue("postgres_database").dsn


@pytest.fixture
def store(journal_location):
    """The write-back journal, on each backend in turn (`store.rows(sql)` reads its tables by their bare names)."""
    journal = WritebackStore(journal_location)
    yield journal
    journal.close()
