"""The live routes added to the sandbox (search, raw events, future positions, metro areas, custom
fields) over real HTTP: shapes against the live captures and the spec, CRUD, filters, paging, determinism."""

from __future__ import annotations

import json

import jsonschema
import pytest

from tests.sandbox.http.test_http_openapi import schema  # noqa: F401  (the spec-schema fixture)
from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY, shared_dir

LIVE = shared_dir() / "reference" / "terminal49" / "fixtures"


def live(name: str, kind: str = "cli") -> dict:
    """A live capture's response body (the cli ones are wrapped in {ok, command, data})."""
    body = json.loads((LIVE / kind / name).read_text())
    return body["data"] if kind == "cli" else body


def same_shape(served: dict, captured: dict) -> None:
    """Top-level members, links/meta presence and, per resource, type, attribute keys and relationship
    names must match the capture (links compared by member names, data by its first resource)."""
    assert set(served) == set(captured), (set(served), set(captured))
    for member in ("links", "meta"):
        if isinstance(captured.get(member), dict):
            assert set(captured[member]) <= set(served[member]) | {"next", "last"}, member
    rows = served["data"] if isinstance(served["data"], list) else [served["data"]]
    want = captured["data"] if isinstance(captured["data"], list) else [captured["data"]]
    assert rows, "nothing served to compare"
    assert rows[0]["type"] == want[0]["type"]
    assert all(set(r["attributes"]) == set(want[0]["attributes"]) for r in rows)
    assert all(set(r.get("relationships", {})) == set(want[0].get("relationships", {})) for r in rows)


@pytest.fixture
def cl(sandbox) -> Client:
    """A full-key client of the session sandbox (read-only use)."""
    return Client(sandbox.base_url, FULL_KEY)


def _busy_container(cl: Client) -> tuple[str, list[dict]]:
    """A container with a vessel leg among its transport events."""
    for c in ok(cl.get("/containers?page[size]=60"))["data"]:
        events = ok(cl.get(f"/containers/{c['id']}/transport_events"))["data"]
        if any(e["relationships"]["vessel"]["data"] for e in events):
            return c["id"], events
    raise AssertionError("no container with vessel events")


# ----- search --------------------------------------------------------------------------------------

def test_search_shapes_and_order(cl):
    ship = ok(cl.get("/shipments?page[size]=1"))["data"][0]
    bl = ship["attributes"]["bill_of_lading_number"]
    body = ok(cl.get(f"/search?query={bl}"))
    same_shape(body, live("search.shipment-bol.json"))
    first = body["data"][0]
    assert first["id"] == ship["id"] and first["attributes"]["entity_type"] == "shipment"
    assert first["attributes"]["number"] == bl and first["attributes"]["shipment_id"] is None
    assert body["links"]["current"].endswith(f"/v2/search?page[number]=1&query={bl}")
    assert "meta" not in body


def test_search_container_result_and_errors(cl):
    cont = ok(cl.get("/containers?page[size]=1"))["data"][0]
    number = cont["attributes"]["number"]
    body = ok(cl.get(f"/search?query={number.lower()}"))
    cargo = [r for r in body["data"] if r["attributes"]["entity_type"] == "cargo"]
    assert cargo and cargo[0]["id"] == cont["id"]
    assert cargo[0]["attributes"]["shipment_id"] == cont["relationships"]["shipment"]["data"]["id"]
    assert set(cargo[0]["attributes"]) == set(live("search.container-list-number.json")["data"][0]["attributes"])
    kinds = [r["attributes"]["entity_type"] for r in body["data"]]
    assert kinds == sorted(kinds, key=["shipment", "cargo", "tracking_request"].index)
    assert ok(cl.get("/search?query=no-such-thing-anywhere"))["data"] == []
    assert len(ok(cl.get("/search?query=a"))["data"]) <= 25
    errors(cl.get("/search"), 400)
    errors(Client(cl.base_url, None).get("/search?query=x"), 401)


def test_search_tracking_request_without_shipment(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    body = {"data": {"type": "tracking_request", "attributes": {"request_type": "bill_of_lading",
                                                               "request_number": "SRCHPENDING123", "scac": "MAEU"}}}
    tid = ok(cl.post("/tracking_requests", body), 201)["data"]["id"]
    found = ok(cl.get("/search?query=srchpending"))["data"]
    assert [(r["id"], r["attributes"]["entity_type"]) for r in found] == [(tid, "tracking_request")]
    assert found[0]["attributes"]["status"] == "pending"


# ----- raw events ----------------------------------------------------------------------------------

def test_raw_events_shape_and_derivation(cl):
    cid, events = _busy_container(cl)
    body = ok(cl.get(f"/containers/{cid}/raw_events"))
    same_shape(body, live("containers.raw-events.json"))
    assert set(body) == set(live("containers.raw-events.json", "sdk")) == {"data", "included"}
    rows = body["data"]
    assert [r["attributes"]["index"] for r in rows] == list(range(len(events)))
    assert [r["attributes"]["timestamp"] for r in rows] == [e["attributes"]["timestamp"] for e in events]
    names = {r["attributes"]["event"] for r in rows} - {None}
    assert "vessel_departed" in names
    assert all(r["relationships"]["container"]["data"]["id"] == cid for r in rows)
    included = {(i["type"], i["id"]) for i in body["included"]}
    for r in rows:
        for rel in ("location", "vessel"):
            data = r["relationships"][rel]["data"]
            assert data is None or (data["type"], data["id"]) in included
    sailed = next(r for r in rows if r["attributes"]["event"] == "vessel_departed")
    assert sailed["attributes"]["vessel_name"] and sailed["attributes"]["vessel_imo"]
    assert ok(cl.get(f"/containers/{cid}/raw_events")) == body
    errors(cl.get("/containers/00000000-0000-0000-0000-000000000000/raw_events"), 404)


def test_raw_events_schema(cl, schema):  # noqa: F811
    cid, _ = _busy_container(cl)
    model = schema("raw_event")  # live raw events carry original_event: null where the spec says string
    model["properties"]["attributes"]["properties"]["original_event"] = {"type": ["string", "null"]}
    for row in ok(cl.get(f"/containers/{cid}/raw_events"))["data"]:
        jsonschema.validate(row, model)


# ----- vessels and metro areas ---------------------------------------------------------------------

def _vessel_id(cl: Client) -> str:
    _, events = _busy_container(cl)
    return next(e["relationships"]["vessel"]["data"]["id"] for e in events if e["relationships"]["vessel"]["data"])


def test_vessel_by_imo_like_live(cl):
    vessel = ok(cl.get(f"/vessels/{_vessel_id(cl)}"))["data"]
    by_imo = ok(cl.get(f"/vessels/{vessel['attributes']['imo']}"))
    assert by_imo["data"]["id"] == vessel["id"]
    captured = live("vessels.get-by-imo.json")
    assert set(by_imo["data"]["attributes"]) == set(captured["data"]["attributes"])
    assert by_imo["links"]["self"].endswith(f"/v2/vessels/{vessel['attributes']['imo']}")


def test_future_positions(cl, schema):  # noqa: F811
    vid = _vessel_id(cl)
    body = ok(cl.get(f"/vessels/{vid}/future_positions?port_id=USLAX&previous_port_id=CNSHA"))
    assert set(body) == {"data", "links"}
    jsonschema.validate(body["data"], schema("vessel_with_positions"))
    pos = body["data"]["attributes"]["positions"]
    assert len(pos) >= 2 and all(p["estimated"] for p in pos)
    assert abs(pos[-1]["latitude"] - 33.7361) < 0.5
    assert pos[0]["timestamp"] == body["data"]["attributes"]["position_timestamp"]
    coords = ok(cl.get(f"/vessels/{vid}/future_positions_with_coordinates?port_id=USLAX&previous_port_id=CNSHA"
                       "&latitude=30&longitude=130"))
    jsonschema.validate(coords["data"], schema("vessel_with_positions"))
    first = coords["data"]["attributes"]["positions"][0]
    assert (first["latitude"], first["longitude"]) == (30.0, 130.0)
    errors(cl.get(f"/vessels/{vid}/future_positions?port_id=USLAX"), 400)
    errors(cl.get(f"/vessels/{vid}/future_positions_with_coordinates?port_id=USLAX&previous_port_id=CNSHA"
                  "&latitude=x&longitude=1"), 400)
    errors(cl.get(f"/vessels/{vid}/future_positions?port_id=XXXXX&previous_port_id=CNSHA"), 404)
    errors(cl.get("/vessels/nope/future_positions?port_id=USLAX&previous_port_id=CNSHA"), 404)
    (e,) = errors(Client(cl.base_url, BASIC_KEY).get(
        f"/vessels/{vid}/future_positions?port_id=USLAX&previous_port_id=CNSHA"), 403)
    assert e["detail"] == "Routing data feature is not enabled for this account"


def test_metro_area(cl, schema):  # noqa: F811
    body = ok(cl.get("/metro_areas/uslax"))
    jsonschema.validate(body["data"], schema("metro_area"))
    assert body["data"]["attributes"]["code"] == "USLAX"
    assert ok(cl.get(f"/metro_areas/{body['data']['id']}"))["data"] == body["data"]
    errors(cl.get("/metro_areas/ZZZZZ"), 404)


# ----- custom fields -------------------------------------------------------------------------------

def test_definitions_shape_filters_and_paging(cl, schema):  # noqa: F811
    body = ok(cl.get("/custom_field_definitions?page[size]=2"))
    same_shape(body, live("custom-field-definitions.list.json"))
    assert set(body["links"]) == {"self", "current", "next", "last"}
    full = ok(cl.get("/custom_field_definitions"))
    defs = full["data"]
    assert 1 < len(defs) <= 25 and "next" not in full["links"]
    for d in defs:  # the live service says "Cargo" where the spec's enum has "Container"
        cargo_as_spec = {**d["attributes"], "entity_type": d["attributes"]["entity_type"].replace("Cargo", "Container")}
        jsonschema.validate({**d, "attributes": cargo_as_spec}, schema("custom_field_definition"))
    slugs = [d["attributes"]["api_slug"] for d in defs]
    assert slugs[:3] == ["purchase_order_number", "sales_order_number", "packing_list_number"]
    one = ok(cl.get(f"/custom_field_definitions/{defs[0]['id']}"))
    same_shape(one, live("custom-field-definitions.get.json"))
    enums = ok(cl.get("/custom_field_definitions?filter[data_type]=enum"))["data"]
    assert enums and all(d["attributes"]["data_type"] == "enum" for d in enums)
    cargo = ok(cl.get("/custom_field_definitions?filter[entity_type]=Container"))["data"]
    assert cargo and all(d["attributes"]["entity_type"] == "Cargo" for d in cargo)
    assert any(d["attributes"]["data_type"] == "enum" for d in cargo)
    named = ok(cl.get("/custom_field_definitions?filter[display_name]=purch"))["data"]
    assert [d["attributes"]["api_slug"] for d in named] == ["purchase_order_number"]
    errors(cl.get("/custom_field_definitions/nope"), 404)


def test_options_list_shape(cl, schema):  # noqa: F811
    enum = ok(cl.get("/custom_field_definitions?filter[data_type]=enum"))["data"][0]
    body = ok(cl.get(f"/custom_field_definitions/{enum['id']}/options?page[size]=2"))
    captured = live("custom-field-options.list.json")
    assert set(body) == set(captured) and set(captured["links"]) <= set(body["links"])
    assert body["data"] and all(o["type"] == "custom_field_option" for o in body["data"])
    for o in body["data"]:
        jsonschema.validate(o, schema("custom_field_option"))
    assert [o["id"] for o in enum["relationships"]["options"]["data"]][:2] == [o["id"] for o in body["data"]]
    opt = body["data"][0]
    assert ok(cl.get(f"/custom_field_definitions/{enum['id']}/options/{opt['id']}"))["data"] == opt


def test_custom_fields_list_filters_and_paging(cl, schema):  # noqa: F811
    body = ok(cl.get("/custom_fields"))
    assert len(body["data"]) == 25 and "next" in body["links"]
    for f in body["data"]:
        jsonschema.validate(f, schema("custom_field"))
        assert set(f["attributes"]) == {"api_slug", "value", "display_value"}
        assert set(f["relationships"]) == {"entity", "definition"}
    ship = ok(cl.get("/custom_fields?filter[entity_type]=Shipment&page[size]=100"))["data"]
    cont = ok(cl.get("/custom_fields?filter[entity_type]=Container&page[size]=100"))["data"]
    assert ship and cont
    assert {f["relationships"]["entity"]["data"]["type"] for f in ship} == {"shipment"}
    assert {f["relationships"]["entity"]["data"]["type"] for f in cont} == {"container"}
    sid = ship[0]["relationships"]["entity"]["data"]["id"]
    mine = ok(cl.get(f"/custom_fields?filter[entity_id]={sid}"))["data"]
    assert mine and all(f["relationships"]["entity"]["data"]["id"] == sid for f in mine)
    assert ok(cl.get(f"/shipments/{sid}/custom_fields"))["data"] == mine
    did = ship[0]["relationships"]["definition"]["data"]["id"]
    by_def = ok(cl.get(f"/custom_fields?filter[definition_id]={did}&page[size]=100"))["data"]
    assert by_def and all(f["relationships"]["definition"]["data"]["id"] == did for f in by_def)
    flags = [f for f in cont if f["attributes"]["api_slug"] == "hazmat_indicator"]
    assert flags and all(f["attributes"]["display_value"] in ("Yes", "No") for f in flags)
    assert ok(cl.get(f"/custom_fields/{mine[0]['id']}"))["data"] == mine[0]
    errors(cl.get("/custom_fields/nope"), 404)


def test_custom_fields_are_deterministic_per_seed(make_sandbox):
    a, b = (Client(make_sandbox().base_url, FULL_KEY) for _ in range(2))
    for path in ("/custom_field_definitions", "/custom_fields?page[size]=100&page[number]=2"):
        assert ok(a.get(path))["data"] == ok(b.get(path))["data"]
    other = Client(make_sandbox(seed=8).base_url, FULL_KEY)
    assert ok(other.get("/custom_fields"))["data"] != ok(a.get("/custom_fields"))["data"]
    basic = {d["id"] for d in ok(Client(a.base_url, BASIC_KEY).get("/custom_field_definitions"))["data"]}
    assert not basic & {d["id"] for d in ok(a.get("/custom_field_definitions"))["data"]}


def _body(type_: str, **attrs) -> dict:
    return {"data": {"type": type_, "attributes": attrs}}


def test_definition_crud_and_validation(make_sandbox):
    cl = Client(make_sandbox().base_url, FULL_KEY)
    created = ok(cl.post("/custom_field_definitions", _body(
        "custom_field_definition", entity_type="Shipment", api_slug="booking_desk", display_name="Booking Desk",
        data_type="enum")), 201)
    did = created["data"]["id"]
    assert created["links"]["self"].endswith(f"/custom_field_definitions/{did}")
    listed = [d["id"] for d in ok(cl.get("/custom_field_definitions?page[size]=100"))["data"]]
    assert listed.count(did) == 1 and listed[-1] == did
    opt = ok(cl.post(f"/custom_field_definitions/{did}/options",
                     _body("custom_field_option", label="North", value="north")), 201)["data"]
    assert ok(cl.patch(f"/custom_field_definitions/{did}/options/{opt['id']}",
                       _body("custom_field_option", label="North desk")))["data"]["attributes"]["label"] == "North desk"
    patched = ok(cl.patch(f"/custom_field_definitions/{did}", _body("custom_field_definition",
                                                                   display_name="Desk")))["data"]
    assert patched["attributes"]["display_name"] == "Desk"
    assert patched["relationships"]["options"]["data"] == [{"id": opt["id"], "type": "custom_field_option"}]
    for bad in ({"api_slug": "purchase_order_number"}, {"api_slug": "Bad Slug"}, {"data_type": "colour"},
                {"entity_type": "Vessel"}, {"display_name": ""}):
        attrs = {"entity_type": "Shipment", "api_slug": "x_new", "display_name": "X", "data_type": "short_text",
                 **bad}
        (e,) = errors(cl.post("/custom_field_definitions", _body("custom_field_definition", **attrs)), 422)
        assert e["source"]["pointer"].startswith("/data/attributes/")
    errors(cl.post("/custom_field_definitions", _body("custom_field", api_slug="x")), 409)
    ok(cl.s.delete(cl.url(f"/custom_field_definitions/{did}/options/{opt['id']}")))
    errors(cl.get(f"/custom_field_definitions/{did}/options/{opt['id']}"), 404)
    ok(cl.s.delete(cl.url(f"/custom_field_definitions/{did}")))
    errors(cl.get(f"/custom_field_definitions/{did}"), 404)
    errors(cl.s.delete(cl.url(f"/custom_field_definitions/{did}")), 404)


def test_custom_field_crud_round_trip(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    sid = ok(cl.get("/shipments?page[size]=1"))["data"][0]["id"]
    existing = {f["attributes"]["api_slug"] for f in ok(cl.get(f"/shipments/{sid}/custom_fields"))["data"]}
    slug = next(s for s in ("customer_reference_number", "packing_list_number") if s not in existing)
    body = {"data": {"type": "custom_field", "attributes": {"api_slug": slug, "value": "CR-1"},
                     "relationships": {"entity": {"data": {"type": "shipment", "id": sid}}}}}
    created = ok(cl.post("/custom_fields", body), 201)["data"]
    fid = created["id"]
    assert created["attributes"] == {"api_slug": slug, "value": "CR-1", "display_value": "CR-1"}
    rows = ok(cl.get(f"/custom_fields?filter[entity_id]={sid}"))["data"]
    assert [r["id"] for r in rows].count(fid) == 1
    (dup,) = errors(cl.post("/custom_fields", body), 422)
    assert dup["source"]["pointer"] == "/data/attributes/api_slug"
    patched = ok(cl.patch(f"/custom_fields/{fid}", _body("custom_field", value="CR-2")))["data"]
    assert patched["attributes"]["value"] == "CR-2"
    errors(cl.patch(f"/custom_fields/{fid}", _body("custom_field", value=12)), 422)
    ok(cl.s.delete(cl.url(f"/custom_fields/{fid}")))
    errors(cl.get(f"/custom_fields/{fid}"), 404)
    assert fid not in [r["id"] for r in ok(cl.get(f"/custom_fields?filter[entity_id]={sid}"))["data"]]
    bad_slug = {"data": {**body["data"], "attributes": {"api_slug": "no_such_slug", "value": "x"}}}
    errors(cl.post("/custom_fields", bad_slug), 422)
    missing = {"data": {**body["data"], "relationships": {"entity": {"data": {"type": "shipment", "id": "nope"}}}}}
    errors(cl.post("/custom_fields", missing), 404)


def test_per_entity_routes(make_sandbox):
    cl = Client(make_sandbox().base_url, FULL_KEY)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    base = f"/containers/{cid}/custom_fields"
    for f in ok(cl.get(base))["data"]:
        assert cl.s.delete(cl.url(f"{base}/{f['attributes']['api_slug']}")).status_code == 204
    assert ok(cl.get(base))["data"] == []
    created = ok(cl.post(base, _body("custom_field", api_slug="unloading_priority", value="high")), 201)["data"]
    assert created["attributes"]["display_value"] == "High"
    assert created["relationships"]["entity"]["data"] == {"type": "container", "id": cid}
    errors(cl.post(base, _body("custom_field", api_slug="unloading_priority", value="high")), 422)
    errors(cl.post(base, _body("custom_field", api_slug="hazmat_indicator", value="yes")), 422)
    errors(cl.post(base, _body("custom_field", api_slug="purchase_order_number", value="PO-1")), 422)
    assert ok(cl.post(base, _body("custom_field", api_slug="declared_weight_kg", value=12000.0)),
              201)["data"]["attributes"]["display_value"] == "12000"
    errors(cl.patch(f"{base}/unloading_priority", _body("custom_field", value="urgent")), 422)
    assert ok(cl.patch(f"{base}/unloading_priority", _body("custom_field", value="low")))["data"]["attributes"][
        "value"] == "low"
    assert cl.s.delete(cl.url(f"{base}/unloading_priority")).status_code == 204
    errors(cl.patch(f"{base}/unloading_priority", _body("custom_field", value="low")), 404)
    errors(cl.get("/containers/nope/custom_fields"), 404)
    tid = ok(cl.get("/tracking_requests?page[size]=1"))["data"][0]["id"]
    assert ok(cl.get(f"/tracking_requests/{tid}/custom_fields"))["data"] == []
    errors(cl.post(f"/tracking_requests/{tid}/custom_fields", _body("custom_field", api_slug="x", value="y")), 422)


def test_custom_fields_list_can_fail_like_live_on_demand(make_sandbox):
    from tests.sandbox.http.test_http_faults import BIG, set_faults

    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    assert ok(cl.get("/custom_fields"))["data"]
    set_faults(srv, routes=[{"path": "/v2/custom_fields", "status": 500}])
    (e,) = errors(cl.get("/custom_fields"), 500)
    assert e["title"] == "Internal Server Error"
    assert ok(cl.get("/custom_field_definitions"))["data"]
