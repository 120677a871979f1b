"""Schemas from the start, on real loads: a young account's tables have every documented column with its
type, tables without rows exist with their columns, dlt warns about nothing, and the captured live
responses load without a variant column or an undeclared one."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import pytest

from pipelines.settings import DATASET_NAME
from pipelines.source import DUCKDB_TYPES, api_columns, schema_drift
from pipelines.warehouse import loaded_columns
from tests.support.fixture_server import Fixtures, LiveFixtureServer
from tests.support.sandboxes import FROZEN_WORLD, sandbox_server
from tests.support.syncs import SyncResult, sync_once

LIVE_KEY = "t49_live_fixture_key_0d5e3a9c1b7f2468"
ROOT_TABLES = [name for name in api_columns() if "__" not in name]


@dataclass
class Load:
    """A sync's tables ({table: {column: DuckDB type}}), their rows, and the warnings dlt logged."""

    columns: dict[str, dict[str, str]]
    rows: dict[str, int]
    dlt_warnings: list[str]

    @classmethod
    def of(cls, result: SyncResult, warnings: list[str]) -> Load:
        """Read the warehouse a sync wrote, once."""
        with result.store.connect(read_only=True) as con:
            columns = loaded_columns(con, DATASET_NAME)
            rows = {table: con.execute(f'select count(*) from {DATASET_NAME}."{table}"').fetchone()[0]
                    for table in columns}  # fmt: skip
        return cls(columns, rows, warnings)


@contextmanager
def dlt_warnings() -> Iterator[list[str]]:
    """Every WARNING (or worse) the `dlt` logger emits meanwhile."""
    seen: list[str] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            seen.append(record.getMessage())

    handler = Keep(level=logging.WARNING)
    logger = logging.getLogger("dlt")
    logger.addHandler(handler)
    try:
        yield seen
    finally:
        logger.removeHandler(handler)


def _sync_account(shipments: int, workdir) -> Load:
    with sandbox_server(**FROZEN_WORLD, shipments=shipments) as server, dlt_warnings() as warnings:
        result = sync_once(server, workdir)
    return Load.of(result, warnings)


@pytest.fixture(scope="module")
def young(tmp_path_factory) -> Load:
    """A young account: a few shipments, most of their dates and references still null."""
    return _sync_account(3, tmp_path_factory.mktemp("young"))


@pytest.fixture(scope="module")
def empty(tmp_path_factory) -> Load:
    """An account with no shipment yet."""
    return _sync_account(0, tmp_path_factory.mktemp("empty"))


def _assert_declared_columns(load: Load, tables: list[str]) -> None:
    loaded = load.columns
    for table in tables:
        expected = {name: DUCKDB_TYPES[kind] for name, kind in api_columns()[table].items()}
        actual = {name: kind for name, kind in loaded[table].items() if name in expected}
        assert actual == expected, table


@pytest.mark.slow
def test_a_young_account_has_every_documented_column_with_its_type(young):
    _assert_declared_columns(young, ROOT_TABLES)
    assert not schema_drift(young.columns).drifted


@pytest.mark.slow
def test_a_sync_logs_no_dlt_warning(young, empty):
    assert young.dlt_warnings == []
    assert empty.dlt_warnings == []


def test_tables_without_rows_exist_with_their_columns(empty):
    empty_tables = {table for table in ROOT_TABLES if empty.rows[table] == 0}
    assert {"shipments", "containers", "transport_events", "ports", "terminals", "vessels"} <= empty_tables
    _assert_declared_columns(empty, ROOT_TABLES)
    # the derived tables too: the ETA history and the (typed, Arrow) map features
    tables = empty.columns
    assert tables["shipment_eta_history"]["pod_eta_at"] == "TIMESTAMP WITH TIME ZONE"
    assert tables["map_features"]["geometry"] == "BLOB"


def test_routed_tables_do_not_inherit_the_declared_columns(young):
    tables = young.columns
    assert {name for name in tables["fetch_log"] if not name.startswith("_dlt_")} == {
        "kind", "item_id", "digest", "phase", "fetched_at",
    }  # fmt: skip


@pytest.mark.slow
def test_live_responses_load_with_no_variant_and_no_undeclared_column(tmp_path):
    fixtures = Fixtures()
    if not fixtures.root.is_dir():
        pytest.skip(f"live fixtures not found at {fixtures.root}")
    with LiveFixtureServer(LIVE_KEY, fixtures) as server, dlt_warnings() as warnings:
        result = sync_once(server, tmp_path, key=LIVE_KEY)
    load = Load.of(result, warnings)

    drift = schema_drift(load.columns)
    assert drift.variant_columns == [] and drift.new_columns == []
    # string coordinates land as numbers, live-only timestamps as timestamps
    assert load.columns["ports"]["latitude"] == "DOUBLE"
    assert load.columns["containers"]["pol_full_in_at"] == "TIMESTAMP WITH TIME ZONE"
    # (the missing routing entitlement is warned about by the source, not by dlt)
    assert warnings == []
