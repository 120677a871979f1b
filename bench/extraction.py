"""Extraction benchmark: requests vs the theoretical minimum, 429s, rate-budget use, wall-time split,
map-feature processing rate (Arrow path vs dlt's JSON path) and peak memory of a full sync.

    uv run python bench/extraction.py [--scales 100,1000] [--window 2] [--repeat 3]

Prints tables; asserts nothing. See bench/README.md for what each figure means.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections import Counter
from pathlib import Path
from typing import Any

from bench_features import measure
from bench_memory import CHILD_FLAG, child_main, full_sync_peak
from bench_minimum import ROUTES, SandboxProbe
from bench_sync import sync
from bench_table import render

from pipelines.api.ratelimit import BUCKET_LIMITS
from sandbox.launcher import start_sandbox

API_KEY = "sbx_bench_0123456789abcdef"
SYNCS = (("full", 0.0), ("incremental", 0.0), ("after +2h", 7200.0))


def run_scale(shipments: int, window: float, seed: int, keep_maps: bool) -> dict[str, Any]:
    """Three syncs (full, immediate, after a 2 h clock jump) and a memory child against one sandbox."""
    out: dict[str, Any] = {"shipments": shipments, "syncs": [], "maps": []}
    sandbox = start_sandbox("--shipments", str(shipments), "--seed", str(seed), "--rate-window", str(window),
                            "--api-key", API_KEY)
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-extraction-") as tmp:
        workdir = Path(tmp)
        probe = SandboxProbe(sandbox.base_url, API_KEY, window, workdir)
        for label, advance in SYNCS:
            if advance:
                probe.advance(advance)
            need = probe.minimum()
            probe.reset()
            figures = sync(sandbox.base_url, API_KEY, window, workdir / "sync")
            out["syncs"].append({"label": label, "need": need, "figures": figures, "served": probe.stats()})
            print(f"  {shipments} shipments, {label}: {figures.requests} requests in {figures.wall_seconds:.1f}s",
                  file=sys.stderr, flush=True)
        out["containers"] = len(probe.model.event_sets)
        if keep_maps:
            out["maps"] = probe.fetch_all_maps()
        probe.close()
        probe.reset()
        out["memory"] = full_sync_peak(__file__, sandbox.base_url, API_KEY, window)
        print(f"  {shipments} shipments, memory child: {out['memory']['peak_mib']:.0f} MiB", file=sys.stderr,
              flush=True)
    return out


def requests_table(scales: list[dict[str, Any]], window: float) -> str:
    """Per sync: requests sent/served vs minimum, 429s, share of the rate budget, wall-time split."""
    rows = []
    for scale in scales:
        for run in scale["syncs"]:
            figures, served = run["figures"], run["served"]
            sent = figures.requests
            served_n = sum(sum(v.values()) for v in served["requests_by_key"].values())
            minimum = sum(run["need"].values())
            capacity = BUCKET_LIMITS["default"] * figures.wall_seconds / window
            share = 100 * figures.stats["requests"].get("default", 0) / capacity
            rows.append([
                f"{scale['shipments']} / {scale['containers']}", run["label"], sent, served_n, minimum,
                sent - minimum, f"{figures.stats['responses_429']} / {served['rate_limited_total']}",
                figures.stats["retries"], f"{share:.0f}%", figures.wall_seconds, figures.wait_seconds,
                figures.wall_seconds - figures.wait_seconds,
            ])
    headers = ["shipments / containers", "sync", "sent", "served", "minimum", "excess", "429 recv / served",
               "retries", "budget used", "wall s", "wait s", "other s"]
    return render(headers, rows)


def routes_table(scales: list[dict[str, Any]]) -> str:
    """Requests served by the sandbox per route vs the minimal client's, one column per sync."""
    columns, cells = [], []
    route_of = {v: k for k, v in ROUTES.items()}
    for scale in scales:
        for run in scale["syncs"]:
            columns.append(f"{scale['shipments']} {run['label']}")
            served = Counter(run["served"]["requests_by_route"])
            need = Counter({ROUTES[k]: v for k, v in run["need"].items()})
            cells.append((served, need))
    routes = sorted(set(route_of) | {r for served, _ in cells for r in served})
    rows = [[route] + [f"{served[route]} / {need[route]}" for served, need in cells] for route in routes]
    return render(["route (served / minimum)", *columns], rows)


def features_table(collections: list, repeat: int) -> str:
    """Features per second: the Arrow path, the Arrow table through dlt, dlt's JSON path."""
    r = measure(collections, repeat)
    arrow_rate = r.rate(r.arrow_table_s)
    rows = [
        ["feature_collections_to_table (Arrow)", r.arrow_table_s, r.rate(r.arrow_table_s), 1.0],
        ["  + dlt extract/normalize/load (parquet)", r.arrow_load_s, r.rate(r.arrow_load_s),
         arrow_rate / r.rate(r.arrow_load_s)],
        ["dlt JSON path: extract + normalize", r.json_extract_normalize_s, r.rate(r.json_extract_normalize_s),
         arrow_rate / r.rate(r.json_extract_normalize_s)],
        ["dlt JSON path: extract + normalize + load", r.json_full_s, r.rate(r.json_full_s),
         arrow_rate / r.rate(r.json_full_s)],
    ]
    title = (f"{r.collections:,} maps, {r.features:,} features, {r.coordinates:,} positions; "
             f"median of {repeat}")
    return title + "\n" + render(["path", "median s", "features/s", "Arrow is x faster"], rows)


def memory_table(scales: list[dict[str, Any]]) -> str:
    """Peak RSS of a full sync in a fresh child process, and the ratio to the smallest scale."""
    base = scales[0]["memory"]["peak_mib"]
    rows = [[f"{s['shipments']} / {s['containers']}", s["memory"]["requests"], s["memory"]["rows"],
             s["memory"]["wall_seconds"], round(s["memory"]["baseline_mib"], 1), round(s["memory"]["peak_mib"], 1),
             s["memory"]["peak_mib"] / base] for s in scales]
    return render(["shipments / containers", "requests", "rows loaded", "wall s", "after imports MiB",
                   "peak MiB", "peak ratio"], rows)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run every scale, print the tables."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="100,1000", help="shipment counts, comma-separated")
    parser.add_argument("--window", type=float, default=2.0, help="sandbox and client rate window, seconds")
    parser.add_argument("--repeat", type=int, default=3, help="repeats of the feature-rate timings")
    parser.add_argument("--seed", type=int, default=7, help="sandbox world seed")
    parser.add_argument(
        "--feature-scale", type=int, help="which scale's maps the feature-rate timings use (default: the largest)"
    )
    parser.add_argument(CHILD_FLAG, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        child_main(args.memory_child)
        return 0
    sizes = [int(s) for s in args.scales.split(",") if s.strip()]
    started = time.perf_counter()
    feature_scale = args.feature_scale or max(sizes)
    scales = [run_scale(n, args.window, args.seed, keep_maps=(n == feature_scale)) for n in sizes]
    maps = next(s["maps"] for s in scales if s["maps"])
    print(f"\n## Requests per sync (rate window {args.window:g} s, {BUCKET_LIMITS['default']} requests/window)\n")
    print(requests_table(scales, args.window))
    print("\n## Requests by route\n")
    print(routes_table(scales))
    print(f"\n## Map features per second of local processing ({feature_scale} shipments)\n")
    print(features_table(maps, args.repeat))
    print("\n## Peak memory of a full sync (child process peak RSS, VmHWM)\n")
    print(memory_table(scales))
    print(f"\ntotal benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
