"""Retries over real loopback HTTP: 429 + Retry-After, 5xx, truncated bodies, dropped connections, POST safety."""

from __future__ import annotations

import socket

import pytest

from pipelines import errors
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from tests.pipelines.conftest import TEST_KEY, Reply

OK = {"data": [{"id": "s1", "type": "shipment", "attributes": {}}]}
TOO_MANY = {"errors": [{"status": "429", "title": "Too Many Requests", "detail": "Try later"}]}
BOOM = {"errors": [{"status": "500", "source": None, "title": "Internal Server Error", "detail": None}]}


def test_429_waits_retry_after_and_every_attempt_goes_through_the_limiter(api_server, make_client):
    api_server.script("GET", "/shipments", Reply(429, TOO_MANY, {"Retry-After": "1"}), Reply(body=OK))
    client = make_client()
    assert client.get("shipments") == OK
    stats = client.stats()
    assert stats["responses_429"] == 1 and stats["retries"] == 1
    assert stats["requests"] == {"default": 2}
    assert client.limiter.stats()["requests"] == {"default": 2}  # the retry was admitted by the limiter too
    assert stats["retry_sleep_seconds"] >= 1  # Retry-After honoured, not the 0.01 s backoff


def test_429_http_date_retry_after_is_understood(api_server, make_client):
    api_server.script(
        "GET", "/shipments", Reply(429, TOO_MANY, {"Retry-After": "Wed, 21 Oct 2015 07:28:00 GMT"}), Reply(body=OK)
    )
    assert make_client().get("shipments") == OK  # a date in the past means: retry now


def test_429_exhausted_raises_rate_limited(api_server, make_client):
    api_server.script("GET", "/shipments", *[Reply(429, TOO_MANY, {"Retry-After": "0"})] * 3)
    with pytest.raises(errors.RateLimitedError):
        make_client().get("shipments")
    assert len(api_server.seen()) == 3


def test_5xx_retried_then_succeeds(api_server, make_client):
    api_server.script("GET", "/shipments", Reply(500, BOOM), Reply(503, b"upstream down"), Reply(body=OK))
    client = make_client()
    assert client.get("shipments") == OK
    assert client.stats()["retries"] == 2


def test_5xx_exhausted_raises_upstream(api_server, make_client):
    api_server.script("GET", "/custom_fields", *[Reply(500, BOOM)] * 3)
    with pytest.raises(errors.UpstreamError, match="Internal Server Error"):
        make_client().get("custom_fields")
    assert len(api_server.seen()) == 3


def test_truncated_body_is_retried(api_server, make_client):
    api_server.script("GET", "/shipments", Reply(body=OK, truncate=True), Reply(body=OK))
    client = make_client()
    assert client.get("shipments") == OK
    assert client.stats()["retries"] == 1


def test_truncated_body_every_time_is_malformed(api_server, make_client):
    api_server.script("GET", "/shipments", *[Reply(body=OK, truncate=True)] * 3)
    with pytest.raises(errors.MalformedResponseError, match="truncated"):
        make_client().get("shipments")


def test_patch_is_retried_with_the_same_body(api_server, make_client):
    api_server.script("PATCH", "/containers/c1", Reply(502, b""), Reply(200, {"data": None}))
    body = {"data": {"type": "container", "attributes": {"ref_numbers": ["R1"]}}}
    make_client().patch("containers/c1", body)
    first, second = api_server.seen("PATCH")
    assert first.body == second.body != b""


def test_post_is_not_retried_on_5xx(api_server, make_client):
    api_server.script("POST", "/tracking_requests", Reply(500, BOOM), Reply(201, {"data": None}))
    client = make_client()
    with pytest.raises(errors.UpstreamError):
        client.post("tracking_requests", {"data": {}})
    assert len(api_server.seen("POST")) == 1
    assert client.stats()["requests"] == {"create_tracking_request": 1}


def test_post_is_retried_on_429(api_server, make_client):
    api_server.script("POST", "/tracking_requests", Reply(429, TOO_MANY, {"Retry-After": "0"}), Reply(201, {"data": None}))
    make_client().post("tracking_requests", {"data": {}})
    assert len(api_server.seen("POST")) == 2


def test_post_dropped_connection_says_outcome_unknown(api_server, make_client):
    api_server.script("POST", "/tracking_requests", Reply(drop=True), Reply(201, {"data": None}))
    with pytest.raises(errors.WriteOutcomeUnknownError, match="may or may not have happened"):
        make_client().post("tracking_requests", {"data": {}})
    assert len(api_server.seen("POST")) == 1


def test_post_marked_retry_safe_is_retried(api_server, make_client):
    api_server.script("POST", "/tracking_requests", Reply(drop=True), Reply(201, {"data": {"id": "t1"}}))
    assert make_client().post("tracking_requests", {"data": {}}, retry_safe=True) == {"data": {"id": "t1"}}


def test_get_dropped_connection_is_retried(api_server, make_client):
    api_server.script("GET", "/shipments", Reply(drop=True), Reply(body=OK))
    assert make_client().get("shipments") == OK


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_refused_connection_post_is_retried_then_transport_error(tmp_path):
    # Nothing listens: the request never left, so even a POST may be retried, and the error is not
    # "outcome unknown".
    settings = load_settings(api_key=TEST_KEY, base_url=f"http://127.0.0.1:{_closed_port()}/v2",
                             max_attempts=2, backoff_factor=0.01, limiter_path=tmp_path / "l.sqlite")
    client = OceanTrackingClient(settings)
    with pytest.raises(errors.TransportError) as info:
        client.post("tracking_requests", {"data": {}})
    assert not isinstance(info.value, errors.WriteOutcomeUnknownError)
    assert client.stats()["retries"] == 1
