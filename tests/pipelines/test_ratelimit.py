"""The limiter: bucket routing, and the window held across processes sharing one file."""

from __future__ import annotations

import multiprocessing as mp
import time

import pytest

from pipelines.api.ratelimit import SlidingWindowLimiter, bucket_for

FP = "abcdef123456"


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


def test_single_process_holds_window_and_reports_waits(tmp_path):
    limiter = SlidingWindowLimiter(FP, path=tmp_path / "l.sqlite", window_seconds=0.4, padding=0.0,
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


def test_keys_do_not_share_a_budget(tmp_path):
    a = SlidingWindowLimiter("aaaaaa", path=tmp_path / "l.sqlite", window_seconds=30, limits={"default": 2})
    b = SlidingWindowLimiter("bbbbbb", path=tmp_path / "l.sqlite", window_seconds=30, limits={"default": 2})
    for limiter in (a, b, a, b):
        limiter.acquire("default")  # would block for 30 s if the two keys shared one log
    assert a.stats()["requests"]["default"] == b.stats()["requests"]["default"] == 2
    a.close()
    b.close()


def _worker(path: str, n: int, out) -> None:
    limiter = SlidingWindowLimiter(FP, path=path, window_seconds=1.0, padding=0.0, limits={"default": 10})
    stamps = []
    for _ in range(n):
        limiter.acquire("default")
        stamps.append(limiter.last_admitted_at)
    limiter.close()
    out.put(stamps)


@pytest.mark.slow
def test_two_processes_share_one_budget(tmp_path):
    ctx = mp.get_context("spawn")
    out = ctx.Queue()
    path = str(tmp_path / "shared.sqlite")
    procs = [ctx.Process(target=_worker, args=(path, 15, out)) for _ in range(2)]
    for p in procs:
        p.start()
    stamps = out.get(timeout=60) + out.get(timeout=60)
    for p in procs:
        p.join(timeout=30)
    assert len(stamps) == 30
    # A per-process limiter would admit 20 in the first second; the shared log admits 10.
    assert _max_in_window(stamps, 1.0) == 10


def test_a_settled_slot_counts_from_its_response_not_its_send(tmp_path):
    limiter = SlidingWindowLimiter(FP, path=tmp_path / "l.sqlite", window_seconds=0.5, padding=0.0, limits={"default": 1})
    _, slot = limiter.acquire_slot("default")
    time.sleep(0.6)  # a slow response: the server may have counted the request this late
    limiter.settle(slot)
    settled_at = time.time()

    limiter.acquire("default")

    # the window (plus the 0.25 s floor) runs from the response, not from the send 0.6 s earlier
    assert limiter.last_admitted_at >= settled_at + 0.5
