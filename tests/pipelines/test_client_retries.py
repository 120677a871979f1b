"""Retries over real loopback HTTP: 429 + Retry-After, 5xx, truncated bodies, dropped connections, POST safety,
and the request deadline that bounds them (a hung server fails in time)."""

from __future__ import annotations

import socket
import time

import pytest

from pipelines import errors
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.api.retry import FAST_FAIL_ATTEMPTS
from tests.support.scripted import TEST_KEY, Reply

OK = {"data": [{"id": "s1", "type": "shipment", "attributes": {}}]}
TOO_MANY = {"errors": [{"status": "429", "title": "Too Many Requests", "detail": "Try later"}]}
BOOM = {"errors": [{"status": "500", "source": None, "title": "Internal Server Error", "detail": None}]}


@pytest.mark.slow
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


def test_a_refused_connection_fails_after_a_short_bounded_retry_not_the_whole_deadline(tmp_path):
    # nothing listens on the port: 20 attempts and a 90 s deadline would be about 50 s of retries
    settings = load_settings(api_key=TEST_KEY, base_url=f"http://127.0.0.1:{_closed_port()}/v2", max_attempts=20,
                             backoff_factor=0.05, limiter_path=tmp_path / "l.sqlite")
    client = OceanTrackingClient(settings)
    with pytest.raises(errors.TransportError) as info:
        client.get("shipments")

    assert client.stats()["requests"] == {"default": FAST_FAIL_ATTEMPTS}
    message = str(info.value)
    assert "(connection refused) after 3 attempt(s)" in message and "is reachable" in message and "\n" not in message


def test_tls_to_a_plain_http_server_fails_fast_and_says_which_scheme_to_use(api_server, tmp_path):
    settings = load_settings(api_key=TEST_KEY, base_url=api_server.base_url.replace("http://", "https://"),
                             max_attempts=20, backoff_factor=0.05, limiter_path=tmp_path / "l.sqlite")
    client = OceanTrackingClient(settings)
    with pytest.raises(errors.TransportError) as info:
        client.get("shipments")

    assert client.stats()["requests"] == {"default": FAST_FAIL_ATTEMPTS}
    assert str(info.value).startswith("GET /v2/shipments: TLS handshake failed with 127.0.0.1:")
    assert "give an http:// base URL" in str(info.value) and TEST_KEY not in str(info.value)


# ---- the request deadline ------------------------------------------------------------------------------


def test_a_hung_server_fails_at_the_deadline_not_after_every_attempt(tmp_path):
    # A listening socket that nobody accepts from: the kernel completes the handshake, nothing ever answers.
    # Attempt 1 times out at 0.3 s; attempt 2 starts after ~0.1 s (0.3 + 0.1 + 0.5 <= 1.2); a third, after a
    # sleep of >= 0.1 s, could end at 0.65 + 0.1 + 0.5 > 1.2, so it is never started.
    with socket.create_server(("127.0.0.1", 0), backlog=64) as silent:
        settings = load_settings(
            api_key=TEST_KEY, base_url=f"http://127.0.0.1:{silent.getsockname()[1]}/v2", max_attempts=10,
            backoff_factor=0.05, connect_timeout=0.2, read_timeout=0.3, request_deadline=1.2,
            limiter_path=tmp_path / "l.sqlite",
        )
        client = OceanTrackingClient(settings)
        started = time.monotonic()
        with pytest.raises(errors.NoResponseError) as info:
            client.get("shipments")
        took = time.monotonic() - started

    assert took < 1.2
    assert client.stats()["requests"] == {"default": 2}
    message = str(info.value)
    assert "\n" not in message and "not answering" in message and "2 attempt(s)" in message
    assert TEST_KEY not in message


def test_a_deadline_stops_retrying_fast_5xx_before_the_attempts_run_out(api_server, make_client):
    api_server.script("GET", "/shipments", *[Reply(503, BOOM)] * 50)
    client = make_client(max_attempts=50, backoff_factor=0.1, connect_timeout=0.1, read_timeout=0.2,
                         request_deadline=0.8)
    started = time.monotonic()
    with pytest.raises(errors.UpstreamError):
        client.get("shipments")
    assert time.monotonic() - started < 0.8
    assert 2 <= len(api_server.seen()) < 50


def test_the_attempt_cap_still_applies_within_a_long_deadline(api_server, make_client):
    api_server.script("GET", "/shipments", *[Reply(500, BOOM)] * 6)
    with pytest.raises(errors.UpstreamError):
        make_client(max_attempts=4, request_deadline=600).get("shipments")
    assert len(api_server.seen()) == 4


@pytest.mark.slow
def test_a_retry_after_wait_does_not_spend_the_deadline(api_server, make_client):
    # Counted, the 1 s Retry-After would leave no room in the 1 s deadline for the retry after the 503.
    api_server.script(
        "GET", "/shipments", Reply(429, TOO_MANY, {"Retry-After": "1"}), Reply(503, BOOM), Reply(body=OK)
    )
    client = make_client(connect_timeout=0.2, read_timeout=0.3, request_deadline=1.0)
    assert client.get("shipments") == OK
    assert client.stats()["responses_429"] == 1 and client.stats()["retries"] == 2


def test_the_deadline_is_a_setting_like_the_others(monkeypatch):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__REQUEST_DEADLINE", "42")
    assert load_settings(api_key=TEST_KEY).request_deadline == 42.0
    with pytest.raises(errors.ConfigurationError, match="request_deadline"):
        load_settings(api_key=TEST_KEY, request_deadline=0)
