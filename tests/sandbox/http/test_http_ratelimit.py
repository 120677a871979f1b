"""Rate limits: per key and bucket, rolling window, 429 body and an honest integer Retry-After."""

from __future__ import annotations

import time

import pytest
import requests

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY, FULL_KEY_2

LIMITS = {"default": 5, "tracking_requests_create": 3, "infer_number": 4, "refresh": 2}


def _exhaust(send, n):
    for _ in range(n):
        assert send().status_code != 429


@pytest.mark.slow
def test_default_bucket_429_and_honest_retry_after(make_sandbox):
    srv = make_sandbox(rate_window=2, limits=LIMITS)
    cl = Client(srv.base_url, FULL_KEY)
    _exhaust(lambda: cl.get("/shipments?page[size]=1"), 5)
    resp = cl.get("/shipments?page[size]=1")
    (e,) = errors(resp, 429)
    assert e["title"] == "Too Many Requests" and "try again" in e["detail"].lower()
    retry = resp.headers["Retry-After"]
    assert retry.isdigit() and 1 <= int(retry) <= 2
    time.sleep(int(retry))
    ok(cl.get("/shipments?page[size]=1"))


def test_limits_are_per_key(make_sandbox):
    srv = make_sandbox(rate_window=2, limits=LIMITS)
    a, b = Client(srv.base_url, FULL_KEY), Client(srv.base_url, FULL_KEY_2)
    _exhaust(lambda: a.get("/containers?page[size]=1"), 5)
    assert a.get("/containers?page[size]=1").status_code == 429
    ok(b.get("/containers?page[size]=1"))


def test_buckets_are_separate_with_their_own_wording(make_sandbox):
    srv = make_sandbox(rate_window=3, limits=LIMITS)
    cl = Client(srv.base_url, FULL_KEY)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    _exhaust(lambda: cl.get("/containers?page[size]=1"), 4)
    assert cl.get("/containers").status_code == 429
    ok(cl.s.patch(cl.url(f"/containers/{cid}/refresh"), timeout=10))
    ok(cl.s.patch(cl.url(f"/containers/{cid}/refresh"), timeout=10))
    (e,) = errors(cl.s.patch(cl.url(f"/containers/{cid}/refresh"), timeout=10), 429)
    assert e["detail"] == "You've hit the refresh limit. Please try again in a minute."
    body = {"data": {"type": "tracking_request", "attributes": {"request_type": "bill_of_lading",
                                                               "request_number": "MAEU1", "scac": "MAEU"}}}
    for _ in range(3):
        ok(cl.post("/tracking_requests", body), 201)
    (e,) = errors(cl.post("/tracking_requests", body), 429)
    assert "create tracking requests limit" in e["detail"]
    for _ in range(4):
        ok(cl.post("/tracking_requests/infer_number", {"number": "MAEU221876618"}))
    errors(cl.post("/tracking_requests/infer_number", {"number": "MAEU221876618"}), 429)
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=5).json()
    assert stats["rate_limited_total"] == 4


def test_published_refresh_limit_is_10(make_sandbox):
    srv = make_sandbox(rate_window=3)
    cl = Client(srv.base_url, FULL_KEY)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    codes = [cl.s.patch(cl.url(f"/containers/{cid}/refresh"), timeout=10).status_code for _ in range(11)]
    assert codes == [200] * 10 + [429]


def test_401_is_not_counted(make_sandbox):
    srv = make_sandbox(rate_window=5, limits=LIMITS)
    bad = Client(srv.base_url, "nope")
    for _ in range(8):
        assert bad.get("/shipments").status_code == 401
    ok(Client(srv.base_url, FULL_KEY).get("/shipments?page[size]=1"))
