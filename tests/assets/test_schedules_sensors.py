"""The refresh cadence from the rate budget (pure), the schedules, and the pending-requests sensor
against a sandbox of our own (HTTP), with the warehouse loaded through Dagster."""

from __future__ import annotations

from datetime import UTC, datetime

import dagster as dg
import pytest
import requests

from assets.checks import ingest_checks
from assets.ingest import asset_key, ocean_tracking_assets
from assets.resources import Warehouse
from assets.schedules import full_sync_schedule, refresh_schedule
from assets.sensors import FOLLOW_UP_KEYS, pending_tracking_requests_sensor
from pipelines.source.map_schedule import AccountSize, budget_per_hour, plan_refresh, refresh_cost
from tests.support.dagster import sandbox_resources, warehouse_resource
from tests.support.sandboxes import FULL_KEY, advance_clock

# ---- budget (pure) ------------------------------------------------------------------------------------


def test_refresh_cost_counts_pages_tracking_pages_and_maps_due():
    size = AccountSize(shipments=250, containers_at_sea=40, containers_before_departure=48)
    # 3 shipment pages + 1 tracking page + 40 at-sea maps + 48/24 pre-departure maps
    assert refresh_cost(size, 1) == 3 + 1 + 40 + 2
    # at-sea maps are due once per refresh however long the interval; pre-departure ones daily
    assert refresh_cost(size, 24) == 3 + 1 + 40 + 48


def test_budget_is_the_rate_limit_times_utilisation_times_share():
    assert budget_per_hour(100, 0.8, 0.5) == 2400
    with pytest.raises(ValueError):
        budget_per_hour(100, 1.5, 0.5)


def test_small_account_refreshes_hourly():
    plan = plan_refresh(AccountSize(shipments=500, containers_at_sea=300))
    assert (plan.hours, plan.fits, plan.cron) == (1, True, "15 * * * *")
    assert "fits" in plan.explain()


def test_larger_account_refreshes_less_often_and_the_cron_follows():
    plan = plan_refresh(AccountSize(shipments=10_000, containers_at_sea=3_000, containers_before_departure=5_000))
    assert plan.hours == 2 and plan.fits and plan.cron == "15 */2 * * *"
    assert plan.requests_per_hour <= plan.budget_per_hour


def test_account_beyond_the_budget_is_flagged():
    plan = plan_refresh(AccountSize(shipments=100_000, containers_at_sea=60_000))
    assert plan.hours == 24 and not plan.fits and plan.cron == "15 0 * * *"
    assert "NOT fit" in plan.explain()


def test_a_bigger_utilisation_target_allows_a_shorter_cadence():
    size = AccountSize(shipments=10_000, containers_at_sea=3_000, containers_before_departure=5_000)
    assert plan_refresh(size, utilisation=1.0, refresh_share=1.0).hours == 1


# ---- schedules ----------------------------------------------------------------------------------------


def _huge_warehouse(data_dir) -> Warehouse:
    warehouse = warehouse_resource(data_dir)
    with warehouse.writing(), warehouse.connect() as con:
        con.execute("create schema ocean_tracking")
        con.execute(
            "create table ocean_tracking.shipments as select 's' || i as id, now() as pol_atd_at, "
            "null::timestamp as pod_ata_at from range(100000) t(i)"
        )
        con.execute(
            "create table ocean_tracking.containers as select 'c' || i as id, 's' || i as shipment_id, "
            "null::timestamp as pod_arrived_at from range(60000) t(i)"
        )
    return warehouse


def test_refresh_schedule_runs_hourly_for_a_small_account(tmp_path):
    """No warehouse yet: the assumed mid-size account fits hourly, so every hourly tick runs."""
    assert refresh_schedule.cron_schedule == "15 * * * *"
    tick = datetime(2026, 11, 2, 7, 15, tzinfo=UTC)
    warehouse = warehouse_resource(tmp_path / "data")
    context = dg.build_schedule_context(scheduled_execution_time=tick, resources={"warehouse": warehouse})
    [request] = refresh_schedule.evaluate_tick(context).run_requests
    assert request.run_key == f"refresh-{tick.isoformat()}"
    assert request.tags["ocean_tracking/refresh_every_hours"] == "1"
    assert not warehouse.store().exists()  # planning reads, never creates


@pytest.mark.slow
def test_refresh_schedule_skips_off_cadence_when_the_account_outgrew_hourly(tmp_path):
    warehouse = _huge_warehouse(tmp_path / "data")
    off = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 2, 7, 15, tzinfo=UTC), resources={"warehouse": warehouse}
    )
    result = refresh_schedule.evaluate_tick(off)
    assert not result.run_requests and "Every 24 h" in result.skip_message
    on = dg.build_schedule_context(
        scheduled_execution_time=datetime(2026, 11, 2, 0, 15, tzinfo=UTC), resources={"warehouse": warehouse}
    )
    assert len(refresh_schedule.evaluate_tick(on).run_requests) == 1


def test_full_sync_schedule_requests_a_run():
    context = dg.build_schedule_context(scheduled_execution_time=datetime(2026, 11, 2, 2, tzinfo=UTC))
    assert len(full_sync_schedule.evaluate_tick(context).run_requests) == 1
    assert full_sync_schedule.cron_schedule == "0 2 * * *"


# ---- sensor -------------------------------------------------------------------------------------------


def _create_tracking_request(server) -> str:
    headers = {"Authorization": f"Token {FULL_KEY}", "Content-Type": "application/vnd.api+json"}
    lines = requests.get(
        f"{server.base_url}/shipping_lines", params={"page[size]": 100}, headers=headers, timeout=10
    ).json()["data"]
    scac = next(
        line["attributes"]["scac"]
        for line in lines
        if line["attributes"].get("bill_of_lading_tracking_support") and line["attributes"]["scac"] != "TEST"
    )
    body = {
        "data": {
            "type": "tracking_request",
            "attributes": {"request_type": "bill_of_lading", "request_number": "SENSORTEST0001", "scac": scac},
        }
    }
    response = requests.post(f"{server.base_url}/tracking_requests", json=body, headers=headers, timeout=10)
    assert response.status_code == 201, response.text
    return response.json()["data"]["id"]


def _evaluate(resources, cursor=None):
    context = dg.build_sensor_context(cursor=cursor, resources=resources)
    return pending_tracking_requests_sensor.evaluate_tick(context)


def _status(warehouse: Warehouse, id_: str) -> str:
    with warehouse.connect(read_only=True) as con:
        return con.execute("select status from ocean_tracking.tracking_requests where id = ?", [id_]).fetchone()[0]


@pytest.mark.slow
def test_sensor_follows_a_pending_tracking_request_until_it_resolves(own_sandbox, tmp_path, dagster_instance):
    resources = sandbox_resources(own_sandbox, tmp_path)
    sensor_resources = {k: resources[k] for k in ("warehouse", "ocean_tracking_api")}
    assert "no pending" in _evaluate(sensor_resources).skip_message  # nothing loaded yet

    created = _create_tracking_request(own_sandbox)
    load = dg.materialize(
        [ocean_tracking_assets, *ingest_checks],
        resources=resources,
        instance=dagster_instance,
        selection=dg.AssetSelection.assets(asset_key("tracking_requests")),
    )
    assert load.success and _status(resources["warehouse"], created) == "pending"
    assert "still pending" in _evaluate(sensor_resources).skip_message  # the clock has not moved

    advance_clock(own_sandbox, 300)
    result = _evaluate(sensor_resources)
    [request] = result.run_requests
    assert request.run_key.startswith("resolved-") and result.cursor
    # the same resolved state does not fire twice
    again = _evaluate(sensor_resources, cursor=result.cursor)
    assert not again.run_requests

    follow_up = dg.materialize(
        [ocean_tracking_assets],
        resources=resources,
        instance=dagster_instance,
        selection=dg.AssetSelection.assets(*FOLLOW_UP_KEYS),
    )
    assert follow_up.success
    assert _status(resources["warehouse"], created) in ("created", "failed")
    after = _evaluate(sensor_resources, cursor=result.cursor)
    assert not after.run_requests or after.run_requests[0].run_key != request.run_key
