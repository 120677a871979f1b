"""Fault profiles: seeded, /v2 only, switchable at runtime through POST /_sandbox/faults."""

from __future__ import annotations

import time

import pytest
import requests

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY

BIG = {"default": 10_000, "tracking_requests_create": 10_000, "infer_number": 10_000, "refresh": 10_000}


def set_faults(srv, **body):
    resp = requests.post(srv.root_url + "/_sandbox/faults", json=body, timeout=5)
    assert resp.status_code == 200, resp.text
    return resp.json()


def test_none_by_default_and_control_never_faulted(make_sandbox):
    srv = make_sandbox(limits=BIG)
    assert requests.get(srv.root_url + "/_sandbox/faults", timeout=5).json()["profile"] == "none"
    set_faults(srv, profile="5xx", rate=1.0, seed=1)
    for _ in range(5):
        assert requests.get(srv.root_url + "/_sandbox/health", timeout=5).status_code == 200


def test_5xx_bursts_are_jsonapi_and_seeded(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)

    def run():
        set_faults(srv, profile="5xx", rate=0.5, seed=42)
        return [cl.get("/shipments?page[size]=1").status_code for _ in range(30)]

    first = run()
    assert set(first) <= {200, 500, 502, 503} and set(first) & {500, 502, 503} and 200 in first
    assert run() == first
    resp = next(r for r in (cl.get("/parties") for _ in range(50)) if r.status_code >= 500)
    assert resp.json()["errors"][0]["status"] == str(resp.status_code)
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=5).json()
    assert stats["faults_served"]["5xx"] >= 1


@pytest.mark.slow
def test_429_storm_has_honest_retry_after(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    set_faults(srv, profile="429", rate=1.0, seed=3)
    resp = cl.get("/shipments?page[size]=1")
    (e,) = errors(resp, 429)
    assert e["title"] == "Too Many Requests"
    retry = int(resp.headers["Retry-After"])
    time.sleep(retry)
    ok(cl.get("/shipments?page[size]=1"))


@pytest.mark.slow
def test_slow_exceeds_client_timeout(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    set_faults(srv, profile="slow", rate=1.0, delay=1.5)
    with pytest.raises(requests.exceptions.ReadTimeout):
        cl.get("/shipments?page[size]=1", timeout=0.5)
    set_faults(srv, profile="none")
    ok(cl.get("/shipments?page[size]=1"))


@pytest.mark.parametrize("profile", ["reset", "truncated"])
def test_connection_faults(make_sandbox, profile):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    set_faults(srv, profile=profile, rate=1.0)
    with pytest.raises((requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError)):
        r = requests.get(cl.url("/shipments?page[size]=50"), headers=cl.s.headers, timeout=10)
        r.json()
    set_faults(srv, profile="none")
    ok(requests.get(cl.url("/shipments?page[size]=1"), headers=cl.s.headers, timeout=10))


def test_mixed_and_bad_profile(make_sandbox):
    srv = make_sandbox(limits=BIG)
    set_faults(srv, profile="mixed", rate=0.3, seed=9, delay=0.2)
    kinds = set()
    for _ in range(40):
        try:
            r = requests.get(srv.base_url + "/containers?page[size]=5", headers={"Authorization": f"Token {FULL_KEY}"},
                             timeout=5)
            kinds.add(r.status_code)
            r.json()
        except (requests.exceptions.ConnectionError, requests.exceptions.ChunkedEncodingError, ValueError):
            kinds.add("conn")
        time.sleep(0.01)
    assert 200 in kinds and len(kinds) > 1
    assert requests.post(srv.root_url + "/_sandbox/faults", json={"profile": "bogus"}, timeout=5).status_code == 400
