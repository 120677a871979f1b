"""Shared fixtures: a REAL sandbox server over loopback (session-scoped, read-mostly) and a factory
for function-scoped servers (state mutation, short rate windows, faults)."""

from __future__ import annotations

import os
import subprocess
import sys
from collections.abc import Callable, Iterator
from datetime import UTC, datetime
from pathlib import Path

import pytest

FULL_KEY = "sbx_test_full_5f2b8c1d9e7a4b3c"
FULL_KEY_2 = "sbx_test_full_second_77aa11bb"
BASIC_KEY = "sbx_test_basic_0a9b8c7d6e5f"
REVOKED_KEY = "sbx_test_revoked_1122334455"
SEED = 7
SHIPMENTS = 60
# Every sandbox a test starts begins at this instant, never at "now": the simulated world follows its clock
# (holds appear and clear, vessels sail), so a world started at the wall clock differs from day to day.
SANDBOX_START = datetime(2026, 11, 1, tzinfo=UTC)


REPO = Path(__file__).resolve().parents[1]

# `postgres_server` (one real PostgreSQL + PostGIS a session) and `postgres_database` (a fresh one a test).
pytest_plugins = ["tests.postgres_server", "tests.s3_server"]

# Each holder prints "held" once it holds, then keeps holding until its stdin closes (`release`) or the
# seconds run out.
_HOLD_DUCKDB = """
import duckdb, select, sys
con = duckdb.connect(sys.argv[2], read_only=sys.argv[3] == "ro")
print("held", flush=True)
select.select([sys.stdin], [], [], float(sys.argv[1]))
"""
_HOLD_LAKE = """
import select, sys
from pipelines.warehouse.store import WarehouseStore

store = WarehouseStore(catalog=sys.argv[2], data_path=sys.argv[3])
if sys.argv[4] == "rw":
    with store.writing():
        print("held", flush=True)
        select.select([sys.stdin], [], [], float(sys.argv[1]))
else:
    with store.connect(read_only=True) as con:
        con.begin()  # an analyst's long transaction: it keeps reading the snapshot it began on
        tables = con.execute("select table_schema, table_name from information_schema.tables "
                             "where table_catalog = current_database() and table_type = 'BASE TABLE'").fetchall()
        for schema, table in tables:
            con.execute(f'select count(*) from {schema}."{table}"').fetchall()
        print("held", flush=True)
        select.select([sys.stdin], [], [], float(sys.argv[1]))
"""


def _holder(script: str, seconds: float, *args: str) -> subprocess.Popen:
    """Run `script` in another Python process and return once it says it holds what it holds."""
    holder = subprocess.Popen(
        [sys.executable, "-c", script, str(seconds), *args],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True, cwd=REPO,
    )  # fmt: skip
    assert holder.stdout.readline().strip() == "held"
    return holder


def hold_duckdb(path: Path, seconds: float, *, read_only: bool = False) -> subprocess.Popen:
    """Another process (an analyst, another run) holding the DuckDB file `path` for `seconds`; returns once
    it holds it. The caller kills it, waits for it, or lets it go with `release`."""
    return _holder(_HOLD_DUCKDB, seconds, str(path), "ro" if read_only else "rw")


def hold_lake(store, seconds: float, *, read_only: bool = False) -> subprocess.Popen:
    """Another process holding the DuckLake `store` for `seconds`; returns once it holds it. Writing (the
    default): a model run, a maintenance run or a publish, holding the one writer lock (`store.writing()`).
    `read_only`: an analyst's session, attached read-only with a transaction open. The caller kills it,
    waits for it, or lets it go with `release`."""
    return _holder(_HOLD_LAKE, seconds, store.catalog, store.data_path, "ro" if read_only else "rw")


def release(holder: subprocess.Popen) -> None:
    """Let a holder go as its owner would (it closes its session or lock and exits), and wait for it."""
    holder.stdin.close()
    assert holder.wait(30) == 0


def lake_in(data_dir: Path):
    """The DuckLake a process with `OCEAN_TRACKING_DATA_DIR=data_dir` uses by default (the suite's
    default warehouse): its SQLite catalog and data folder under `data_dir/ducklake`."""
    from pipelines.warehouse.store import default_lake_in

    return default_lake_in(data_dir)


@pytest.fixture(autouse=True)
def _data_dir_in_tmp(tmp_path, monkeypatch) -> None:
    """Every test's default data folder (the DuckLake, the write-back journal, exports) is `tmp_path/data`,
    never the repository's `data/`, for the test and the processes it starts, and a developer's warehouse
    settings are left out: `lake_in(tmp_path / "data")` is the warehouse a command run without a warehouse
    option writes."""
    from pipelines.settings import DATA_DIR_ENV
    from tests.e2e.conftest import WAREHOUSE_ENV

    monkeypatch.setenv(DATA_DIR_ENV, str(tmp_path / "data"))
    for name in WAREHOUSE_ENV:
        monkeypatch.delenv(name, raising=False)


def shared_dir() -> Path:
    """The shared reference dir: `<repo>/../shared`, or $OCEAN_TRACKING_SHARED_DIR."""
    env = os.environ.get("OCEAN_TRACKING_SHARED_DIR")
    return Path(env) if env else Path(__file__).resolve().parents[1].parent / "shared"


def _settings(**overrides):
    from sandbox.config import Settings

    base = dict(host="127.0.0.1", port=0, seed=SEED, shipments=SHIPMENTS, api_keys=[FULL_KEY, FULL_KEY_2],
                no_routing_keys=[BASIC_KEY], revoked_keys=[REVOKED_KEY], signing_secret="test-secret",
                start=SANDBOX_START)
    base.update(overrides)
    return Settings(**base)


def _world(settings):
    from sandbox.world import SimClock, World

    start = settings.start_time()
    return World(settings.seed, settings.shipments, start), SimClock(start, settings.speed)


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    """A session-wide server with generous limits (so the suite never trips them) and no faults."""
    from sandbox.server import SandboxServer

    settings = _settings(limits={"default": 100_000, "tracking_requests_create": 100_000,
                                 "infer_number": 100_000, "refresh": 100_000})
    server = SandboxServer(settings, *_world(settings)).start()
    yield server
    server.stop()


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., object]]:
    """Factory for fresh servers (own world, limits, faults); all are stopped after the test."""
    from sandbox.server import SandboxServer

    started = []

    def make(**overrides):
        settings = _settings(**overrides)
        server = SandboxServer(settings, *_world(settings)).start()
        started.append(server)
        return server

    yield make
    for s in started:
        s.stop()
