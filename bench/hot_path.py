"""The local work a sync does per request, piece by piece, on real sandbox pages. Run:

    uv run python bench/hot_path.py [--shipments 300] [--pages 3] [--repeat 15] [--heap 2000000]
                                    [--postgres postgresql://user:password@host:port/db] [--limiter-only]

Prints medians (ms a page, or a request) of: parsing a `/shipments` page with the standard `json` and
with `orjson`; flattening it to rows (`rows_by_type`); digesting its shipment bundles (the fetch log's
change test); the rate limiter's bookkeeping per request (one take and one settle) with SQLite's
`synchronous=FULL` (the default) and `NORMAL`, and with its log in PostgreSQL (`--postgres`, else a
throwaway server started like the tests' `tests/support/postgres.py`, on loopback); and a parse-flatten-digest loop over the pages with the
interpreter's default garbage collector against `pipelines.sync.gc_tuned` (both under a live heap of
`--heap` small objects, standing in for a long-running process). Asserts nothing.
"""

from __future__ import annotations

import argparse
import gc
import json
import statistics
import sys
import tempfile
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

import orjson
import requests
from bench_sync import API_KEY
from bench_table import render

from pipelines.api import rows_by_type
from pipelines.api.ratelimit import LimiterUrl, SlidingWindowLimiter
from pipelines.source.bookkeeping import FetchLog
from pipelines.source.pages import changed_bundles, owners_of
from pipelines.source.resources import SHIPMENT_INCLUDES
from pipelines.sync import gc_tuned


def median_ms(run: Callable[[], object], repeat: int) -> float:
    """Median wall milliseconds of `repeat` calls."""
    times = []
    for _ in range(repeat):
        started = time.perf_counter()
        run()
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1000


def fetch_pages(shipments: int, pages: int) -> list[bytes]:
    """The raw bodies of the first `pages` `/shipments` pages of a fresh sandbox, with the sync's includes."""
    from sandbox.launcher import start_sandbox

    with start_sandbox("--shipments", str(shipments), "--api-key", API_KEY) as sandbox:
        bodies = []
        url = f"{sandbox.base_url}/shipments"
        params: dict | None = {"page[size]": 100, "include": ",".join(SHIPMENT_INCLUDES)}
        headers = {"Authorization": f"Token {API_KEY}"}
        while url and len(bodies) < pages:
            response = requests.get(url, params=params, headers=headers, timeout=60)
            response.raise_for_status()
            bodies.append(response.content)
            url, params = (response.json().get("links") or {}).get("next"), None
        return bodies


def digest_page(document: dict) -> None:
    """What the source does with a page before any request: flatten, owners, bundle digests."""
    rows = rows_by_type(document)
    changed_bundles(rows, owners_of(rows), FetchLog())


def limiter_ms(synchronous: str, repeat: int) -> float:
    """Median ms of one take and one settle on a fresh limiter file with the given SQLite `synchronous`."""
    with tempfile.TemporaryDirectory() as tmp:
        limiter = SlidingWindowLimiter("abcdef", path=Path(tmp) / "limiter.sqlite", limits={"default": 10**9})
        limiter._log._conn.execute(f"PRAGMA synchronous={synchronous}")  # the one setting compared
        try:
            return median_ms(lambda: limiter.settle(limiter.acquire_slot()[1]), repeat * 20)
        finally:
            limiter.close()


@contextmanager
def postgres_url(given: str | None) -> Iterator[str]:
    """`given`, or the URL of a throwaway PostgreSQL server on loopback (started and removed here)."""
    if given:
        yield given
        return
    from tests.support.postgres import start_server, stop_server

    server = start_server()
    try:
        yield server.dsn()
    finally:
        stop_server(server.root)


def postgres_limiter_ms(url: str, repeat: int) -> float:
    """Median ms of one take and one settle with the limiter's log in PostgreSQL (`url`)."""
    limiter = SlidingWindowLimiter("abcdef", url=LimiterUrl(url), limits={"default": 10**9})
    try:
        return median_ms(lambda: limiter.settle(limiter.acquire_slot()[1]), repeat * 20)
    finally:
        limiter.close()


def page_loop_ms(bodies: list[bytes], tuned: bool, rounds: int) -> float:
    """Median ms a page of parse + flatten + digest over `rounds` passes, with or without `gc_tuned`."""
    def one_pass() -> None:
        for body in bodies:
            digest_page(orjson.loads(body))

    if not tuned:
        return median_ms(one_pass, rounds) / len(bodies)
    with gc_tuned():
        return median_ms(one_pass, rounds) / len(bodies)


def main(argv: list[str] | None = None) -> int:
    """Fetch the pages, time each piece, print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=300, help="shipments in the sandbox world")
    parser.add_argument("--pages", type=int, default=3, help="pages of 100 shipments to time")
    parser.add_argument("--repeat", type=int, default=15, help="repeats per median")
    parser.add_argument("--heap", type=int, default=2_000_000, help="live small objects during the loop timings")
    parser.add_argument("--postgres", help="the limiter's PostgreSQL (default: a throwaway server on loopback)")
    parser.add_argument("--limiter-only", action="store_true", help="time only the limiter (no sandbox, no pages)")
    args = parser.parse_args(argv)

    with postgres_url(args.postgres) as url:
        limiter_rows = [
            ("limiter per request, SQLite synchronous=FULL", limiter_ms("FULL", args.repeat)),
            ("limiter per request, SQLite synchronous=NORMAL (the default)", limiter_ms("NORMAL", args.repeat)),
            ("limiter per request, PostgreSQL on loopback (5 round trips)", postgres_limiter_ms(url, args.repeat)),
        ]
    if args.limiter_only:
        print(f"\n## The rate limiter's bookkeeping per request; medians of {args.repeat * 20}\n")
        print(render(("step", "ms"), limiter_rows))
        return 0

    bodies = fetch_pages(args.shipments, args.pages)
    body = bodies[0]
    document = orjson.loads(body)
    rows = rows_by_type(document)
    sizes = ", ".join(f"{len(v)} {k}" for k, v in rows.items())
    table = [
        ("parse a page: json.loads", median_ms(lambda: json.loads(body), args.repeat)),
        ("parse a page: orjson.loads", median_ms(lambda: orjson.loads(body), args.repeat)),
        ("flatten a page: rows_by_type", median_ms(lambda: rows_by_type(document), args.repeat)),
        ("digest a page's bundles (fetch log)",
         median_ms(lambda: changed_bundles(rows, owners_of(rows), FetchLog()), args.repeat)),
        *limiter_rows,
    ]
    heap = [[i] for i in range(args.heap)]  # a long-running process's live objects
    table.append((f"page loop, default GC ({args.heap:,} live objects)", page_loop_ms(bodies, False, args.repeat)))
    table.append((f"page loop, gc_tuned ({args.heap:,} live objects)", page_loop_ms(bodies, True, args.repeat)))
    del heap
    gc.collect()
    print(f"\n## Local work per page ({len(body):,} bytes; {sizes}); medians of {args.repeat}\n")
    print(render(("step", "ms"), table))
    return 0


if __name__ == "__main__":
    sys.exit(main())
