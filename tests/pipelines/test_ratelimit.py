"""The limiter: bucket routing, and the window held across processes sharing one log, on both backends.

Every limiter test runs twice: on a SQLite file and on a real PostgreSQL database (`postgres_database`,
a fresh one a test). Times are compared in the log's own clock (`last_admitted_at`), never the test's.
"""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from pipelines.api.ratelimit import LimiterUrl, SlidingWindowLimiter, bucket_for
from tests.support.scripted import Reply

FP = "abcdef123456"
OK = {"data": [{"id": "s1", "type": "shipment", "attributes": {}}]}
TOO_MANY = {"errors": [{"status": "429", "title": "Too Many Requests", "detail": "Try later"}]}


@pytest.fixture(params=["sqlite", "postgresql"])
def log_url(request, tmp_path) -> str:
    """The limiter log's URL: a fresh SQLite file, or a fresh database on the session's PostgreSQL server."""
    if request.param == "sqlite":
        return LimiterUrl.sqlite(tmp_path / "l.sqlite").reveal()
    return request.getfixturevalue("postgres_database").dsn


@pytest.mark.parametrize(
    ("method", "path", "bucket"),
    [
        ("POST", "/tracking_requests", "create_tracking_request"),
        ("POST", "https://api.terminal49.com/v2/tracking_requests/", "create_tracking_request"),
        ("POST", "/v2/tracking_requests/infer_number", "infer_number"),
        ("PATCH", "/v2/containers/3f1c/refresh", "refresh"),
        ("GET", "/v2/tracking_requests", "default"),
        ("GET", "/v2/containers/3f1c/refresh", "default"),
        ("PATCH", "/v2/containers/3f1c", "default"),
        ("POST", "/v2/documents", "default"),
        ("GET", "/v2/containers/x/map_geojson?x=/tracking_requests", "default"),
    ],
)
def test_bucket_for(method, path, bucket):
    assert bucket_for(method, path) == bucket


def test_refuses_a_raw_key_as_fingerprint(tmp_path):
    with pytest.raises(ValueError):
        SlidingWindowLimiter("Token my-secret-key", path=tmp_path / "l.sqlite")


def _max_in_window(stamps: list[float], window: float) -> int:
    stamps = sorted(stamps)
    best, lo = 0, 0
    for hi, t in enumerate(stamps):
        while t - stamps[lo] >= window:
            lo += 1
        best = max(best, hi - lo + 1)
    return best


@pytest.mark.slow
def test_single_process_holds_window_and_reports_waits(log_url):
    limiter = SlidingWindowLimiter(FP, url=log_url, window_seconds=0.4, padding=0.0,
                                   limits={"default": 3, "refresh": 1})
    stamps = []
    for _ in range(7):
        limiter.acquire("default")
        stamps.append(limiter.last_admitted_at)
    limiter.acquire("refresh")  # its own budget: not blocked by the default bucket being full
    stats = limiter.stats()
    limiter.close()
    assert _max_in_window(stamps, 0.4) == 3
    assert stats["requests"] == {"default": 7, "refresh": 1}
    assert stats["wait_seconds"]["default"] > 0


def test_keys_do_not_share_a_budget(log_url):
    a = SlidingWindowLimiter("aaaaaa", url=log_url, window_seconds=30, limits={"default": 2})
    b = SlidingWindowLimiter("bbbbbb", url=log_url, window_seconds=30, limits={"default": 2})
    for limiter in (a, b, a, b):
        limiter.acquire("default")  # would block for 30 s if the two keys shared one log
    assert a.stats()["requests"]["default"] == b.stats()["requests"]["default"] == 2
    a.close()
    b.close()


def test_an_unknown_bucket_is_refused(log_url):
    limiter = SlidingWindowLimiter(FP, url=log_url, limits={"default": 1})
    with pytest.raises(KeyError, match="unknown rate bucket 'refresh'"):
        limiter.acquire("refresh")
    limiter.close()


def _worker(url: str, n: int, out) -> None:
    limiter = SlidingWindowLimiter(FP, url=url, window_seconds=1.0, padding=0.0, limits={"default": 10})
    stamps = []
    for _ in range(n):
        limiter.acquire("default")
        stamps.append(limiter.last_admitted_at)
    limiter.close()
    out.put(stamps)


@pytest.mark.slow
def test_two_processes_share_one_budget(log_url):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    procs = [ctx.Process(target=_worker, args=(log_url, 15, out)) for _ in range(2)]
    for p in procs:
        p.start()
    stamps = out.get(timeout=60) + out.get(timeout=60)
    for p in procs:
        p.join(timeout=30)
    assert len(stamps) == 30
    # A per-process limiter would admit 20 in the first second; the shared log admits 10.
    assert _max_in_window(stamps, 1.0) == 10


@pytest.mark.slow
def test_a_settled_slot_counts_from_its_response_not_its_send(log_url):
    limiter = SlidingWindowLimiter(FP, url=log_url, window_seconds=0.5, padding=0.0, limits={"default": 1})
    _, slot = limiter.acquire_slot("default")
    sent_at = limiter.last_admitted_at
    time.sleep(0.6)  # a slow response: the server may have counted the request this late
    limiter.settle(slot)

    limiter.acquire("default")

    # The window (0.5 s plus the 0.25 s floor) runs from the response, at least 0.6 s after the send: the
    # next slot comes 1.35 s or more after the send. Counted from the send it would come after 0.75 s.
    assert limiter.last_admitted_at >= sent_at + 0.6 + 0.75
    limiter.close()


def test_the_window_is_padded_by_at_least_the_floor(log_url):
    limiter = SlidingWindowLimiter(FP, url=log_url, window_seconds=0.2, padding=0.01, limits={"default": 1})
    limiter.acquire()
    first = limiter.last_admitted_at
    limiter.acquire()
    limiter.close()
    assert limiter.last_admitted_at - first >= 0.2 + 0.25  # 1 % of 0.2 s is 2 ms: the floor applies


def _logged_times(limiter: SlidingWindowLimiter, bucket: str = "default") -> list[float]:
    """Every time the log holds for the limiter's key and `bucket`, read through the backend itself."""
    log = limiter._log
    log.begin(limiter.fingerprint, bucket)
    try:
        return log.newest(limiter.fingerprint, bucket, 0.0, 1000)
    finally:
        log.commit()


@pytest.mark.slow
def test_a_429_and_its_retry_each_draw_from_the_shared_log(api_server, make_client, log_url):
    api_server.script("GET", "/shipments", Reply(429, TOO_MANY, {"Retry-After": "1"}), Reply(body=OK))
    client = make_client(limiter_path=None, limiter_url=log_url)
    assert client.limiter.url == LimiterUrl(log_url)

    assert client.get("shipments") == OK

    stats = client.stats()
    assert stats["responses_429"] == 1 and stats["retry_sleep_seconds"] >= 1  # Retry-After honoured
    assert client.limiter.stats()["requests"] == {"default": 2}
    first, second = sorted(_logged_times(client.limiter))
    assert second - first >= 1  # both attempts logged and settled, the retry after the Retry-After wait
