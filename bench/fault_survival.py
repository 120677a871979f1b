"""How many full syncs fail under a sandbox fault profile, with the old retry defaults and with the new.

    uv run python bench/fault_survival.py [--syncs 10] [--profile 5xx] [--shipments 150] [--time-scale 0.1]
                                          [--destination ducklake|duckdb]

Starts `python -m sandbox --faults PROFILE` (default fault rate, frozen clock, rate window `--window`) and
runs `--syncs` full syncs per policy, each into a fresh warehouse (the DuckLake, or a DuckDB file with
`--destination duckdb`) with its own fault seed (the same seeds for both policies); 150 shipments make
about 600 requests a sync. Every time setting (backoff, timeouts,
deadline) is multiplied by `--time-scale` so the run takes minutes, not hours: the sandbox's faults are
counted in requests, not seconds, so which faults a request meets depends on how many attempts it gets, and
the deadline admits the same number of fast attempts at any scale (a 1.0 scale is the real thing). The old
policy is the old attempt count with no deadline; its sleeps follow today's backoff, which for the same
reason changes nothing. A sync fails when it aborts (raises) or is incomplete: its row counts differ from a
fault-free sync's (an item that failed after its retries was skipped). Prints a table; asserts nothing.
"""

from __future__ import annotations

import argparse
import logging
import statistics
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import requests
from bench_sync import API_KEY, DESTINATIONS, warehouse_target
from bench_table import render

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.sync import sync_account
from sandbox.launcher import start_sandbox

START = "2026-11-01T00:00:00+00:00"
# The defaults before the request deadline (5 attempts, 60 s reads, no deadline) and the current ones.
POLICIES: dict[str, dict[str, float]] = {
    "old": {"max_attempts": 5, "connect_timeout": 10.0, "read_timeout": 60.0, "backoff_factor": 1.0,
            "request_deadline": float("inf")},
    "new": {},
}
TIMED = ("connect_timeout", "read_timeout", "backoff_factor", "request_deadline")


def policy_settings(name: str, scale: float) -> dict[str, Any]:
    """The policy's overrides of the defaults, every time setting multiplied by `scale`."""
    defaults = load_settings(api_key=API_KEY)
    values = {**{k: getattr(defaults, k) for k in (*TIMED, "max_attempts")}, **POLICIES[name]}
    return {k: (v * scale if k in TIMED else v) for k, v in values.items()}


def one_sync(
    base_url: str, window: float, workdir: Path, overrides: dict[str, Any], destination: str = "ducklake"
) -> dict[str, Any]:
    """One full sync into a fresh warehouse in `workdir` (`bench_sync.warehouse_target`): error (None when it
    completed), rows per table, requests, retries, wall seconds."""
    settings = load_settings(api_key=API_KEY, base_url=base_url, rate_window_seconds=window,
                             limiter_path=workdir / "limiter.sqlite", **overrides)
    started = time.perf_counter()
    with OceanTrackingClient(settings) as client:
        rows: dict[str, int] = {}
        try:
            rows = sync_account(client, warehouse_target(workdir, destination), pipelines_dir=workdir / "dlt",
                                models=False).row_counts
            error = None
        except Exception as exc:  # the figure being measured: which syncs abort, and on what
            while exc.__cause__ is not None:
                exc = exc.__cause__
            error = f"{type(exc).__name__}: {str(exc).splitlines()[0][:90]}"
        stats = client.stats()
    return {"error": error, "rows": rows, "requests": sum(stats["requests"].values()),
            "retries": stats["retries"], "wall": time.perf_counter() - started}


def verdict(run: dict[str, Any], clean_rows: dict[str, int]) -> str:
    """`aborted: <error>`, `incomplete: <tables whose row count differs from the clean run>`, or `ok`."""
    if run["error"]:
        return f"aborted: {run['error']}"
    differ = sorted(t for t in clean_rows.keys() | run["rows"].keys() if run["rows"].get(t) != clean_rows.get(t))
    return f"incomplete: {', '.join(differ)}" if differ else "ok"


def main(argv: list[str] | None = None) -> int:
    """Run every policy's syncs against one sandbox and print aborted / syncs per policy."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--syncs", type=int, default=10, help="full syncs per policy")
    parser.add_argument("--profile", default="5xx", help="sandbox fault profile")
    parser.add_argument("--shipments", type=int, default=150, help="shipments in the sandbox world")
    parser.add_argument("--window", type=float, default=1.0, help="sandbox and client rate window, seconds")
    parser.add_argument("--time-scale", type=float, default=0.1, help="multiplies backoff, timeouts, deadline")
    parser.add_argument("--destination", choices=DESTINATIONS, default="ducklake", help="the embedded warehouse")
    args = parser.parse_args(argv)
    logging.getLogger("dlt").setLevel(logging.ERROR)  # as the CLI: no warning per all-null column
    sandbox = start_sandbox("--shipments", str(args.shipments), "--rate-window", str(args.window),
                            "--faults", args.profile, "--speed", "0", "--start", START, "--api-key", API_KEY)
    root = sandbox.base_url.rsplit("/v2", 1)[0]
    rows = []
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-faults-") as tmp:
        rate = requests.get(f"{root}/_sandbox/faults", timeout=10).json()["rate"]
        requests.post(f"{root}/_sandbox/faults", json={"profile": "none"}, timeout=10).raise_for_status()
        clean = one_sync(sandbox.base_url, args.window, Path(tmp) / "clean", {}, args.destination)
        if clean["error"]:
            raise SystemExit(f"the fault-free sync failed: {clean['error']}")
        for name in POLICIES:
            overrides = policy_settings(name, args.time_scale)
            runs = []
            for seed in range(1, args.syncs + 1):
                requests.post(f"{root}/_sandbox/faults", json={"profile": args.profile, "seed": seed},
                              timeout=10).raise_for_status()
                run = one_sync(sandbox.base_url, args.window, Path(tmp) / f"{name}-{seed}", overrides,
                               args.destination)
                run["verdict"] = verdict(run, clean["rows"])
                runs.append(run)
                print(f"  {name} seed {seed}: {run['verdict']} ({run['requests']} requests, {run['wall']:.0f} s)",
                      file=sys.stderr, flush=True)
            shown = ", ".join(f"{k}={v:g}" for k, v in overrides.items())
            rows.append((name, shown, sum(r["verdict"].startswith("aborted") for r in runs),
                         sum(r["verdict"].startswith("incomplete") for r in runs), len(runs),
                         statistics.median(r["requests"] for r in runs),
                         statistics.median(r["retries"] for r in runs),
                         statistics.median(r["wall"] for r in runs)))
    print(f"\n## Full syncs into {args.destination} under --faults {args.profile} (rate {rate:g}, "
          f"{args.shipments} shipments, {clean['requests']} requests fault-free, times x{args.time_scale:g})\n")
    print(render(("policy", "settings", "aborted", "incomplete", "syncs", "requests (median)",
                  "retries (median)", "wall s (median)"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
