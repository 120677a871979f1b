"""The dlt source against the real sandbox over HTTP: full load, idempotent reruns, change capture,
state across processes, missing entitlement, the rate limit at full speed and under 429 storms."""

from __future__ import annotations

import logging
import shutil
import subprocess
import sys
from datetime import timedelta

import pytest

from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.models import project_models
from tests.support.lakes import lake_in, tables_and_rows
from tests.support.sandboxes import (
    BASIC_KEY,
    FROZEN_WORLD,
    FULL_KEY,
    SANDBOX_START,
    advance_clock,
    api_total,
    sandbox_stats,
)
from tests.support.syncs import ENTITY_TABLES as RAW_ENTITY_TABLES
from tests.support.syncs import cli_env, sync_once

ENTITY_TABLES = (*RAW_ENTITY_TABLES, "map_features")


def _route_delta(before: dict[str, int], after: dict[str, int]) -> dict[str, int]:
    return {route: count - before.get(route, 0) for route, count in after.items() if count != before.get(route, 0)}


def _duplicate_ids(result, table: str) -> int:
    return result.scalar(f"select count(*) - count(distinct id) from {table}")


@pytest.mark.slow
def test_full_load_lands_every_table_with_the_services_counts(synced, own_sandbox):
    result = synced  # one full sync of the world `own_sandbox` serves

    for table in ENTITY_TABLES:
        assert result.scalar(f"select count(*) from {table}") > 0, table
    assert result.scalar("select count(*) from shipments") == api_total(own_sandbox, "/shipments")
    assert result.scalar("select count(*) from containers") == api_total(own_sandbox, "/containers")
    assert result.scalar("select count(*) from parties") == api_total(own_sandbox, "/parties")
    for table in ENTITY_TABLES[:-1]:
        assert _duplicate_ids(result, table) == 0, table
    # attributes are plain columns, relationships are <name>_id columns
    columns = {row[0] for row in result.query("select column_name from information_schema.columns where "
                                              "table_schema = 'ocean_tracking' and table_name = 'shipments'")}
    assert {"bill_of_lading_number", "pod_eta_at", "port_of_lading_id", "pod_terminal_id"} <= columns
    assert not any(column.startswith("attributes__") for column in columns)
    # holds and fees are nested tables joined to their container
    orphans = result.scalar(
        "select count(*) from containers__fees_at_pod_terminal f "
        "left join containers c on c._dlt_id = f._dlt_parent_id where c.id is null"
    )
    assert orphans == 0
    # every container belongs to a loaded shipment; every event to a loaded container
    assert result.scalar("select count(*) from containers where shipment_id not in (select id from shipments)") == 0
    assert result.scalar(
        "select count(*) from transport_events where container_id not in (select id from containers)"
    ) == 0
    # references named only by events (terminals, vessels) are fetched by id and resolve
    for column, table in (("terminal_id", "terminals"), ("vessel_id", "vessels")):
        assert result.scalar(
            f"select count(*) from transport_events where {column} is not null "
            f"and {column} not in (select id from {table})"
        ) == 0, column
    # port coordinates arrive as strings on the live service and land as numbers
    assert result.scalar("select data_type from information_schema.columns where table_schema = "
                         "'ocean_tracking' and table_name = 'ports' and column_name = 'latitude'") == "DOUBLE"


def test_map_features_are_typed_rows_with_real_geometries(synced):
    result = synced

    types = {row[0] for row in result.query("select distinct feature_type from map_features")}
    assert {"port", "past_vessel_locations"} <= types
    invalid = result.scalar("select count(*) from map_features_geo where geometry is not null "
                            "and not st_isvalid(geometry)")
    assert invalid == 0
    kinds = {row[0] for row in result.query("select distinct st_geometrytype(geometry)::varchar from map_features_geo")}
    assert kinds <= {"POINT", "LINESTRING"}
    # point_count is the number of vertices of the line it describes
    mismatched = result.scalar(
        "select count(*) from map_features_geo where point_count is not null and st_npoints(geometry) != point_count"
    )
    assert mismatched == 0


@pytest.mark.slow
def test_second_run_adds_nothing_and_spends_only_the_pages(synced, own_sandbox, synced_copy):
    counts = {table: synced.scalar(f"select count(*) from {table}") for table in ENTITY_TABLES}

    second = sync_once(own_sandbox, synced_copy.workdir)  # the first is the shared one, of the same frozen world

    assert {table: second.scalar(f"select count(*) from {table}") for table in ENTITY_TABLES} == counts
    for table in ENTITY_TABLES[:-1]:
        assert _duplicate_ids(second, table) == 0, table
    # the minimum: the shipment pages, then one page each of tracking requests (incremental), parties and
    # shipping lines; the custom fields are not due within their day (their state came back from the lake,
    # this pipeline folder is new), no map is due within the hour, no reference id is new, every event
    # arrived in the pages
    shipment_pages = -(-api_total(own_sandbox, "/shipments") // 100)
    assert second.stats["requests"] == {"default": shipment_pages + 3}
    # nothing unchanged is written again (on the lake a merged row is a rewritten file): only the tracking
    # requests' lag window is re-read and reloaded
    newest = second.scalar("select max(load_id) from _dlt_loads")
    rewritten = {table: second.scalar(f"select count(*) from {table} where _dlt_load_id = '{newest}'")
                 for table in (*ENTITY_TABLES, "fetch_log")}
    assert rewritten.pop("tracking_requests") <= 100
    assert rewritten == dict.fromkeys(rewritten, 0)
    # dlt state keeps cursors only: what decides the next fetch is in the fetch_log table
    assert second.scalar("select max(length(state)) from _dlt_pipeline_state") < 4096
    assert second.scalar("select count(*) from fetch_log") >= counts["shipments"] + counts["containers"]
    # loaded packages keep their schema and state, not their data files
    assert list((synced_copy.workdir / "dlt").rglob("*.parquet")) == []


@pytest.mark.slow
def test_changes_land_after_the_clock_moves(synced, own_sandbox, synced_copy):
    etas_before = dict(synced.query("select id, pod_eta_at from shipments"))
    events_before = synced.scalar("select count(*) from transport_events")

    advance_clock(own_sandbox, 5 * 24 * 3600)
    second = sync_once(own_sandbox, synced_copy.workdir)  # the first is the shared one, of the same frozen world

    etas_after = dict(second.query("select id, pod_eta_at from shipments"))
    moved = {id_ for id_, eta in etas_before.items() if etas_after[id_] != eta}
    assert moved, "no ETA moved in five days"
    # the history keeps the superseded ETA with a closed validity window, and one open row per shipment
    closed = dict(second.query("select shipment_id, pod_eta_at from shipment_eta_history where _dlt_valid_to is not null"))
    assert {id_ for id_ in moved if closed.get(id_) == etas_before[id_]} == moved
    assert second.scalar("select count(*) from shipment_eta_history where _dlt_valid_to is null") == len(etas_after)
    # versions are valid from the service's clock when a sync saw them (its Date), not the loader's
    seen = SANDBOX_START + timedelta(days=5)
    assert {at for (at,) in second.query("select distinct _dlt_valid_to from shipment_eta_history "
                                         "where _dlt_valid_to is not null")} == {seen}  # fmt: skip
    charges = second.query("select container_id, pickup_lfd, holds, fees from container_charge_history "
                           f"where _dlt_valid_from = '{seen.isoformat()}'")  # fmt: skip
    assert charges, "no container's last free day, holds or fees changed in five days"
    current = dict(second.query("select id, pickup_lfd from containers"))
    assert all(current[container_id] == lfd for container_id, lfd, _, _ in charges)
    assert second.scalar("select count(*) from transport_events") > events_before
    assert _duplicate_ids(second, "transport_events") == 0
    # maps of containers at sea were due again after more than an hour
    shipment_pages = -(-api_total(own_sandbox, "/shipments") // 100)
    assert second.stats["requests"]["default"] > shipment_pages + 3


@pytest.mark.slow
def test_incremental_state_survives_a_new_process(own_sandbox, tmp_path):
    env = cli_env(own_sandbox.base_url, tmp_path)  # the default destination: the lake under tmp_path/data
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-models"]  # the state is dlt's
    by_id = ("GET /v2/vessels", "GET /v2/ports", "GET /v2/terminals")
    start = sandbox_stats(own_sandbox)["requests_by_route"]
    first = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert first.returncode == 0, first.stdout + first.stderr
    middle = sandbox_stats(own_sandbox)["requests_by_route"]
    first_spent = _route_delta(start, middle)
    assert any("map_geojson" in route for route in first_spent), first_spent
    assert any(route.startswith(by_id) for route in first_spent), first_spent
    assert lake_in(tmp_path / "data").exists()
    # the local pipeline state is gone: a new machine with only the lake
    shutil.rmtree(tmp_path / "dlt-home", ignore_errors=True)

    second = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert second.returncode == 0, second.stdout + second.stderr
    spent = _route_delta(middle, sandbox_stats(own_sandbox)["requests_by_route"])
    assert not any("map_geojson" in route for route in spent), spent
    assert not any(route.startswith(by_id) for route in spent), spent
    assert FULL_KEY not in first.stdout + first.stderr + second.stdout + second.stderr


@pytest.mark.slow
def test_missing_routing_entitlement_turns_maps_off_with_one_warning(own_sandbox, tmp_path, caplog):
    with caplog.at_level(logging.WARNING, logger="pipelines"):
        result = sync_once(own_sandbox, tmp_path, key=BASIC_KEY)

    assert result.scalar("select count(*) from shipments") == api_total(own_sandbox, "/shipments", BASIC_KEY)
    tables = {row[0] for row in result.query("select table_name from information_schema.tables")}
    assert "map_features" not in tables
    warnings = [r for r in caplog.records if "Routing Data entitlement" in r.getMessage()]
    assert len(warnings) == 1
    assert BASIC_KEY not in caplog.text


@pytest.mark.slow
def test_full_speed_in_a_scaled_window_receives_no_429(make_sandbox, tmp_path):
    server = make_sandbox(rate_window=2.0)

    result = sync_once(server, tmp_path, window=2.0)

    assert result.requests > 100, "the sync must outlast one window for this test to mean anything"
    assert result.stats["responses_429"] == 0
    assert sandbox_stats(server)["rate_limited_by_key"] == {}


@pytest.mark.slow
def test_retry_after_is_honoured_under_a_429_storm(synced, make_sandbox, tmp_path):
    clean = synced  # the shared world, synced without a fault
    assert clean.stats["responses_429"] == 0
    stormy_server = make_sandbox(faults="429", fault_rate=0.2, **FROZEN_WORLD)

    stormy = sync_once(stormy_server, tmp_path / "stormy")

    assert stormy.stats["responses_429"] > 0
    for table in ENTITY_TABLES:
        assert stormy.scalar(f"select count(*) from {table}") == clean.scalar(f"select count(*) from {table}"), table
    assert stormy.query("select id, pod_eta_at from shipments order by id") == clean.query(
        "select id, pod_eta_at from shipments order by id"
    )


# ---- one load path: the CLI and Dagster ------------------------------------------------------------------
# One load path: the CLI's `sync` leaves the tables and rows of the shared `built` lake (the Python sync, then
# every model by its Dagster assets); tests/assets/test_ingest.py holds the Dagster ingest to the same.


@pytest.mark.slow
def test_cli_sync_leaves_the_tables_of_a_sync_and_the_dagster_models(own_sandbox, built, tmp_path):
    env = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=own_sandbox.app_url)
    env["OCEAN_TRACKING_DATA_DIR"] = str(tmp_path / "cli")
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress",
               "--geoparquet", str(tmp_path / "cli" / "features.parquet")]  # fmt: skip
    cli = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stdout + cli.stderr

    by_cli = tables_and_rows(lake_in(tmp_path / "cli"), DATASET_NAME, ANALYTICS_SCHEMA)
    assert by_cli == tables_and_rows(built.store, DATASET_NAME, ANALYTICS_SCHEMA)
    assert {f"{ANALYTICS_SCHEMA}.{model.name}" for model in project_models() if model.layer == "marts"} <= set(by_cli)
    assert by_cli[f"{DATASET_NAME}.shipments"] > 0 and by_cli[f"{ANALYTICS_SCHEMA}.container_status"] > 0
