"""Reference data: ports, terminals, shipping lines and carrier support."""

import csv
import re

from sandbox.world.reference import DATA_DIR


def test_ports_cover_terminal_ports_and_regions(world):
    ports = world.ref.ports
    assert 80 <= len(ports) <= 130
    with (DATA_DIR / "terminals.csv").open() as fh:
        for row in csv.DictReader(fh):
            assert row["Port Code"] in ports
    countries = {p.country_code for p in ports.values()}
    assert {"US", "CN", "KR", "JP", "SG", "NL", "DE", "BR", "AE", "AU", "PA"} <= countries
    for p in ports.values():
        assert re.fullmatch(r"[A-Z]{5}", p.locode)
        assert -90 <= p.latitude <= 90 and -180 <= p.longitude <= 180
        assert "/" in p.time_zone


def test_port_resource_shape(world):
    res = world.get_port("KRPUS")
    assert res == world.get_port(res["id"]) == world.get_port("krpus")
    attrs = res["attributes"]
    assert attrs["id"] == res["id"]
    assert attrs["latitude"] == "35.10162" and isinstance(attrs["longitude"], str)
    assert attrs["code"] == "KRPUS" and attrs["time_zone"] == "Asia/Seoul"
    assert "links" not in res  # live port resources carry no links
    assert res["relationships"]["terminals"]["data"], "foreign ports get generated terminals"
    assert world.get_port("XXXXX") is None


def test_us_terminals_attached_to_ports(world):
    la = world.get_port("USLAX")
    names = set()
    for rel in la["relationships"]["terminals"]["data"]:
        t = world.get_terminal(rel["id"])
        assert t["relationships"]["port"]["data"]["id"] == la["id"]
        assert t["attributes"]["id"] == t["id"]
        assert t["attributes"]["facility_type"] == "ocean_terminal"
        assert isinstance(t["attributes"]["provided_data"], dict)
        names.add(t["attributes"]["name"])
    assert "Fenix Marine Services" in names and "APM Terminals" in names
    assert world.get_terminal("nope") is None


def test_shipping_lines_dedup_support_and_test_carrier(world):
    lines = world.shipping_lines()
    scacs = [sl["attributes"]["scac"] for sl in lines]
    assert len(scacs) == len(set(scacs))
    assert {"MSCU", "MAEU", "HLCU", "TEST", "CLAM", "HDMU"} <= set(scacs)
    for sl in lines:
        a = sl["attributes"]
        for key in ("name", "short_name", "alternative_scacs", "bill_of_lading_tracking_support",
                    "booking_number_tracking_support", "container_number_tracking_support"):
            assert key in a
        assert world.get_shipping_line(sl["id"]) == sl
    assert world.carrier_support("MSCU") == "supported"
    assert world.carrier_support("hdmu") == "supported"        # Partial -> supported
    assert world.carrier_support("MATS") == "supported"        # first row (Yes) wins over "On roadmap"
    assert world.carrier_support("CLAM") == "supported"        # the live list supports it
    assert world.carrier_support("SEAL") == "supported"        # live alternative SCAC of SEAU
    assert world.carrier_support("WDSB") == "unsupported"      # live: no tracking support at all
    assert world.carrier_support("TEST") == "supported"
    assert world.carrier_support("ZZZZ") == "unknown"
    gosu = next(sl for sl in lines if sl["attributes"]["scac"] == "GOSU")
    assert gosu["attributes"]["container_number_tracking_support"] is False  # as live


def test_carrier_auto_detection(world):
    ref = world.ref
    assert ref.detect_carrier("MEDUFR030802").scac == "MSCU"
    assert ref.detect_carrier("HLCUSEL2510631").scac == "HLCU"
    assert ref.detect_carrier("MSKU9070323").scac == "MAEU"
    assert ref.detect_carrier("CCMJ123456789").scac == "COSU"
    assert ref.detect_carrier("1234567890") is None
    assert ref.detect_carrier("TEST-TR-SUCCEEDED") is None
