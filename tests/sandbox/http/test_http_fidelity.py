"""The simulated world as a client sees it, compared with the live captures (fixtures/cli, fixtures/sdk):
attribute key sets, relationship names and `links` per resource type; carriers; tracking-request and
shipment stop transitions on the sandbox clock; rail legs; infer_number with a BL prefix."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import requests

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY

REF = Path("/work/shared/reference/terminal49")
FIX = REF / "fixtures"
DAY = 86400
INCLUDE = "containers,pod_terminal,port_of_lading,port_of_discharge,destination,destination_terminal"

pytestmark = pytest.mark.skipif(not FIX.exists(), reason="live captures not available")


def fixture(name: str) -> dict:
    """A live capture (the SDK ones are plain JSON:API documents; the CLI ones wrap it in `data`)."""
    doc = json.loads((FIX / name).read_text())
    return doc["data"] if name.startswith("cli/") else doc


def resources(doc: dict, type_: str) -> list[dict]:
    """Every resource of `type_` in a document's data and included."""
    data = doc.get("data")
    rows = (data if isinstance(data, list) else [data]) + list(doc.get("included") or [])
    return [r for r in rows if isinstance(r, dict) and r.get("type") == type_]


def live(type_: str, *names: str) -> dict:
    """The first live resource of `type_` in the named captures."""
    for name in names:
        found = resources(fixture(name), type_)
        if found:
            return found[0]
    raise AssertionError(f"no live {type_}")


def same_shape(mine: dict, theirs: dict, extra_ok: set[str] = frozenset()) -> None:
    """Attribute keys, relationship names and links presence as live (`extra_ok`: keys the live
    capture lacks but the spec declares)."""
    assert set(mine["attributes"]) - extra_ok == set(theirs["attributes"]), (
        set(mine["attributes"]) ^ set(theirs["attributes"]))
    assert set(mine.get("relationships") or {}) == set(theirs.get("relationships") or {})
    assert ("links" in mine) == ("links" in theirs), mine.get("links")
    if "links" in theirs:
        assert set(mine["links"]) == set(theirs["links"])


@pytest.fixture(scope="module")
def cl(sandbox) -> Client:
    return Client(sandbox.base_url, FULL_KEY)


@pytest.fixture(scope="module")
def page(cl) -> dict:
    return ok(cl.get(f"/shipments?page[size]=100&include={INCLUDE}"))


def test_shipment_shape_and_links(page):
    theirs = live("shipment", "sdk/shipments.list.json")
    for s in page["data"]:
        same_shape(s, theirs)
        assert s["links"]["self"] == f"/v2/shipments/{s['id']}"  # relative, as live


def test_container_shape_no_links(page):
    theirs = live("container", "sdk/containers.get.base.json")
    for c in resources(page, "container"):
        same_shape(c, theirs)


def test_event_terminal_port_shapes(cl, page):
    cid = resources(page, "container")[0]["id"]
    events = ok(cl.get(f"/containers/{cid}/transport_events?include=location,terminal"))
    theirs = live("transport_event", "sdk/containers.events.json")
    for e in events["data"]:
        same_shape(e, theirs)
    same_shape(resources(page, "port")[0], live("port", "sdk/ports.get.json"))
    same_shape(resources(page, "terminal")[0], live("terminal", "sdk/terminals.get.json"))


def test_tracking_request_party_vessel_shapes(cl):
    tr = ok(cl.get("/tracking_requests?page[size]=5"))["data"][0]
    same_shape(tr, live("tracking_request", "sdk/tracking-requests.list.json"))
    assert tr["links"]["self"] == f"/v2/tracking_requests/{tr['id']}"
    party = ok(cl.get("/parties"))["data"][0]
    theirs = fixture("cli/parties.get.json")["data"]
    assert set(party) == set(theirs) and set(party["attributes"]) == set(theirs["attributes"])
    ev = next(e for e in ok(cl.get("/containers?page[size]=50"))["data"]
              if e["relationships"]["transport_events"]["data"])
    events = ok(cl.get(f"/containers/{ev['id']}/transport_events"))["data"]
    vessel_id = next(e["relationships"]["vessel"]["data"]["id"] for e in events if e["relationships"]["vessel"]["data"])
    vessel = ok(cl.get(f"/vessels/{vessel_id}"))["data"]
    theirs = fixture("cli/vessels.get-by-imo.json")["data"]
    assert set(vessel) == set(theirs) - {"relationships"} | ({"relationships"} & set(vessel))
    assert "links" not in vessel and set(vessel["attributes"]) == set(theirs["attributes"])


def test_terminal_streets_filled(cl, page):
    terms = resources(page, "terminal")
    us = [t for t in terms if t["attributes"]["country"] == "United States"]
    assert us and all(t["attributes"]["street"] for t in us)
    live_t = fixture("cli/terminals.get.json")["data"]
    mine = next((t for t in us if t["attributes"]["firms_code"] == live_t["attributes"]["firms_code"]), None)
    if mine is None:
        port = ok(cl.get("/ports/USORF"))["data"]
        for rel in port["relationships"]["terminals"]["data"]:
            t = ok(cl.get(f"/terminals/{rel['id']}"))["data"]
            if t["attributes"]["firms_code"] == "N195":
                mine = t
    for key in ("street", "city", "state", "state_abbr", "zip", "country"):
        assert mine["attributes"][key] == live_t["attributes"][key], key


def test_shipping_lines_as_live(cl, sandbox):
    body = ok(cl.get("/shipping_lines"))
    theirs = fixture("sdk/shipping-lines.list.json")
    assert len(body["data"]) == len(theirs["data"]) == 38
    assert set(body["links"]) == set(theirs["links"]) and "meta" not in body
    rest = ok(cl.get(body["links"]["next"]))["data"]
    mine = {r["attributes"]["scac"]: r for r in body["data"] + rest}
    for t in theirs["data"]:
        m = mine[t["attributes"]["scac"]]
        same_shape(m, t)
        for key in ("name", "short_name", "alternative_scacs", "bill_of_lading_tracking_support",
                    "booking_number_tracking_support", "container_number_tracking_support"):
            assert m["attributes"][key] == t["attributes"][key], (t["attributes"]["scac"], key)
    assert {r["scac"] for r in fixture("cli/shipping-lines.list.json")} <= set(mine)


def test_every_live_scac_accepted(make_sandbox):
    srv = make_sandbox(limits={"default": 100_000, "tracking_requests_create": 100_000})
    c = Client(srv.base_url, FULL_KEY)
    kinds = {"bill_of_lading": "bill_of_lading_tracking_support", "booking_number": "booking_number_tracking_support"}
    for line in fixture("sdk/shipping-lines.list.json")["data"]:
        a = line["attributes"]
        for kind, flag in kinds.items():
            body = {"data": {"type": "tracking_request", "attributes": {
                "request_type": kind, "request_number": f"{a['scac']}X1234567", "scac": a["scac"]}}}
            resp = c.post("/tracking_requests", body)
            if a[flag]:
                ok(resp, 201)
            else:
                errors(resp, 422)


def test_infer_number_bl_prefix(cl):
    for number, scac in (("MEDUFR030802", "MSCU"), ("CCMJ12345678901", "COSU"), ("EISU0849000420", "EGLV"),
                         ("MAEU221876618", "MAEU")):
        a = ok(cl.post("/tracking_requests/infer_number", {"number": number}))["data"]["attributes"]
        assert a["number_type"] == "bill_of_lading", number
        assert a["shipping_line"]["selected"]["scac"] == scac
        assert a["shipping_line"]["decision"] == "auto_select"


def test_rail_legs_and_destinations(cl, sandbox):
    body = ok(cl.get(f"/shipments?page[size]=100&include={INCLUDE}"))
    inland = [s for s in body["data"] if s["attributes"]["destination_locode"]]
    share = len(inland) / len(body["data"])
    assert 0.08 <= share <= 0.35, share
    included = {(r["type"], r["id"]) for r in body.get("included", [])}
    for s in inland:
        rel = s["relationships"]
        assert ("port", rel["destination"]["data"]["id"]) in included
        assert ("terminal", rel["destination_terminal"]["data"]["id"]) in included
    cont_ids = [c["id"] for s in inland for c in s["relationships"]["containers"]["data"]]
    railed = 0
    far = None
    for cid in cont_ids[:40]:
        c = ok(cl.get(f"/containers/{cid}"))["data"]["attributes"]
        assert c["pod_rail_carrier_scac"] and c["ind_rail_carrier_scac"] and c["final_destination_timezone"]
        assert c["pod_full_out_at"] is None
        if c["ind_rail_unloaded_at"]:
            railed += 1
            assert c["pod_rail_loaded_at"] <= c["pod_rail_departed_at"] <= c["ind_ata_at"] <= c["ind_rail_unloaded_at"]
            names = [e["attributes"]["event"] for e in ok(cl.get(f"/containers/{cid}/transport_events"))["data"]]
            for n in ("rail_loaded", "rail_departed", "rail_arrived", "rail_unloaded"):
                assert f"container.transport.{n}" in names
        elif far is None and not c["pod_arrived_at"]:
            far = cid
    assert railed or far


def test_rail_estimate_becomes_actual(make_sandbox):
    srv = make_sandbox()
    c = Client(srv.base_url, FULL_KEY)
    body = ok(c.get("/shipments?page[size]=100"))
    s = next(s for s in body["data"] if s["attributes"]["destination_locode"]
             and not s["attributes"]["destination_ata_at"] and not s["attributes"]["line_tracking_stopped_at"])
    assert s["attributes"]["destination_eta_at"]
    for _ in range(12):
        requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 10 * DAY}, timeout=10)
        a = ok(c.get(f"/shipments/{s['id']}"))["data"]["attributes"]
        if a["destination_ata_at"]:
            break
    assert a["destination_ata_at"] and a["destination_eta_at"]


def test_filter_tracking_stopped(cl):
    every = ok(cl.get("/shipments?page[size]=1"))["meta"]["total"]
    stopped = ok(cl.get("/shipments?filter[tracking_stopped]=true&page[size]=100"))
    tracked = ok(cl.get("/shipments?filter[tracking_stopped]=false&page[size]=100"))
    assert stopped["meta"]["total"] and tracked["meta"]["total"]
    assert stopped["meta"]["total"] + tracked["meta"]["total"] == every
    assert all(s["attributes"]["line_tracking_stopped_at"] for s in stopped["data"])
    assert all(s["attributes"]["line_tracking_stopped_at"] is None for s in tracked["data"])
    reasons = {s["attributes"]["line_tracking_stopped_reason"] for s in stopped["data"]}
    assert "all_containers_terminated" in reasons and reasons & {"booking_cancelled", "cancelled_by_user"}
    by_user = [s for s in stopped["data"] if s["attributes"]["line_tracking_stopped_reason"] == "cancelled_by_user"]
    assert all(s["relationships"]["line_tracking_stopped_by_user"]["data"]["type"] == "user" for s in by_user)


def test_stop_and_resume_tracking(make_sandbox):
    srv = make_sandbox()
    c = Client(srv.base_url, FULL_KEY)
    s = ok(c.get("/shipments?filter[tracking_stopped]=false&page[size]=1"))["data"][0]
    stopped = ok(c.patch(f"/shipments/{s['id']}/stop_tracking"))["data"]
    a = stopped["attributes"]
    assert a["line_tracking_stopped_at"] and a["line_tracking_stopped_reason"] == "cancelled_by_user"
    assert stopped["relationships"]["line_tracking_stopped_by_user"]["data"]["type"] == "user"
    assert s["id"] in [x["id"] for x in ok(c.get("/shipments?filter[tracking_stopped]=true&page[size]=100"))["data"]]
    trs = ok(c.get(f"/tracking_requests?filter[request_number]={s['attributes']['bill_of_lading_number']}"))["data"]
    cid = s["relationships"]["containers"]["data"][0]["id"]
    before = ok(c.get(f"/containers/{cid}"))["data"]["attributes"]
    requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 30 * DAY}, timeout=10)
    frozen = ok(c.get(f"/containers/{cid}"))["data"]["attributes"]
    assert frozen["current_status"] == before["current_status"]  # no updates after the stop
    if trs:
        assert ok(c.get(f"/tracking_requests/{trs[0]['id']}"))["data"]["attributes"]["status"] in (
            "tracking_stopped", "created")
    resumed = ok(c.patch(f"/shipments/{s['id']}/resume_tracking"))["data"]
    assert resumed["relationships"]["line_tracking_stopped_by_user"]["data"] is None
    ra = resumed["attributes"]
    assert ra["line_tracking_stopped_reason"] in (None, "all_containers_terminated", "past_arrival_window")
    errors(c.patch("/shipments/00000000-0000-0000-0000-000000000000/stop_tracking"), 404)


def test_awaiting_manifest_then_expired(make_sandbox):
    srv = make_sandbox()
    c = Client(srv.base_url, FULL_KEY)
    waiting = ok(c.get("/tracking_requests?filter[status]=awaiting_manifest&page[size]=100"))["data"]
    assert waiting and all(t["attributes"]["status"] == "awaiting_manifest" for t in waiting)
    assert all(t["relationships"]["tracked_object"]["data"] is None for t in waiting)
    requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 8 * DAY}, timeout=10)
    for t in waiting:
        a = ok(c.get(f"/tracking_requests/{t['id']}"))["data"]["attributes"]
        assert a["status"] == "failed" and a["failed_reason"] == "expired"


def test_a_retrying_request_moves_its_updated_at_with_each_retry(make_sandbox):
    srv = make_sandbox()
    c = Client(srv.base_url, FULL_KEY)
    before = {t["id"]: t["attributes"] for t in ok(c.get("/tracking_requests?filter[status]=pending&page[size]=100"))["data"]}
    assert before and all(a["is_retrying"] for a in before.values())
    retried = None
    for _hour in range(48):  # the backoff doubles: the next retry is hours away
        requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 3600}, timeout=10)
        for tid, was in before.items():
            now = ok(c.get(f"/tracking_requests/{tid}"))["data"]["attributes"]
            if now["status"] == "pending" and now["retry_count"] > was["retry_count"]:
                retried = tid, was, now
        if retried:
            break
    assert retried, "no pending request retried within two days"
    tid, was, now = retried
    assert now["updated_at"] > was["updated_at"], (was, now)
    since = was["updated_at"].replace("Z", ".001Z")
    listed = ok(c.get(f"/tracking_requests?filter[updated_at][start]={since}&page[size]=100"))
    assert tid in {t["id"] for t in listed["data"]}, "a client following updated_at sees the retry"


def test_api_request_awaits_manifest_then_resolves(make_sandbox):
    srv = make_sandbox(limits={"default": 100_000, "tracking_requests_create": 100_000})
    c = Client(srv.base_url, FULL_KEY)
    ids = []
    for k in range(60):
        body = {"data": {"type": "tracking_request", "attributes": {
            "request_type": "bill_of_lading", "request_number": f"MEDU{9000000 + k}", "scac": "MSCU"}}}
        ids.append(ok(c.post("/tracking_requests", body), 201)["data"]["id"])
    requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 600}, timeout=10)
    states = {i: ok(c.get(f"/tracking_requests/{i}"))["data"]["attributes"]["status"] for i in ids}
    waiting = [i for i, st in states.items() if st == "awaiting_manifest"]
    assert waiting and set(states.values()) <= {"created", "awaiting_manifest"}
    requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 8 * DAY}, timeout=10)
    final = {ok(c.get(f"/tracking_requests/{i}"))["data"]["attributes"]["status"] for i in waiting}
    assert final <= {"created", "failed"}


def test_patch_tracking_request(own_sandbox):
    cl = Client(own_sandbox.base_url, FULL_KEY)  # the test changes a tracking request
    tr = ok(cl.get("/tracking_requests?filter[status]=created&page[size]=1"))["data"][0]
    body = {"data": {"type": "tracking_request", "id": tr["id"], "attributes": {"ref_number": "REFNUMBER11"}}}
    patched = ok(cl.patch(f"/tracking_requests/{tr['id']}", body))["data"]
    assert patched["attributes"]["ref_numbers"] == ["REFNUMBER11"]
    assert ok(cl.get(f"/tracking_requests/{tr['id']}"))["data"]["attributes"]["ref_numbers"] == ["REFNUMBER11"]
    bad = {"data": {"type": "tracking_request", "attributes": {"scac": "MSCU"}}}
    (e,) = errors(cl.patch(f"/tracking_requests/{tr['id']}", bad), 422)
    assert e["source"]["pointer"] == "/data/attributes/scac"
    errors(cl.patch("/tracking_requests/00000000-0000-0000-0000-000000000000", body), 404)
