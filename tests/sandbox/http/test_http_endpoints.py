"""Every /v2 endpoint answers with the right status, shape and entitlement rules."""

from __future__ import annotations

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY


def full(sandbox):
    return Client(sandbox.base_url, FULL_KEY)


def test_parties_create_get_list(own_sandbox):
    cl = full(own_sandbox)
    created = ok(cl.post("/parties", {"data": {"type": "party", "attributes": {"company_name": "Globex"}}}), 201)
    pid = created["data"]["id"]
    got = ok(cl.get(f"/parties/{pid}"))
    assert got["data"]["attributes"]["company_name"] == "Globex"
    assert pid in [p["id"] for p in ok(cl.get("/parties?page[size]=100"))["data"]]
    errors(Client(own_sandbox.base_url, BASIC_KEY).get(f"/parties/{pid}"), 404)


def test_tracking_request_lifecycle_and_filters(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    party = ok(cl.post("/parties", {"data": {"type": "party", "attributes": {"company_name": "Initech"}}}), 201)
    body = {"data": {"type": "tracking_request",
                     "attributes": {"request_type": "bill_of_lading", "request_number": "TEST-TR-SUCCEEDED",
                                    "scac": "TEST", "ref_numbers": ["PO-77"], "shipment_tags": ["t"]},
                     "relationships": {"customer": {"data": {"type": "party", "id": party["data"]["id"]}}}}}
    created = ok(cl.post("/tracking_requests", body), 201)
    tid = created["data"]["id"]
    assert created["data"]["relationships"]["customer"]["data"]["id"] == party["data"]["id"]
    got = ok(cl.get(f"/tracking_requests/{tid}"))
    assert got["data"]["id"] == tid and "included" in got
    listed = ok(cl.get("/tracking_requests?filter[status]=pending"))
    assert tid in [r["id"] for r in listed["data"]]
    assert all(r["attributes"]["status"] == "pending" for r in listed["data"])
    assert tid in [r["id"] for r in ok(cl.get("/tracking_requests?filter[request_number]=TEST-TR-SUCCEEDED"))["data"]]
    assert tid in [r["id"] for r in ok(cl.get("/tracking_requests?filter[scac]=TEST"))["data"]]
    ok(cl.get("/tracking_requests?filter[created_at][start]=2000-01-01T00:00:00Z&filter[updated_at][end]=2999-01-01T00:00:00Z&q=x"))
    errors(cl.get("/tracking_requests?filter[created_at][start]=yesterday"), 400)


def test_infer_number(sandbox):
    cl = full(sandbox)
    body = ok(cl.post("/tracking_requests/infer_number", {"number": "MAEU221876618"}))
    a = body["data"]["attributes"]
    assert body["data"]["type"] == "infer_number_results"
    assert a["number_type"] in ("container", "bill_of_lading", "booking")
    assert a["shipping_line"]["decision"] in ("auto_select", "needs_confirmation", "no_prediction")
    assert {"is_valid", "type", "check_digit_passed", "parsed_number", "reason"} <= set(a["validation"])
    cont = ok(cl.post("/tracking_requests/infer_number", {"number": "MSCU1234566"}))["data"]["attributes"]
    assert cont["number_type"] == "container"
    (e,) = errors(cl.post("/tracking_requests/infer_number", {"number": "!!"}), 422)
    assert e["detail"] == "This reference number is not valid."


def test_shipments_search_get_patch(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    first = ok(cl.get("/shipments?page[size]=1"))["data"][0]
    number = first["attributes"]["bill_of_lading_number"]
    assert first["id"] in [s["id"] for s in ok(cl.get(f"/shipments?q={number}"))["data"]]
    ok(cl.get(f"/shipments?number={number}"))
    got = ok(cl.get(f"/shipments/{first['id']}?include=containers"))
    assert got["data"]["id"] == first["id"]
    patched = ok(cl.patch(f"/shipments/{first['id']}", {"data": {"type": "shipment", "attributes": {
        "ref_numbers": ["REF-A", "REF-B"], "tags": ["x", "x", "y"]}}}))
    assert patched["data"]["attributes"]["ref_numbers"] == ["REF-A", "REF-B"]
    assert patched["data"]["attributes"]["tags"] == ["x", "y"]
    assert ok(cl.get(f"/shipments/{first['id']}"))["data"]["attributes"]["ref_numbers"] == ["REF-A", "REF-B"]
    errors(cl.patch("/shipments/00000000-0000-0000-0000-000000000000",
                    {"data": {"type": "shipment", "attributes": {"tags": []}}}), 404)


def test_containers_endpoints_and_entitlements(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    assert ok(cl.get(f"/containers/{cid}"))["data"]["id"] == cid
    patched = ok(cl.patch(f"/containers/{cid}", {"data": {"type": "container", "attributes": {"ref_numbers": ["C-1"]}}}))
    assert patched["data"]["attributes"]["ref_numbers"] == ["C-1"]
    events = ok(cl.get(f"/containers/{cid}/transport_events"))
    assert set(events["links"]) == {"self", "current"} and "meta" not in events
    fc = ok(cl.get(f"/containers/{cid}/map_geojson"))
    assert fc["type"] == "FeatureCollection" and isinstance(fc["features"], list)
    refresh = ok(cl.s.patch(cl.url(f"/containers/{cid}/refresh"), timeout=10))
    assert refresh == {"message": "Started refresh for Shipping line, Terminal, Rail"}
    basic = Client(srv.base_url, BASIC_KEY)
    bcid = ok(basic.get("/containers?page[size]=1"))["data"][0]["id"]
    (e,) = errors(basic.get(f"/containers/{bcid}/map_geojson"), 403)
    assert e["detail"] == "Routing data feature is not enabled for this account"
    errors(cl.get("/containers/nope/transport_events"), 404)
    errors(cl.get("/containers/nope/map_geojson"), 404)


def test_reference_data(sandbox):
    cl = full(sandbox)
    lines = ok(cl.get("/shipping_lines?page[size]=100"))["data"]
    assert lines and ok(cl.get(f"/shipping_lines/{lines[0]['id']}"))["data"]["id"] == lines[0]["id"]
    shp = ok(cl.get("/shipments?page[size]=20&include=port_of_lading,pod_terminal"))
    ports = [r for r in shp.get("included", []) if r["type"] == "port"]
    if ports:
        port = ports[0]
        assert ok(cl.get(f"/ports/{port['id']}"))["data"]["id"] == port["id"]
        code = port["attributes"].get("code")
        if code:
            assert ok(cl.get(f"/ports/{code}"))["data"]["id"] == port["id"]
    terms = [r for r in shp.get("included", []) if r["type"] == "terminal"]
    if terms:
        assert ok(cl.get(f"/terminals/{terms[0]['id']}"))["data"]["id"] == terms[0]["id"]
    vessel_imo = next((s["attributes"].get("pod_vessel_imo") for s in shp["data"] if s["attributes"].get("pod_vessel_imo")), None)
    if vessel_imo:
        v = ok(cl.get(f"/vessels/{vessel_imo}"))["data"]
        assert ok(cl.get(f"/vessels/{v['id']}"))["data"]["id"] == v["id"]
    for path in ("/ports/ZZZZZ", "/terminals/nope", "/vessels/0", "/shipping_lines/nope"):
        errors(cl.get(path), 404)
