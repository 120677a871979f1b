"""Hostile input over real HTTP: each test sends what once broke the sandbox (a 500, a resource that
could never be read again, an event loop blocked for seconds, a clock beyond repair) and checks the
JSON:API error that answers it now, and that the sandbox still answers afterwards."""

from __future__ import annotations

import contextlib
import socket
import threading
import time

import pytest
import requests

from sandbox.limits import JSON_BODY_LIMIT
from tests.support.sandbox_http import JSONAPI, Client, errors, ok
from tests.support.sandboxes import FULL_KEY

BIG = {"default": 100_000, "tracking_requests_create": 100_000, "infer_number": 100_000, "refresh": 100_000}
AUTH = {"Authorization": f"Token {FULL_KEY}", "Content-Type": JSONAPI}


def still_answers(srv) -> None:
    """The sandbox serves its control and API endpoints as before."""
    assert requests.get(srv.root_url + "/_sandbox/health", timeout=10).json()["status"] == "ok"
    assert ok(Client(srv.base_url, FULL_KEY).get("/shipments?page[size]=2"))["data"]


def post_raw(srv, path: str, body: bytes | str, headers: dict | None = None) -> requests.Response:
    """POST `body` exactly as given (no re-encoding by requests)."""
    data = body.encode() if isinstance(body, str) else body
    return requests.post(srv.root_url + path, data=data, headers=headers or AUTH, timeout=30)


def tracking_body(**attrs) -> dict:
    """A valid create-tracking-request body with `attrs` overriding its attributes."""
    return {"data": {"type": "tracking_request", "attributes": {
        "request_type": "bill_of_lading", "request_number": "MAEU5550009", "scac": "MAEU", **attrs}}}


@pytest.mark.parametrize("depth", [100, 1_000, 100_000])
def test_deeply_nested_json_is_a_400(sandbox, depth):
    """Nesting beyond MAX_JSON_DEPTH (once a RecursionError 500 from 1,000 levels) is a 400."""
    body = '{"data": {"type": "tracking_request", "attributes": {"ref_numbers": ' + "[" * depth + "]" * depth + "}}}"
    (e,) = errors(post_raw(sandbox, "/v2/tracking_requests", body), 400)
    assert "nested" in e["detail"]
    still_answers(sandbox)


@pytest.mark.parametrize("relationships", [[], "x", 5, {"customer": "x"}, {"customer": [1]}])
def test_non_object_relationships_are_a_400(sandbox, relationships):
    """`relationships` (or one of them, or its data) that is no object was a 500; now a 400 with its pointer."""
    body = tracking_body()
    body["data"]["relationships"] = relationships
    (e,) = errors(Client(sandbox.base_url, FULL_KEY).post("/tracking_requests", body), 400)
    assert e["source"]["pointer"].startswith("/data/relationships")
    still_answers(sandbox)


@pytest.mark.parametrize("body", [
    [], "MAEU221876618", 5, {"data": "x"}, {"data": {"attributes": []}}, {"data": {"attributes": "MAEU1"}},
    {"number": {"x": 1}},
])
def test_infer_number_with_non_object_input_is_a_4xx(sandbox, body):
    """infer_number with a non-object body or attributes was a 500; now a JSON:API 400/422."""
    resp = Client(sandbox.base_url, FULL_KEY).post("/tracking_requests/infer_number", body)
    assert resp.status_code in (400, 422), resp.text
    errors(resp, resp.status_code)
    still_answers(sandbox)


def test_lone_surrogate_is_refused_and_nothing_stored(make_sandbox):
    """A lone UTF-16 surrogate was stored, and every read of it a 500 forever; now a 400 and nothing stored."""
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    before = len(ok(cl.get("/parties?page[size]=100"))["data"])
    raw = '{"data": {"type": "party", "attributes": {"company_name": "Bad \\ud800 Co"}}}'
    (e,) = errors(post_raw(srv, "/v2/parties", raw), 400)
    assert e["source"]["pointer"] == "/data/attributes/company_name"
    key = '{"data": {"type": "tracking_request", "attributes": {"\\udfff": 1}}}'
    errors(post_raw(srv, "/v2/tracking_requests", key), 400)
    assert len(ok(cl.get("/parties?page[size]=100"))["data"]) == before
    ok(cl.get("/tracking_requests"))  # every list still renders
    still_answers(srv)


@pytest.mark.parametrize("include", [
    "containers.shipment.containers.shipment.containers.shipment.containers.shipment",  # cyclic, depth 8
    ".".join(["containers", "shipment"] * 12),  # depth 24: 6 GB before
    "containers.bogus",
    "nonsense",
    "containers..transport_events",
    ",".join(f"containers.transport_events.location{i}" for i in range(30)),
])
def test_hostile_include_is_a_400(sandbox, include):
    """Cyclic/deep include paths (once seconds and gigabytes), unknown names, blanks and too many paths: 400."""
    resp = Client(sandbox.base_url, FULL_KEY).get(f"/shipments?page[size]=100&include={include}", timeout=60)
    (e,) = errors(resp, 400)
    assert e["source"] == {"parameter": "include"}
    still_answers(sandbox)


def test_cyclic_include_within_the_depth_limit_is_cheap_and_deduplicated(sandbox):
    """A cyclic path within the limit answers, with each included resource once and no primary one."""
    cl = Client(sandbox.base_url, FULL_KEY)
    body = ok(cl.get("/shipments?page[size]=100&include=containers.shipment.containers", timeout=60))
    keys = [(r["type"], r["id"]) for r in body["included"]]
    assert len(keys) == len(set(keys)) and keys
    primary = {(r["type"], r["id"]) for r in body["data"]}
    assert not primary & set(keys)


def test_every_include_the_pipeline_sends_still_works(sandbox):
    """The includes the pipeline and the docs use still succeed under the new checks."""
    from pipelines.source.resources import SHIPMENT_INCLUDES

    cl = Client(sandbox.base_url, FULL_KEY)
    assert ok(cl.get("/shipments?page[size]=100&include=" + ",".join(SHIPMENT_INCLUDES)))["included"]
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    ok(cl.get(f"/containers/{cid}?include=shipment,shipment.port_of_lading,pod_terminal,transport_events"))
    ok(cl.get(f"/containers/{cid}/transport_events?include=location,terminal"))
    ok(cl.get("/tracking_requests?include=tracked_object"))


@pytest.mark.parametrize("raw", [
    '{"advance_seconds": 1e12}', '{"advance_seconds": NaN}', '{"advance_seconds": Infinity}',
    '{"advance_seconds": -Infinity}', '{"advance_seconds": "inf"}', '{"advance_seconds": "10"}',
    '{"advance_seconds": 1e400}', '{"advance_seconds": -1}', '{"advance_seconds": true}', "[1]", "{",
])
def test_clock_refuses_what_it_cannot_be(make_sandbox, raw):
    """Huge, non-finite, negative or non-numeric advances once broke the clock for good; now 400, clock kept."""
    srv = make_sandbox()
    before = requests.get(srv.root_url + "/_sandbox/clock", timeout=10).json()["now"]
    resp = post_raw(srv, "/_sandbox/clock", raw, {"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    body = resp.json()
    assert body["errors"][0]["status"] == "400" and body["errors"][0]["title"]
    assert requests.get(srv.root_url + "/_sandbox/clock", timeout=10).json()["now"][:10] == before[:10]
    assert requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 60}, timeout=10).ok
    still_answers(srv)


@pytest.mark.parametrize("raw", [
    '{"seed": 1e400}', '{"seed": 1e300}', '{"seed": 1.5}', '{"seed": NaN}', '{"rate": NaN}', '{"rate": "inf"}',
    '{"delay": 1e400}', '{"delay": Infinity}', '{"profile": ["5xx"]}', '{"rate": [0.5]}',
])
def test_faults_refuse_non_finite_and_out_of_range(make_sandbox, raw):
    """A seed of 1e400 was a 500; non-finite or out-of-range fault settings are a 400 and change nothing."""
    srv = make_sandbox()
    before = requests.get(srv.root_url + "/_sandbox/faults", timeout=10).json()
    resp = post_raw(srv, "/_sandbox/faults", raw, {"Content-Type": "application/json"})
    assert resp.status_code == 400, resp.text
    assert resp.json()["errors"][0]["status"] == "400"
    assert requests.get(srv.root_url + "/_sandbox/faults", timeout=10).json() == before
    still_answers(srv)


def test_oversize_body_is_a_413_without_reading_it(sandbox):
    """A body over the limit is a 413, even one only announced by Content-Length (answered before it comes)."""
    huge = b'{"data": {"type": "party", "attributes": {"company_name": "' + b"x" * JSON_BODY_LIMIT + b'"}}}'
    errors(post_raw(sandbox, "/v2/parties", huge), 413)
    with socket.create_connection(("127.0.0.1", sandbox.port), timeout=30) as raw:  # declared, never sent
        raw.sendall(b"POST /v2/parties HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                    b"Content-Length: 10000000000\r\n\r\n")
        assert raw.recv(65536).startswith(b"HTTP/1.1 413")
    still_answers(sandbox)


def test_oversize_chunked_body_is_a_413(sandbox):
    """A chunked body is counted as it arrives and refused with a 413 once over the limit."""
    def chunks():
        for _ in range(2 * JSON_BODY_LIMIT // 65536 + 2):
            yield b" " * 65536

    try:
        resp = requests.post(sandbox.base_url + "/parties", data=chunks(), headers=AUTH, timeout=30)
    except requests.ConnectionError:  # the server may answer and close before the last chunk is sent
        pass
    else:
        errors(resp, 413)
    still_answers(sandbox)


@pytest.mark.parametrize("ctype", ["text/plain", "application/x-www-form-urlencoded", "multipart/form-data",
                                   "application/xml", "application/jsonx"])
def test_json_under_another_content_type_is_a_415(sandbox, ctype):
    """JSON sent as another media type is a 415, on the API and the control endpoints."""
    resp = post_raw(sandbox, "/v2/tracking_requests", '{"data": {}}', {**AUTH, "Content-Type": ctype})
    (e,) = errors(resp, 415)
    assert e["title"] == "Unsupported Media Type"
    errors(post_raw(sandbox, "/_sandbox/clock", '{"advance_seconds": 1}', {"Content-Type": ctype}), 415)
    still_answers(sandbox)


def test_json_content_types_with_parameters_are_accepted(sandbox):
    """Both JSON media types pass, whatever their case and parameters."""
    for ctype in ("application/json", "application/json; charset=utf-8", "application/vnd.api+json",
                  "Application/VND.API+JSON; charset=UTF-8"):
        resp = post_raw(sandbox, "/v2/tracking_requests/infer_number", '{"number": "MAEU221876618"}',
                        {**AUTH, "Content-Type": ctype})
        ok(resp)


@pytest.mark.slow
def test_a_slow_or_huge_request_never_blocks_other_clients(sandbox):
    """While one client drips a body byte by byte, another streams a huge one and a third sends costly
    bodies just under the limit, a fourth gets its answers."""
    stop = threading.Event()

    def drip() -> None:
        with socket.create_connection(("127.0.0.1", sandbox.port), timeout=60) as raw:
            raw.sendall(b"POST /v2/parties HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                        + f"Authorization: Token {FULL_KEY}\r\nContent-Length: 100000\r\n\r\n".encode())
            while not stop.is_set():
                raw.sendall(b" ")
                time.sleep(0.05)

    def flood() -> None:
        def chunks():
            while not stop.is_set():
                yield b" " * 4096
                time.sleep(0.01)

        with contextlib.suppress(requests.RequestException):
            requests.post(sandbox.base_url + "/parties", data=chunks(), headers=AUTH, timeout=60)

    def heavy() -> None:  # just under the limit, costly to decode: handled off the event loop
        body = b"[" + b"[]," * (JSON_BODY_LIMIT // 3 - 10) + b"[]]"
        while not stop.is_set():
            errors(post_raw(sandbox, "/v2/parties", body), 400)

    threads = [threading.Thread(target=f, daemon=True) for f in (drip, flood, heavy)]
    for t in threads:
        t.start()
    try:
        time.sleep(0.3)
        cl = Client(sandbox.base_url, FULL_KEY)
        for _ in range(5):
            assert ok(cl.get("/shipments?page[size]=5", timeout=30))["data"]
            assert requests.get(sandbox.root_url + "/_sandbox/health", timeout=30).ok
    finally:
        stop.set()
        for t in threads:
            t.join(30)
    still_answers(sandbox)
