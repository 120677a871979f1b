"""The models of what the richer world serves: whether a shipment is still tracked (`tracking_state`),
inland rail legs, custom fields next to their shipments and containers, tracking request statuses. Each
expected value is computed here from the raw tables the sync loaded, then compared with the model."""

from __future__ import annotations

import pytest

from tests.support.dagster import BuiltWarehouse


def _expected_leg_status(row: dict) -> str:
    if row["final_destination_full_out_at"] is not None:
        return "picked_up"
    if row["ind_ata_at"] is not None or row["ind_rail_unloaded_at"] is not None:
        return "at_inland_destination"
    if row["pod_rail_departed_at"] is not None:
        return "on_rail"
    return "awaiting_rail"


@pytest.mark.slow
def test_tracking_state_follows_the_lines_stop_and_the_account(built: BuiltWarehouse):
    stopped = {row[0] for row in built.query(
        "select id from ocean_tracking.shipments where line_tracking_stopped_at is not null")}
    assert stopped, "the world should have shipments whose tracking stopped"
    states = dict(built.query("select container_id, tracking_state from analytics.container_status"))
    owners = dict(built.query("select id, shipment_id from ocean_tracking.containers"))
    expected = {cid: "tracking_stopped" if owners[cid] in stopped else "tracking" for cid in owners}
    assert states == expected
    reasons = built.query("select count(*) from analytics.container_status "
                          "where tracking_state = 'tracking_stopped' and tracking_stopped_at is null")
    assert reasons == [(0,)]


def test_inland_legs_are_the_containers_with_a_rail_leg_and_their_status(built: BuiltWarehouse):
    raw = built.dicts(
        "select id, pod_rail_carrier_scac, ind_rail_carrier_scac, pod_rail_loaded_at, pod_rail_departed_at, "
        "ind_rail_unloaded_at, ind_eta_at, ind_ata_at, final_destination_full_out_at "
        "from ocean_tracking.containers"
    )
    with_leg = {row["id"]: row for row in raw
                if any(row[name] is not None for name in row if name not in ("id", "final_destination_full_out_at"))}
    assert with_leg, "the world should have containers bound inland by rail"
    legs = {row["container_id"]: row for row in built.dicts("select * from analytics.inland_legs")}
    assert set(legs) == set(with_leg)
    assert {cid: leg["leg_status"] for cid, leg in legs.items()} == {
        cid: _expected_leg_status(row) for cid, row in with_leg.items()
    }
    for leg in legs.values():
        if leg["rail_transit_hours"] is not None:
            hours = (leg["ind_rail_unloaded_at"] - leg["pod_rail_departed_at"]).total_seconds() / 3600
            assert abs(leg["rail_transit_hours"] - hours) < 0.01
            assert leg["rail_transit_hours"] > 0


@pytest.mark.slow
def test_custom_fields_sit_next_to_their_shipments_and_containers(built: BuiltWarehouse):
    raw = built.query("select count(*) from ocean_tracking.custom_fields")[0][0]
    assert raw > 0
    values = built.dicts("select * from analytics.custom_field_values")
    assert len(values) == raw
    by_type = {value["entity_type"] for value in values}
    assert {"shipment", "container"} <= by_type
    owners = dict(built.query("select id, shipment_id from ocean_tracking.containers"))
    numbers = dict(built.query("select id, bill_of_lading_number from ocean_tracking.shipments"))
    for value in values:
        assert value["display_name"] and value["data_type"], value
        if value["entity_type"] == "shipment":
            assert value["shipment_id"] == value["entity_id"]
        if value["entity_type"] == "container":
            assert value["container_id"] == value["entity_id"]
            assert value["shipment_id"] == owners[value["entity_id"]]
        if value["shipment_id"] in numbers:
            assert value["bill_of_lading_number"] == numbers[value["shipment_id"]]


@pytest.mark.slow
def test_tracking_requests_carry_the_statuses_the_service_has(built: BuiltWarehouse):
    statuses = {row[0] for row in built.query("select distinct status from _analytics_staging.stg_tracking_requests")}
    assert {"created", "awaiting_manifest"} <= statuses
    raw = dict(built.query("select status, count(*) from ocean_tracking.tracking_requests group by status"))
    model = dict(built.query("select status, count(*) from _analytics_staging.stg_tracking_requests group by status"))
    assert model == raw
