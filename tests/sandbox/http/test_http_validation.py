"""Request validation: the four tracking-request 422 cases (together too), array-of-string rules,
malformed JSON, wrong type and missing data — always JSON:API 4xx, never 500."""

from __future__ import annotations

import pytest

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY

SUPPORTED, UNSUPPORTED, UNKNOWN = "MAEU", "WDSB", "QQQQ"  # WDSB: no tracking support in the live list


def tr(**attrs) -> dict:
    return {"data": {"type": "tracking_request", "attributes": attrs}}


@pytest.fixture
def cl(own_sandbox) -> Client:
    """A client of a sandbox of the test's own: the valid requests create tracking requests and parties."""
    return Client(own_sandbox.base_url, FULL_KEY)


def by_pointer(errs):
    return {e["source"]["pointer"]: e for e in errs}


def test_blank_request_number(cl):
    (e,) = errors(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number=" ", scac=SUPPORTED)), 422)
    assert e["source"]["pointer"] == "/data/attributes/request_number" and e["code"] == "blank"
    assert e["title"] == "Unprocessable Entity"


def test_blank_scac_without_auto_detect(cl):
    (e,) = errors(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number="MAEU1")), 422)
    assert e["source"]["pointer"] == "/data/attributes/scac" and e["code"] == "blank"


def test_blank_scac_with_auto_detect_is_accepted(cl):
    body = ok(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number="MAEU221876618",
                                               auto_detect_vocc_scac=True)), 201)
    assert body["data"]["attributes"]["status"] == "pending" and body["data"]["attributes"]["scac"] is None


def test_unknown_scac(cl):
    (e,) = errors(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number="X1", scac=UNKNOWN)), 422)
    assert e["source"]["pointer"] == "/data/attributes/scac" and "not recognized" in e["detail"]


def test_unsupported_scac(cl):
    (e,) = errors(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number="X1", scac=UNSUPPORTED)), 422)
    assert e["source"]["pointer"] == "/data/attributes/scac" and "not supported" in e["detail"]


def test_several_errors_at_once(cl):
    errs = errors(cl.post("/tracking_requests", tr(request_number="", scac=UNKNOWN, ref_numbers="PO1")), 422)
    ptrs = by_pointer(errs)
    assert {"/data/attributes/request_number", "/data/attributes/scac", "/data/attributes/ref_numbers"} <= set(ptrs)


def test_create_returns_201(cl):
    body = ok(cl.post("/tracking_requests", tr(request_type="bill_of_lading", request_number="MAEU100200300",
                                               scac=SUPPORTED, ref_numbers=["PO-1"])), 201)
    assert body["data"]["type"] == "tracking_request" and body["data"]["attributes"]["status"] == "pending"


@pytest.mark.parametrize("value", ["PO1", [1, 2], ["ok", None], {"a": "b"}, None])
def test_ref_numbers_must_be_string_array(cl, value):
    sid = ok(cl.get("/shipments?page[size]=1"))["data"][0]["id"]
    (e,) = errors(cl.patch(f"/shipments/{sid}", {"data": {"type": "shipment", "attributes": {"ref_numbers": value}}}), 422)
    assert e["source"]["pointer"] == "/data/attributes/ref_numbers"
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    (e,) = errors(cl.patch(f"/containers/{cid}", {"data": {"type": "container", "attributes": {"ref_numbers": value}}}), 422)
    assert e["source"]["pointer"] == "/data/attributes/ref_numbers"


@pytest.mark.parametrize("path,method", [("/tracking_requests", "post"), ("/parties", "post"), ("/documents", "post"),
                                         ("/shipments/{sid}", "patch"), ("/containers/{cid}", "patch")])
def test_malformed_wrong_type_missing_data(cl, path, method):
    sid = ok(cl.get("/shipments?page[size]=1"))["data"][0]["id"]
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    url = cl.url(path.format(sid=sid, cid=cid))
    send = getattr(cl.s, method)
    hdr = {"Content-Type": "application/vnd.api+json"}
    errors(send(url, data=b"{not json", headers=hdr, timeout=10), 400)
    errors(send(url, data=b"\xff\xfe", headers=hdr, timeout=10), 400)
    errors(send(url, json={"nodata": 1}, timeout=10), 400)
    errors(send(url, json=[1, 2], timeout=10), 400)
    errors(send(url, data=b"", headers=hdr, timeout=10), 400)
    errors(send(url, json={"data": {"type": "wrong_type", "attributes": {}}}, timeout=10), 409)
    errors(send(url, json={"data": {"type": path.split("/")[1].rstrip("s").replace("partie", "party"),
                                    "attributes": "x"}}, timeout=10), 400)


def test_party_company_name_required(cl):
    (e,) = errors(cl.post("/parties", {"data": {"type": "party", "attributes": {}}}), 422)
    assert e["source"]["pointer"] == "/data/attributes/company_name"


def test_unknown_customer_is_422(cl):
    body = tr(request_type="bill_of_lading", request_number="MAEU1", scac=SUPPORTED)
    body["data"]["relationships"] = {"customer": {"data": {"type": "party", "id": "00000000-0000-0000-0000-000000000000"}}}
    (e,) = errors(cl.post("/tracking_requests", body), 422)
    assert e["source"]["pointer"] == "/data/relationships/customer"
