"""The fixtures every test may ask for; the helpers tests import live in `tests/support/` (nothing imports a
conftest module).

- isolation, for every test (`_isolated`): every host-wide place a run touches is the test's own;
- the session's sandbox (`sandbox`, one per worker, frozen) and a sandbox of a test's own (`own_sandbox`, the
  same world; `make_sandbox` for other faults, limits, keys or clocks);
- states built once for the whole run, read-only (`synced`: one sync of that world into a lake; `built`: the
  models built over a copy of it), and a writable copy for a test that changes it (`synced_copy`);
- real servers: PostgreSQL + PostGIS (`postgres_server`, `postgres_database`), S3 (`s3_server`, `s3_bucket`);
- a throwaway Dagster instance (`dagster_instance`).
"""

from __future__ import annotations

import json
import os
import tempfile
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest

from tests.support import postgres, s3
from tests.support.dagster import APP_URL, BuiltWarehouse, materialize_models
from tests.support.lakes import checkpoint, copy_lake, lake_in
from tests.support.sandboxes import (
    FROZEN_WORLD,
    HISTORY_STEP_SECONDS,
    HISTORY_SYNCS,
    HISTORY_WORLD,
    advance_clock,
    sandbox_server,
    start_sandbox,
)
from tests.support.shared import changed_files, shared_state
from tests.support.suite_order import MODULE_SECONDS, longest_modules_first
from tests.support.syncs import SyncResult, sync_once


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """A `serial` test says why it must run alone (`@pytest.mark.serial(reason=...)`): the mark is a cost (the
    whole machine for one test), so it is never given without a reason. Then the modules are ordered longest
    first (`longest_modules_first`)."""
    for item in items:
        for mark in item.iter_markers("serial"):
            if not mark.kwargs.get("reason"):
                raise pytest.UsageError(f"{item.nodeid}: pytest.mark.serial needs reason='why it must run alone'")
    items[:] = longest_modules_first(items, json.loads(MODULE_SECONDS.read_text()) if MODULE_SECONDS.exists() else {})


# Settings a developer's shell may carry that would point a test's runs elsewhere: left out of the whole run.
_OUR_PREFIXES = ("OCEAN_TRACKING_", "SOURCES__OCEAN_TRACKING__", "DESTINATION__")


def pytest_configure(config: pytest.Config) -> None:
    """Leave a developer's own settings (`_OUR_PREFIXES`) out of the run, once, before any fixture sets some."""
    for name in [name for name in os.environ if name.startswith(_OUR_PREFIXES)]:
        del os.environ[name]


@pytest.fixture(autouse=True)
def _isolated(tmp_path: Path, tmp_path_factory: pytest.TempPathFactory, monkeypatch: pytest.MonkeyPatch) -> None:
    """Every place a run writes outside its warehouse is the test's own, for the test and the processes it
    starts: the data folder (the default lake, the journals, GeoParquet, maps: `lake_in(tmp_path / "data")` is
    the warehouse a command run without a warehouse option writes), and, in a folder beside `tmp_path` (which
    stays the test's alone), the temporary folder (the default rate limiter's file and every in-memory DuckDB's
    spill folder live there), dlt's folder (its pipelines' working folders) and DAGSTER_HOME."""
    monkeypatch.setenv("OCEAN_TRACKING_DATA_DIR", str(tmp_path / "data"))
    own = tmp_path_factory.mktemp("host")
    (own / "tmp").mkdir()
    monkeypatch.setenv("TMPDIR", str(own / "tmp"))
    monkeypatch.setattr(tempfile, "tempdir", None)  # Python caches the temporary folder: ask again
    monkeypatch.setenv("DLT_DATA_DIR", str(own / "dlt"))
    (own / "dagster").mkdir()
    monkeypatch.setenv("DAGSTER_HOME", str(own / "dagster"))


# ---- sandboxes ----------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def sandbox() -> Iterator:
    """The session's sandbox (one per worker): the suite's world, frozen at its start instant, with limits no
    sync reaches and no faults. Tests only read it; a test that moves its clock or changes its world uses
    `own_sandbox` instead."""
    server = start_sandbox(**FROZEN_WORLD)
    yield server
    server.stop()


@pytest.fixture
def make_sandbox() -> Iterator[Callable[..., object]]:
    """Factory for sandboxes of the test's own (`tests.support.sandboxes.sandbox_settings` overrides: faults,
    limits, keys, clock); all are stopped after the test."""
    started = []

    def make(**overrides):
        server = start_sandbox(**overrides)
        started.append(server)
        return server

    yield make
    for server in started:
        server.stop()


@pytest.fixture
def own_sandbox(make_sandbox):
    """A sandbox of the test's own holding the session's world (frozen, generous limits): the test may move
    its clock or write to it, and a copy of the `synced` lake is this sandbox's lake."""
    return make_sandbox(**FROZEN_WORLD)


# ---- states built once, shared read-only ----------------------------------------------------------------


def _sync_the_suites_world(folder: Path) -> None:
    """One full sync (maps included, no models) of the suite's world into `folder/data`."""
    with sandbox_server(**FROZEN_WORLD) as server:
        result = sync_once(server, folder)
    checkpoint(result.store)
    (folder / "stats.json").write_text(json.dumps(result.stats))


@pytest.fixture(scope="session")
def synced(tmp_path_factory: pytest.TempPathFactory) -> Iterator[SyncResult]:
    """The suite's world synced once into a lake, for the whole run (every worker): read it, never write it
    (take `synced_copy` to write). Its `stats` are what that first sync spent."""
    folder = shared_state(tmp_path_factory, "synced", _sync_the_suites_world)
    yield SyncResult(json.loads((folder / "stats.json").read_text()), lake_in(folder / "data"))
    assert not changed_files(folder), f"a test wrote into the shared lake: {changed_files(folder)}"


@pytest.fixture
def synced_copy(synced: SyncResult, tmp_path: Path) -> SyncResult:
    """A writable copy of the `synced` lake as the test's own default lake (`tmp_path/data`, where a command
    the test runs loads without a warehouse option): `sync_once(own_sandbox, tmp_path)` continues from it as a
    second sync would."""
    return SyncResult(synced.stats, copy_lake(synced.workdir / "data", tmp_path / "data"))


def _build_every_model(folder: Path) -> None:
    """Every model built over the lake in `folder/data` by its Dagster assets, and what that run reported
    kept beside it (`BuiltWarehouse.record`)."""
    result = materialize_models(folder / "data", app_url=APP_URL)
    assert result.success
    checkpoint(lake_in(folder / "data"))
    BuiltWarehouse.record(folder, result)


@pytest.fixture(scope="session")
def built(synced: SyncResult, tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltWarehouse]:
    """The `synced` lake with every model built by its Dagster assets (dbt's tests run as their checks), for
    the whole run: read it, never write it (a test that writes works on its own `copy_lake`)."""

    def build(folder: Path) -> None:
        copy_lake(synced.workdir / "data", folder / "data")
        _build_every_model(folder)

    folder = shared_state(tmp_path_factory, "built", build)
    yield BuiltWarehouse(folder)
    assert not changed_files(folder), f"a test wrote into the shared models lake: {changed_files(folder)}"


@pytest.fixture(scope="session")
def history(tmp_path_factory: pytest.TempPathFactory) -> Iterator[BuiltWarehouse]:
    """A world watched over time, for the whole run (read it, never write it): HISTORY_WORLD synced
    HISTORY_SYNCS times, its clock moved between syncs (maps on the last one only: the route geometry is
    the latest), then every model built by its Dagster assets (dbt's tests as their checks). What the
    models that need history (ETA accuracy, the charge history, reliability) are tested on."""

    def build(folder: Path) -> None:
        with sandbox_server(**HISTORY_WORLD) as server:
            for done in range(1, HISTORY_SYNCS + 1):
                result = sync_once(server, folder, include_maps=done == HISTORY_SYNCS)
                if done < HISTORY_SYNCS:
                    advance_clock(server, HISTORY_STEP_SECONDS)
        checkpoint(result.store)
        _build_every_model(folder)

    folder = shared_state(tmp_path_factory, "history", build)
    yield BuiltWarehouse(folder)
    assert not changed_files(folder), f"a test wrote into the shared history lake: {changed_files(folder)}"


# ---- real servers ---------------------------------------------------------------------------------------


@pytest.fixture(scope="session")
def postgres_server() -> Iterator[postgres.PostgresServer]:
    """One real PostgreSQL + PostGIS server for the whole session, stopped and removed at its end."""
    server = postgres.start_server()
    try:
        yield server
    finally:
        postgres.stop_server(server.root)


@pytest.fixture
def postgres_database(postgres_server: postgres.PostgresServer) -> Iterator[postgres.PostgresDatabase]:
    """A fresh, empty database with PostGIS for one test, dropped after it."""
    database = postgres_server.create_database()
    try:
        yield database
    finally:
        postgres_server.drop_database(database.name)


@pytest.fixture(scope="session")
def s3_server() -> Iterator[s3.S3Server]:
    """One real S3-compatible server (moto) for the whole session, stopped at its end."""
    server = s3.start_server()
    try:
        yield server
    finally:
        s3.stop_server(server)


@pytest.fixture
def s3_bucket(s3_server: s3.S3Server) -> s3.S3Bucket:
    """A fresh, empty bucket on the session's S3 server."""
    return s3_server.create_bucket()


# ---- Dagster ----------------------------------------------------------------------------------------


@pytest.fixture
def dagster_instance():
    """A throwaway Dagster instance in a temporary DAGSTER_HOME (runs, events, dlt working dirs)."""
    import dagster as dg

    with dg.instance_for_test() as instance:
        yield instance
