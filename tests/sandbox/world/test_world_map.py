"""Every map_geojson rule of the spec, checked on many containers at several times."""

import itertools
from datetime import timedelta

import pytest

PORT_PROPS = {"feature_type", "ports_sequence", "ports_total", "location_id", "location_type", "name", "state_abbr",
              "state", "country_code", "country", "time_zone", "label", "inbound_eta_at", "inbound_ata_at",
              "outbound_etd_at", "outbound_atd_at", "updated_at"}
VESSEL_PROPS = {"feature_type", "ports_sequence", "vessel_id", "vessel_name", "vessel_imo", "voyage_number",
                "vessel_location_timestamp", "vessel_location_heading", "vessel_location_speed",
                "departure_port_id", "departure_port_name", "departure_port_state_abbr", "departure_port_state",
                "departure_port_country_code", "departure_port_country", "departure_port_label",
                "departure_port_atd", "departure_port_time_zone", "arrival_port_id", "arrival_port_name",
                "arrival_port_state_abbr", "arrival_port_state", "arrival_port_country_code",
                "arrival_port_country", "arrival_port_label", "arrival_port_eta", "arrival_port_time_zone"}
PAST_PROPS = {"feature_type", "ports_sequence", "vessel_id", "start_time", "end_time", "point_count",
              "outbound_atd_at", "inbound_ata_at", "inbound_eta_at"}
FULL_PROPS = {"feature_type", "ports_sequence", "previous_port_id", "next_port_id", "point_count"}
PARTIAL_PROPS = {"feature_type", "ports_sequence", "current_port_id", "next_port_id", "point_count"}


@pytest.fixture(scope="module")
def maps(world, start):
    acct = world.account("primary")
    out = []
    for days in (0, 9, 25):
        now = start + timedelta(days=days)
        for c in acct.containers(now)[: 350]:
            out.append((c, acct.map_geojson(c["id"], now), now))
    return out


def _by_type(fc):
    kinds = {}
    for f in fc["features"]:
        kinds.setdefault(f["properties"]["feature_type"], []).append(f)
    return kinds


def test_every_map_follows_the_rules(maps, world):
    stats = {"empty": 0, "current": 0, "ts": 0, "anti": 0}
    for c, fc, _now in maps:
        assert fc["type"] == "FeatureCollection"
        if not fc["features"]:
            stats["empty"] += 1
            continue
        kinds = _by_type(fc)
        assert set(kinds) <= {"port", "current_vessel", "past_vessel_locations", "estimated_full_legs",
                              "estimated_partial_leg"}
        ports = sorted(kinds["port"], key=lambda f: f["properties"]["ports_sequence"])
        total = len(ports)
        assert total >= 2
        labels = [p["properties"]["label"] for p in ports]
        assert labels == ["POL", *[f"TS{i}" for i in range(1, total - 1)], "POD"]
        stats["ts"] += total > 2
        for i, p in enumerate(ports, start=1):
            props = p["properties"]
            assert set(props) == PORT_PROPS
            assert props["ports_sequence"] == i and props["ports_total"] == total
            assert props["location_type"] == "Port" and p["geometry"]["type"] == "Point"
            assert world.get_port(props["location_id"])["attributes"]["name"] == props["name"]
        ship = c["relationships"]["shipment"]["data"]["id"]
        assert ship  # container belongs to a shipment
        # leg features: exactly one per leg
        legs = total - 1
        leg_feats = kinds.get("past_vessel_locations", []) + kinds.get("estimated_full_legs", [])
        seqs = sorted(f["properties"]["ports_sequence"] for f in leg_feats)
        assert seqs == list(range(1, legs + 1))
        for f in (*leg_feats, *kinds.get("estimated_partial_leg", [])):
            coords = f["geometry"]["coordinates"]
            assert f["geometry"]["type"] == "LineString"
            assert f["properties"]["point_count"] == len(coords) >= 2
            for lon, lat in coords:
                assert -180 <= lon <= 180 and -90 <= lat <= 90
            if any(abs(a[0] - b[0]) > 180 for a, b in itertools.pairwise(coords)):
                stats["anti"] += 1
        for f in kinds.get("past_vessel_locations", []):
            assert set(f["properties"]) == PAST_PROPS
            seq = f["properties"]["ports_sequence"]
            assert ports[seq - 1]["properties"]["outbound_atd_at"] == f["properties"]["outbound_atd_at"]
        for f in kinds.get("estimated_full_legs", []):
            assert set(f["properties"]) == FULL_PROPS
            seq = f["properties"]["ports_sequence"]
            assert ports[seq - 1]["properties"]["outbound_atd_at"] is None
            assert f["properties"]["previous_port_id"] == ports[seq - 1]["properties"]["location_id"]
            assert f["properties"]["next_port_id"] == ports[seq]["properties"]["location_id"]
        currents = kinds.get("current_vessel", [])
        partials = kinds.get("estimated_partial_leg", [])
        assert len(currents) == len(partials) <= 1
        if currents:
            stats["current"] += 1
            cur, part = currents[0], partials[0]
            props = cur["properties"]
            assert set(props) == VESSEL_PROPS
            seq = props["ports_sequence"]
            dep, arr = ports[seq - 1]["properties"], ports[seq]["properties"]
            # departed, next port not reached
            assert dep["outbound_atd_at"] is not None and arr["inbound_ata_at"] is None
            assert props["departure_port_id"] == dep["location_id"] and props["arrival_port_id"] == arr["location_id"]
            assert props["departure_port_label"] == dep["label"] and props["arrival_port_label"] == arr["label"]
            assert part["geometry"]["coordinates"][0] == cur["geometry"]["coordinates"]
            assert part["properties"]["ports_sequence"] == seq
            past = [f for f in kinds["past_vessel_locations"] if f["properties"]["ports_sequence"] == seq]
            assert past and past[0]["properties"]["inbound_ata_at"] is None
            assert past[0]["geometry"]["coordinates"][-1] == cur["geometry"]["coordinates"]
        else:
            # no leg may be under way without a vessel position
            for i in range(legs):
                dep, arr = ports[i]["properties"], ports[i + 1]["properties"]
                assert not (dep["outbound_atd_at"] and not arr["inbound_ata_at"])
    assert stats["empty"] > 0, "some containers have no route data yet"
    assert stats["current"] >= 20
    assert stats["ts"] >= 20
    assert stats["anti"] >= 1, "at least one route crosses the antimeridian"


def test_map_empty_until_route_data(world, start):
    acct = world.account("primary")
    seen = 0
    for i in range(acct.n):
        plan = acct.plan(i)
        if plan.route_known_at is None:
            continue
        cid = acct.container_id(i, 0)
        assert acct.map_geojson(cid, plan.route_known_at - 1)["features"] == []
        assert acct.map_geojson(cid, plan.route_known_at)["features"]
        seen += 1
        if seen > 5:
            break
    assert acct.map_geojson("00000000-0000-4000-8000-000000000000", start) is None
