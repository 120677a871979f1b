"""Transit, dwell and emissions (container_durations, transit_dwell_percentiles, leg_emissions), each figure
recomputed here from the raw tables of the history world (`select *` of schema ocean_tracking) and the seed
CSV, independently of the SQL: the durations from the transport events, the percentiles by linear
interpolation (numpy.percentile's default), the distances with pyproj.Geod on the WGS84 ellipsoid from the
route map's WKB geometries, the emissions from the seed's factors."""

from __future__ import annotations

import csv
from collections import defaultdict
from pathlib import Path

import numpy
import pytest
import shapely
from pyproj import Geod

from tests.support.dagster import BuiltWarehouse

SEED = Path(__file__).parents[2] / "sql" / "seeds" / "emission_factors.csv"
GEOD = Geod(ellps="WGS84")
GREAT_CIRCLE_FACTOR = 1.15  # the stated distance adjustment for a leg with only the straight line
TRANSPORT = "container.transport."


def _raw(history: BuiltWarehouse, table: str) -> list[dict]:
    return history.dicts(f"select * from ocean_tracking.{table}")


def _by_id(rows: list[dict]) -> dict[str, dict]:
    return {row["id"]: row for row in rows}


def _latest_events(history: BuiltWarehouse) -> list[dict]:
    """The valid (never invalidated) events, the latest reported of each container's milestone (of each
    hub's, for transshipments)."""
    latest: dict[tuple, dict] = {}
    for event in _raw(history, "transport_events"):
        if event["invalidated_at"] is not None or not event["event"].startswith(TRANSPORT):
            continue
        name = event["event"].removeprefix(TRANSPORT)
        hub = event["location_locode"] if name.startswith("transshipment") else None
        key = (event["container_id"], name, hub)
        if key not in latest or (event["created_at"], event["id"]) > (
            latest[key]["created_at"],
            latest[key]["id"],
        ):
            latest[key] = {**event, "name": name}
    return list(latest.values())


def _expected_durations(history: BuiltWarehouse) -> dict[tuple, dict]:
    """Every measure of every container, by (container_id, measure, sequence)."""
    events = _latest_events(history)
    containers = _by_id(_raw(history, "containers"))
    shipments = _by_id(_raw(history, "shipments"))
    milestones: dict[str, dict[str, dict]] = defaultdict(dict)
    arrivals, departures = defaultdict(list), {}
    for event in events:
        if event["name"] == "transshipment_arrived":
            arrivals[event["container_id"]].append(event)
        elif event["name"] == "transshipment_departed":
            departures[(event["container_id"], event["location_locode"])] = event
        elif not event["name"].startswith("transshipment"):
            milestones[event["container_id"]][event["name"]] = event

    pairs = []  # (container_id, measure, sequence, start event, end event, terminal_id, locode)
    for container_id, seen in milestones.items():
        on_rail = any(name.startswith("rail") for name in seen)
        unloaded = seen.get("rail_unloaded" if on_rail else "vessel_discharged")
        full_out, available, discharged = (
            seen.get("full_out"),
            seen.get("available"),
            seen.get("vessel_discharged"),
        )
        pickup_terminal = next(
            (e["terminal_id"] for e in (full_out, available) if e and e["terminal_id"]),
            None if on_rail or not discharged else discharged["terminal_id"],
        )
        pickup_locode = (full_out or unloaded or {}).get("location_locode")
        rail_unloaded = seen.get("rail_unloaded")
        for measure, start, end, terminal, locode in [
            ("port_to_port", seen.get("vessel_departed"), seen.get("vessel_arrived"), None,
             (seen.get("vessel_arrived") or {}).get("location_locode")),
            ("discharge_to_rail_departure", discharged, seen.get("rail_departed"),
             (discharged or {}).get("terminal_id"), (discharged or {}).get("location_locode")),
            ("rail_transit", seen.get("rail_departed"), rail_unloaded, None, (rail_unloaded or {}).get("location_locode")),
            ("discharge_to_available", unloaded, available, pickup_terminal, pickup_locode),
            ("available_to_full_out", available, full_out, pickup_terminal, pickup_locode),
            ("terminal_dwell", unloaded, full_out, pickup_terminal, pickup_locode),
            ("detention_clock", full_out, seen.get("empty_in"), pickup_terminal, pickup_locode),
        ]:  # fmt: skip
            pairs.append((container_id, measure, 1, start, end, terminal, locode))
    for container_id, hub_arrivals in arrivals.items():
        hub_arrivals.sort(key=lambda e: (e["timestamp"], e["location_locode"]))
        for sequence, arrived in enumerate(hub_arrivals, start=1):
            departed = departures.get((container_id, arrived["location_locode"]))
            terminal = arrived["terminal_id"] or (departed or {}).get("terminal_id")
            pairs.append((container_id, "transshipment_dwell", sequence, arrived, departed, terminal,
                          arrived["location_locode"]))  # fmt: skip

    expected = {}
    for container_id, measure, sequence, start, end, terminal, locode in pairs:
        if not start or not end or container_id not in containers:
            continue
        shipment = shipments.get(containers[container_id]["shipment_id"], {})
        pol, pod = shipment.get("port_of_lading_locode"), shipment.get("port_of_discharge_locode")
        expected[(container_id, measure, sequence)] = {
            "hours": (end["timestamp"] - start["timestamp"]).total_seconds() / 3600,
            "terminal_id": terminal,
            "location_locode": locode,
            "carrier_scac": shipment.get("shipping_line_scac"),
            "lane": f"{pol or '?'} -> {pod or '?'}",
        }
    return expected


def test_container_durations_are_the_raw_events_pairs(history: BuiltWarehouse):
    expected = _expected_durations(history)
    rows = history.dicts("select * from analytics.container_durations")
    actual = {(row["container_id"], row["measure"], row["sequence"]): row for row in rows}
    assert len(actual) == len(rows) >= 20
    assert set(actual) == set(expected)
    measures = {key[1] for key in actual}
    assert measures == {"port_to_port", "transshipment_dwell", "discharge_to_rail_departure", "rail_transit",
                        "discharge_to_available", "available_to_full_out", "terminal_dwell", "detention_clock"}  # fmt: skip
    for key, want in expected.items():
        got = actual[key]
        assert got["hours"] == pytest.approx(want["hours"], abs=0.011), key  # the model rounds to 2 decimals
        assert (got["terminal_id"], got["location_locode"], got["carrier_scac"], got["lane"]) == (
            want["terminal_id"], want["location_locode"], want["carrier_scac"], want["lane"]), key  # fmt: skip
    # the terminal dwell ends at the pickup: the POD's full out, or the inland ramp's for a rail container
    rail = [key for key in expected if key[1] == "rail_transit"]
    assert rail and all(
        expected[(c, "terminal_dwell", 1)]["location_locode"]
        == expected[(c, "rail_transit", 1)]["location_locode"]
        for c, _, _ in rail
    )


def _linear_percentile(values: list[float], fraction: float) -> float:
    """The percentile by linear interpolation between the nearest ranks (numpy.percentile, 'linear')."""
    return float(numpy.percentile(values, fraction * 100, method="linear"))


def _expected_percentiles(history: BuiltWarehouse) -> dict[tuple, dict]:
    groups: dict[tuple, list[float]] = defaultdict(list)
    for (_, measure, _), row in _expected_durations(history).items():
        for dimension, value in [("all", "all"), ("terminal", row["terminal_id"]), ("location", row["location_locode"]),
                                 ("carrier", row["carrier_scac"]), ("lane", row["lane"])]:  # fmt: skip
            if value is not None:
                groups[(measure, dimension, value)].append(row["hours"])
    return {
        key: {
            "observations": len(hours),
            "p50_hours": _linear_percentile(hours, 0.5),
            "p90_hours": _linear_percentile(hours, 0.9),
            "mean_hours": sum(hours) / len(hours),
        }
        for key, hours in groups.items()
    }


def test_percentiles_by_terminal_carrier_and_lane_recomputed(history: BuiltWarehouse):
    expected = _expected_percentiles(history)
    rows = history.dicts("select * from analytics.transit_dwell_percentiles")
    actual = {(row["measure"], row["dimension"], row["dimension_value"]): row for row in rows}
    assert len(actual) == len(rows) >= 20
    assert set(actual) == set(expected)
    for key, want in expected.items():
        got = actual[key]
        assert got["observations"] == want["observations"], key
        for column in ("p50_hours", "p90_hours", "mean_hours"):
            assert got[column] == pytest.approx(want[column], abs=0.011), (key, column)
    # a median by carrier over several containers, not a copy of one duration
    busiest = max((key for key in expected if key[:2] == ("terminal_dwell", "carrier")),
                  key=lambda key: expected[key]["observations"])  # fmt: skip
    assert expected[busiest]["observations"] >= 20


def _length_km(geometry: bytes) -> float:
    return GEOD.geometry_length(shapely.from_wkb(bytes(geometry))) / 1000


def _expected_distances(history: BuiltWarehouse) -> dict[tuple, tuple[str, float]]:
    """Each leg's distance method and km, from the route map's features (WKB, lon/lat)."""
    ports, tracks, partial, full = {}, defaultdict(float), {}, {}
    for feature in _raw(history, "map_features"):
        if feature["geometry"] is None:
            continue
        key = (feature["container_id"], feature["ports_sequence"])
        kind = feature["feature_type"]
        if kind == "port":
            ports[key] = shapely.from_wkb(bytes(feature["geometry"]))
        elif kind == "past_vessel_locations":
            tracks[key] += _length_km(feature["geometry"])
        elif kind == "estimated_partial_leg":
            partial[key] = _length_km(feature["geometry"])
        elif kind == "estimated_full_legs":
            full[key] = _length_km(feature["geometry"])
    distances = {}
    for (container_id, sequence), origin in ports.items():
        destination = ports.get((container_id, sequence + 1))
        if destination is None:
            continue
        key = (container_id, sequence)
        if key in partial and key in tracks:
            distances[key] = ("sailed_and_estimated_path", tracks[key] + partial[key])
        elif key in partial or (key not in tracks and key in full):
            distances[key] = ("estimated_path", partial.get(key, full.get(key)))
        elif key in tracks:
            distances[key] = ("sailed_path", tracks[key])
        else:
            great_circle = GEOD.inv(origin.x, origin.y, destination.x, destination.y)[2] / 1000
            distances[key] = (f"great_circle_x{GREAT_CIRCLE_FACTOR}", great_circle * GREAT_CIRCLE_FACTOR)
    return distances


def _seed_factors() -> dict[str, dict]:
    with SEED.open(newline="") as file:
        rows = list(csv.DictReader(file))
    return {row["cargo_class"]: row for row in rows if row["trade_lane"] == "default"}


@pytest.mark.parametrize("world", ["history", "built"])
def test_leg_distances_match_pyproj_and_emissions_the_seed(world: str, request: pytest.FixtureRequest):
    """On the history world (every leg sailed) and the suite's world (legs under way and planned too)."""
    history: BuiltWarehouse = request.getfixturevalue(world)
    distances = _expected_distances(history)
    factors = _seed_factors()
    containers = _by_id(_raw(history, "containers"))
    rows = history.dicts("select * from analytics.leg_emissions")
    assert len(rows) >= 20
    assert {(row["container_id"], row["leg_sequence"]) for row in rows} == set(distances)
    for row in rows:
        key = (row["container_id"], row["leg_sequence"])
        method, km = distances[key]
        assert row["distance_method"] == method, key
        assert row["distance_km"] == pytest.approx(km, rel=0.001), key  # within 0.1 %
        container = containers[row["container_id"]]
        factor = factors["reefer" if container["equipment_type"] == "reefer" else "dry"]
        teu = container["equipment_length"] / 20 if container["equipment_length"] else None
        assert row["teu"] == teu, key
        assert row["g_co2e_per_teu_km"] == float(factor["g_co2e_per_teu_km"]), key
        assert row["factor_verified"] == (factor["verified"] == "true"), key
        assert row["factor_edition"] == factor["edition"], key
        want = km * teu * float(factor["g_co2e_per_teu_km"]) / 1000 if teu else None
        assert row["co2e_kg"] == pytest.approx(want, rel=0.001), key
    assert {row["teu"] for row in rows} >= {1.0, 2.0, 2.25}  # 20, 40 and 45 ft boxes all counted


def main_lane_co2e_per_teu(rows: list[dict]) -> dict[str, tuple[str, float]]:
    """Per carrier: its main lane (the lane with the most containers; ties: the most legs, then the lane
    code) and the kg CO2e per TEU there: the sum of its containers' legs' CO2e over the sum of their TEU,
    each container counted once."""
    by_carrier: dict[str, dict[str, dict]] = defaultdict(
        lambda: defaultdict(lambda: {"legs": 0, "teu": {}, "co2e": 0.0})
    )
    for row in rows:
        if row["carrier_scac"] is None or row["lane"] is None or row["co2e_kg"] is None:
            continue
        lane = by_carrier[row["carrier_scac"]][row["lane"]]
        lane["legs"] += 1
        lane["teu"][row["container_id"]] = row["teu"]
        lane["co2e"] += row["co2e_kg"]
    result = {}
    for carrier, lanes in by_carrier.items():
        name, lane = min(lanes.items(), key=lambda item: (-len(item[1]["teu"]), -item[1]["legs"], item[0]))
        result[carrier] = (name, lane["co2e"] / sum(lane["teu"].values()))
    return result


def test_main_lane_co2e_per_teu_by_carrier_recomputed(history: BuiltWarehouse):
    distances = _expected_distances(history)
    factors = _seed_factors()
    containers = _by_id(_raw(history, "containers"))
    shipments = _by_id(_raw(history, "shipments"))
    recomputed = []
    for (container_id, _), (_, km) in distances.items():
        container = containers[container_id]
        shipment = shipments[container["shipment_id"]]
        teu = container["equipment_length"] / 20
        factor = float(
            factors["reefer" if container["equipment_type"] == "reefer" else "dry"]["g_co2e_per_teu_km"]
        )
        recomputed.append({
            "container_id": container_id, "carrier_scac": shipment["shipping_line_scac"], "teu": teu,
            "lane": f"{shipment['port_of_lading_locode'] or '?'} -> {shipment['port_of_discharge_locode'] or '?'}",
            "co2e_kg": km * teu * factor / 1000,
        })  # fmt: skip
    model = main_lane_co2e_per_teu(history.dicts("select * from analytics.leg_emissions"))
    expected = main_lane_co2e_per_teu(recomputed)
    assert len(expected) >= 10
    assert set(model) == set(expected)
    for carrier, (lane, per_teu) in expected.items():
        assert model[carrier][0] == lane
        assert model[carrier][1] == pytest.approx(per_teu, rel=0.001), carrier
