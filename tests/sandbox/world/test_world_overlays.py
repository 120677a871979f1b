"""Tracking requests created through the API, patches, parties and deep links."""

from datetime import timedelta

import pytest

from sandbox.world import ValidationIssue
from sandbox.world.identifiers import container_number


def _status(acct, tr_id, now):
    return acct.get("tracking_request", tr_id, now)["attributes"]


def test_created_tracking_request_lifecycle(fresh_world, start):
    acct = fresh_world.account("primary")
    party = acct.create_party("Wayne Enterprises", start)
    assert party["attributes"]["company_name"] == "Wayne Enterprises"
    assert acct.get("party", party["id"], start) == party
    n_before = len(acct.shipments(start))
    res = acct.create_tracking_request(
        {"request_type": "bill_of_lading", "request_number": "MEDUFR0308021", "scac": "MSCU",
         "ref_numbers": ["PO-777001"], "shipment_tags": ["hot"]}, party["id"], start)
    a = res["attributes"]
    assert a["status"] == "pending" and a["updated_at"] == a["created_at"] and a["ref_numbers"] == []
    assert res["relationships"]["tracked_object"]["data"] is None
    assert res["relationships"]["customer"]["data"] == {"id": party["id"], "type": "party"}
    assert acct.tracking_requests(start)[0]["id"] == res["id"]
    assert _status(acct, res["id"], start + timedelta(seconds=19))["status"] == "pending"
    assert len(acct.shipments(start + timedelta(seconds=19))) == n_before
    later = start + timedelta(seconds=91)
    tr = acct.get("tracking_request", res["id"], later)
    assert tr["attributes"]["status"] == "created" and tr["attributes"]["scac"] == "MSCU"
    assert tr["attributes"]["updated_at"] > tr["attributes"]["created_at"]
    assert tr["attributes"]["ref_numbers"] == ["PO-777001"]
    sid = tr["relationships"]["tracked_object"]["data"]["id"]
    ships = acct.shipments(later)
    assert len(ships) == n_before + 1 and ships[0]["id"] == sid
    ship = acct.get("shipment", sid, later)
    assert ship["attributes"]["bill_of_lading_number"] == "MEDUFR0308021"
    assert ship["attributes"]["ref_numbers"] == ["PO-777001"] and ship["attributes"]["tags"] == ["hot"]
    assert ship["attributes"]["customer_name"] == "Wayne Enterprises"
    conts = [acct.get("container", r["id"], later) for r in ship["relationships"]["containers"]["data"]]
    assert conts and all(c["attributes"]["ref_numbers"] == ["PO-777001"] for c in conts)
    assert acct.containers(later)[0]["id"] == conts[0]["id"]
    assert acct.find_for_deeplink("po-777001", later) == (sid, None)
    assert acct.shipments(later, number="medufr0308021")[0]["id"] == sid
    assert [s["id"] for s in acct.shipments(later, q="777001")] == [sid]
    assert acct.map_geojson(conts[0]["id"], later) is not None
    # filters on overlays
    assert acct.tracking_requests(later, request_number="MEDUFR0308021")[0]["id"] == res["id"]
    assert acct.tracking_requests(later, q="po-777")[0]["id"] == res["id"]
    assert res["id"] in {t["id"] for t in acct.tracking_requests(later, updated_start=start.isoformat())}


def test_test_numbers_and_auto_detect(fresh_world, start):
    acct = fresh_world.account("primary")
    ok = acct.create_tracking_request({"request_type": "bill_of_lading", "request_number": "TEST-TR-SUCCEEDED",
                                       "scac": "TEST"}, None, start)
    bad = acct.create_tracking_request({"request_type": "bill_of_lading", "request_number": "TEST-TR-FAILED",
                                        "scac": "TEST"}, None, start)
    auto_fail = acct.create_tracking_request({"request_type": "bill_of_lading", "request_number": "X12345678",
                                              "auto_detect_vocc_scac": True}, None, start)
    auto_ok = acct.create_tracking_request({"request_type": "container", "request_number": "MSKU 907032-3",
                                            "auto_detect_vocc_scac": True}, None, start)
    assert auto_fail["attributes"]["scac"] is None and auto_fail["attributes"]["status"] == "pending"
    later = start + timedelta(minutes=2)
    a = _status(acct, ok["id"], later)
    assert a["status"] == "created" and a["failed_reason"] is None
    b = _status(acct, bad["id"], later)
    assert b["status"] == "failed" and b["failed_reason"]
    assert acct.get("tracking_request", bad["id"], later)["relationships"]["tracked_object"]["data"] is None
    c = _status(acct, auto_fail["id"], later)
    assert c["status"] == "failed" and c["failed_reason"] == "scac_auto_detect_failed" and c["scac"] is None
    d = acct.get("tracking_request", auto_ok["id"], later)
    assert d["attributes"]["status"] == "created" and d["attributes"]["scac"] == "MAEU"
    ship = acct.get("shipment", d["relationships"]["tracked_object"]["data"]["id"], later)
    cont = acct.get("container", ship["relationships"]["containers"]["data"][0]["id"], later)
    assert cont["attributes"]["number"] == "MSKU9070323"
    assert acct.find_for_deeplink("msku-9070323", later) == (ship["id"], cont["id"])
    failed_now = {t["id"] for t in acct.tracking_requests(later, status="failed")}
    assert {bad["id"], auto_fail["id"]} <= failed_now
    assert ok["id"] in {t["id"] for t in acct.tracking_requests(later, status="created", scac="TEST")}


def test_carrier_validation(fresh_world, start):
    acct = fresh_world.account("primary")
    with pytest.raises(ValidationIssue) as e:
        acct.create_tracking_request({"request_number": "X1", "scac": "WDSB"}, None, start)  # live: no support
    assert e.value.pointer == "/data/attributes/scac"
    with pytest.raises(ValidationIssue):  # live TRBR tracks bookings only
        acct.create_tracking_request({"request_number": "X1", "scac": "TRBR", "request_type": "bill_of_lading"},
                                     None, start)
    acct.create_tracking_request({"request_number": "X1", "scac": "TRBR", "request_type": "booking_number"},
                                 None, start)
    acct.create_tracking_request({"request_number": "X1", "scac": "CLAM"}, None, start)  # supported live
    with pytest.raises(ValidationIssue):
        acct.create_tracking_request({"request_number": "X1", "scac": "QQQQ"}, None, start)
    with pytest.raises(ValidationIssue):
        acct.create_tracking_request({"request_number": " ", "scac": "MSCU"}, None, start)


def test_patches_show_everywhere(fresh_world, start):
    acct = fresh_world.account("primary")
    acct.search_index()  # built before the patch: must refresh
    ship = acct.shipments(start)[10]
    cid = ship["relationships"]["containers"]["data"][0]["id"]
    patched = acct.patch_shipment(ship["id"], start, ref_numbers=["ZX-PATCH-1"], tags=["vip", "vip", "q3"])
    assert patched["attributes"]["ref_numbers"] == ["ZX-PATCH-1"] and patched["attributes"]["tags"] == ["vip", "q3"]
    assert acct.get("shipment", ship["id"], start)["attributes"]["ref_numbers"] == ["ZX-PATCH-1"]
    assert acct.shipments(start)[10]["attributes"]["tags"] == ["vip", "q3"]
    assert [s["id"] for s in acct.shipments(start, q="zx-patch")] == [ship["id"]]
    assert acct.find_for_deeplink("ZX-PATCH-1", start) == (ship["id"], None)
    c = acct.patch_container(cid, start, ref_numbers=["CREF-9"])
    assert c["attributes"]["ref_numbers"] == ["CREF-9"]
    assert acct.get("container", cid, start)["attributes"]["ref_numbers"] == ["CREF-9"]
    assert acct.find_for_deeplink("cref-9", start) == (ship["id"], None)
    assert [s["id"] for s in acct.shipments(start, q="CREF-9")] == [ship["id"]]
    # replacing refs removes the old ones from search
    acct.patch_shipment(ship["id"], start, ref_numbers=[])
    assert len(acct.shipments(start, q="zx-patch")) == 0
    assert acct.patch_shipment("00000000-0000-4000-8000-000000000000", start, ref_numbers=["x"]) is None
    assert acct.patch_container("nope", start, ref_numbers=["x"]) is None


def test_deeplink_resolution_order(fresh_world, start):
    acct = fresh_world.account("primary")
    ships = acct.shipments(start)[:]
    target = ships[30]
    tid = target["id"]
    t_cont = acct.get("container", target["relationships"]["containers"]["data"][0]["id"], start)
    number = t_cont["attributes"]["number"]
    # 1. exact container number, case-insensitive, spaces and dashes stripped
    spaced = f"{number[:4].lower()} {number[4:7]}-{number[7:]}"
    assert acct.find_for_deeplink(spaced, start) == (tid, t_cont["id"])
    # 2. exact BL / normalized number -> shipment page
    assert acct.find_for_deeplink(target["attributes"]["bill_of_lading_number"].lower(), start) == (tid, None)
    # exact beats partial: give an earlier shipment a ref that contains the other's full number
    other = ships[2]
    acct.patch_shipment(other["id"], start, ref_numbers=[f"X{target['attributes']['bill_of_lading_number']}"])
    assert acct.find_for_deeplink(target["attributes"]["bill_of_lading_number"], start) == (tid, None)
    # 3. partial container number -> first container in list order, selected
    first_with = None
    frag = number[4:10]
    for s in ships:
        for r in s["relationships"]["containers"]["data"]:
            if frag in acct.get("container", r["id"], start)["attributes"]["number"]:
                first_with = (s["id"], r["id"])
                break
        if first_with:
            break
    assert acct.find_for_deeplink(frag, start) == first_with
    # 4. partial shipment match (a ref fragment) -> the first shipment
    acct.patch_shipment(tid, start, ref_numbers=["UNIQUEREF-4242"])
    assert acct.find_for_deeplink("queref-42", start) == (tid, None)
    # 5. nothing
    assert acct.find_for_deeplink("no-such-thing-anywhere", start) is None
    # scoped to the account
    basic = fresh_world.account("basic")
    assert basic.find_for_deeplink(number, start) is None or basic.find_for_deeplink(number, start)[0] != tid


def test_container_number_helper_roundtrip():
    assert container_number("MSKU", 907032) == "MSKU9070323"
