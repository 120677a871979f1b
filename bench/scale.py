"""Scale table: what a full sync and unchanged incremental syncs cost at 1k, 10k and 100k shipments, beside
the hand-configured dlt `rest_api` baseline (`rest_api_baseline.py`).

    uv run python bench/scale.py [--scales 1000,10000,100000] [--no-maps] [--window 1] [--unchanged-syncs 2]
                                 [--baseline/--no-baseline] [--destination ducklake|duckdb]

Per scale, one sandbox with a frozen clock (so the syncs after the first find nothing changed), the
minimum computed before each sync (`bench_minimum`), and every sync in a fresh child process (same workdir
from one sync to the next) so its peak RSS and CPU seconds are its own. Prints one table and the issue's
done-when figures; asserts nothing. See bench/README.md for the columns.
"""

from __future__ import annotations

import argparse
import json
import logging
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

from bench_memory import CHILD_FLAG, Meter, report, run_child
from bench_minimum import SandboxProbe
from bench_sync import API_KEY, DESTINATIONS
from bench_table import render

from pipelines.api.ratelimit import BUCKET_LIMITS
from sandbox.launcher import start_sandbox

START = "2026-11-01T00:00:00+00:00"
REAL_WINDOW_SECONDS = 60.0  # the service's rate window: BUCKET_LIMITS["default"] requests per minute
PIPELINE, BASELINE = "pipeline", "rest_api baseline"
# the done-when limits of the issue "Flat memory and constant state at 100k shipments"
RSS_LIMITS = {10_000: 1.5, 100_000: 2.0}  # peak RSS at that scale / the first scale's, same sync
STATE_LIMIT_BYTES = 1_000_000
DISK_GROWTH_LIMIT_BYTES = 5_000_000
CPU_SHARE_LIMIT = 25.0  # % of the unchanged sync's request-budget time at the real window


def dir_bytes(path: Path) -> int:
    """Bytes of the files under `path` (0 when it does not exist)."""
    return sum(p.stat().st_size for p in path.rglob("*") if p.is_file()) if path.exists() else 0


def warehouse_bytes(workdir: Path) -> int:
    """Bytes of the embedded warehouse in `workdir`: the lake's folder (`ducklake`) or the DuckDB file and its
    write-ahead log (`warehouse.duckdb*`), whichever the destination made."""
    return dir_bytes(workdir / "ducklake") + sum(p.stat().st_size for p in workdir.glob("warehouse.duckdb*"))


def state_sizes(pipeline: Any, store: Any) -> dict[str, int | None]:
    """The dlt state's size: its local `state.json` (bytes) and the newest `_dlt_pipeline_state.state` row
    in the warehouse (compressed and base64-encoded, as dlt stores it; None when unreadable)."""
    path = Path(pipeline.working_dir) / "state.json"
    sizes: dict[str, int | None] = {"state_json": path.stat().st_size if path.exists() else None, "state_row": None}
    try:
        with store.connect(read_only=True) as con:
            row = con.execute(
                f"select length(state) from {pipeline.dataset_name}._dlt_pipeline_state where pipeline_name = ? "
                "order by created_at desc limit 1",
                [pipeline.pipeline_name],
            ).fetchone()
        sizes["state_row"] = row[0] if row else None
    except Exception as error:  # a figure, not a requirement: the table shows it as missing
        print(f"  state row unreadable: {error}", file=sys.stderr)
    return sizes


def child_main(spec_json: str) -> None:
    """Inside the child: one sync (the pipeline's or the baseline's) into `workdir`, measured after the
    imports; reports peak RSS, CPU seconds, wall, requests (pipeline: client stats), rows and state sizes."""
    spec = json.loads(spec_json)
    logging.getLogger("dlt").setLevel(logging.ERROR)  # as the CLI: no warning per all-null column
    workdir = Path(spec["workdir"])
    if spec["kind"] == PIPELINE:
        from bench_sync import sync, warehouse_target

        from pipelines.warehouse.destinations import make_pipeline

        meter = Meter()
        figures = sync(spec["base_url"], spec["api_key"], spec["window"], workdir, spec["destination"],
                       include_maps=spec["maps"])
        result = {**meter.figures(), "wall_seconds": figures.wall_seconds, "requests": figures.requests,
                  "rows": sum(figures.rows.values())}
        target = warehouse_target(workdir, spec["destination"])
        result.update(state_sizes(make_pipeline(target, workdir / "dlt"), target.store))
    else:
        from bench_sync import warehouse_target
        from rest_api_baseline import sync as baseline_sync

        meter = Meter()
        run = baseline_sync(spec["base_url"], spec["api_key"], workdir, include_maps=spec["maps"])
        result = {**meter.figures(), "wall_seconds": run.wall_seconds, "requests": None,
                  "rows": sum(run.rows.values())}
        result.update(state_sizes(run.pipeline, warehouse_target(workdir).store))  # the baseline's is a lake
    report(result)


def measured_sync(kind: str, base_url: str, workdir: Path, args: argparse.Namespace, probe: SandboxProbe) -> dict:
    """One sync of `kind` in a child process, with the sandbox's counters (reset first) and the disk of the
    warehouse (`warehouse_bytes`) and of dlt's working folders (`workdir/dlt`) before and after."""
    before = {"warehouse": warehouse_bytes(workdir), "dlt": dir_bytes(workdir / "dlt")}
    probe.reset()
    spec = {"kind": kind, "base_url": base_url, "api_key": API_KEY, "window": args.window,
            "workdir": str(workdir), "maps": not args.no_maps, "destination": args.destination}
    result = run_child(__file__, spec)
    served = probe.stats()
    result["served"] = sum(sum(v.values()) for v in served["requests_by_key"].values())
    result["429"] = served["rate_limited_total"]
    if result["requests"] is None:  # the baseline's client is dlt's: the sandbox counts what it sent
        result["requests"] = result["served"] + result["429"]
    result["warehouse_growth"] = warehouse_bytes(workdir) - before["warehouse"]
    result["dlt_growth"] = dir_bytes(workdir / "dlt") - before["dlt"]
    return result


def sync_labels(unchanged: int) -> list[str]:
    """`full`, then `unchanged 1` .. `unchanged N`."""
    return ["full", *(f"unchanged {n}" for n in range(1, unchanged + 1))]


def run_scale(shipments: int, args: argparse.Namespace) -> dict[str, Any]:
    """The pipeline's syncs (each after its minimum is computed), then the baseline's, against one frozen
    sandbox; the baseline's minimum is the pipeline's for the same sync (same account, same instant)."""
    started = time.perf_counter()
    sandbox = start_sandbox("--shipments", str(shipments), "--seed", str(args.seed), "--rate-window",
                            str(args.window), "--speed", "0", "--start", START, "--api-key", API_KEY,
                            timeout=600)  # fmt: skip
    out: dict[str, Any] = {"shipments": shipments, "runs": []}
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-scale-") as tmp:
        probe = SandboxProbe(sandbox.base_url, API_KEY, args.window, Path(tmp))
        minima = []
        for label in sync_labels(args.unchanged_syncs):
            need = probe.minimum(fetch_maps=not args.no_maps)
            if args.no_maps:
                need["maps"] = 0
            minima.append(sum(need.values()))
            run = measured_sync(PIPELINE, sandbox.base_url, Path(tmp) / "pipeline", args, probe)
            out["runs"].append({"kind": PIPELINE, "label": label, "minimum": minima[-1], **run})
            _progress(shipments, PIPELINE, label, run)
        out["containers"] = len(probe.model.event_sets)
        if args.baseline:
            for label, minimum in zip(sync_labels(args.unchanged_syncs), minima, strict=True):
                run = measured_sync(BASELINE, sandbox.base_url, Path(tmp) / "rest_api", args, probe)
                out["runs"].append({"kind": BASELINE, "label": label, "minimum": minimum, **run})
                _progress(shipments, BASELINE, label, run)
        probe.close()
    out["seconds"] = time.perf_counter() - started
    return out


def _progress(shipments: int, kind: str, label: str, run: dict[str, Any]) -> None:
    print(f"  {shipments} shipments, {kind}, {label}: {run['requests']} requests, {run['wall_seconds']:.1f} s wall, "
          f"{run['cpu_seconds']:.1f} s CPU, {run['peak_mib']:.0f} MiB", file=sys.stderr, flush=True)


def budget_share(run: dict[str, Any]) -> float:
    """The sync's local CPU seconds as a % of the time its served requests take at the real window
    (`REAL_WINDOW_SECONDS / limit` per request): the part of a rate-bound sync that is local work."""
    budget = run["served"] * REAL_WINDOW_SECONDS / BUCKET_LIMITS["default"]
    return 100 * run["cpu_seconds"] / budget if budget else float("inf")


def scale_table(scales: list[dict[str, Any]]) -> str:
    """One row per sync: requests vs minimum, wall, CPU, budget share, peak RSS (and its ratio to the first
    scale's same client and sync), state size, disk growth."""
    first = {(r["kind"], r["label"]): r["peak_mib"] for r in scales[0]["runs"]}
    rows = []
    for scale in scales:
        for r in scale["runs"]:
            base = first.get((r["kind"], r["label"]))
            rows.append([
                f"{scale['shipments']:,}", r["kind"], r["label"], r["requests"], r["429"], r["minimum"],
                r["wall_seconds"], r["cpu_seconds"], f"{budget_share(r):.1f}%", round(r["baseline_mib"]),
                round(r["peak_mib"]), r["peak_mib"] / base if base else "", _or_dash(r["state_json"]),
                _or_dash(r["state_row"]), r["warehouse_growth"], r["dlt_growth"],
            ])  # fmt: skip
    headers = ["shipments", "client", "sync", "requests", "429s", "minimum", "wall s", "CPU s",
               f"CPU % of {REAL_WINDOW_SECONDS:g} s budget", "imports MiB", "peak RSS MiB", "RSS x first",
               "state.json B", "state row B", "warehouse +B", "dlt dir +B"]  # fmt: skip
    return render(headers, rows)


def _or_dash(value: Any) -> Any:
    return "-" if value is None else value


def checks_table(scales: list[dict[str, Any]]) -> str:
    """The issue's done-when figures for the pipeline's syncs, each against its limit."""
    first = {r["label"]: r for r in scales[0]["runs"] if r["kind"] == PIPELINE}
    rows = []
    for scale in scales:
        runs = [r for r in scale["runs"] if r["kind"] == PIPELINE]
        n = f"{scale['shipments']:,}"
        limit = RSS_LIMITS.get(scale["shipments"])
        if limit and scale is not scales[0]:
            worst = max(r["peak_mib"] / first[r["label"]]["peak_mib"] for r in runs)
            rows.append([n, f"peak RSS / {scales[0]['shipments']:,}'s (worst sync)", f"{worst:.2f}", f"<= {limit:g}"])
        state = max((r["state_json"] or 0) for r in runs)
        rows.append([n, "state.json bytes (largest)", state, f"<= {STATE_LIMIT_BYTES:,}"])
        for r in runs[1:]:
            rows.append([n, f"disk growth, {r['label']} (bytes)", r["warehouse_growth"] + r["dlt_growth"],
                         f"<= {DISK_GROWTH_LIMIT_BYTES:,}"])
            rows.append([n, f"CPU % of budget, {r['label']}", f"{budget_share(r):.1f}%", f"<= {CPU_SHARE_LIMIT:g}%"])
        for r in runs:
            rows.append([n, f"requests - minimum, {r['label']}", r["requests"] - r["minimum"], "<= 0"])
    return render(["shipments", "figure", "value", "limit"], rows)


def main(argv: list[str] | None = None) -> int:
    """Parse the options, run every scale, print the scale table and the done-when figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--scales", default="1000,10000,100000", help="shipment counts, comma-separated")
    parser.add_argument("--no-maps", action="store_true", help="sync without maps (include_maps=False)")
    parser.add_argument("--window", type=float, default=1.0, help="sandbox and client rate window, seconds")
    parser.add_argument("--unchanged-syncs", type=int, default=2, help="incremental syncs after the full one")
    parser.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                        help="also run the hand-configured dlt rest_api baseline")
    parser.add_argument("--seed", type=int, default=7, help="sandbox world seed")
    parser.add_argument("--destination", choices=DESTINATIONS, default="ducklake",
                        help="the pipeline's embedded warehouse (the baseline always loads the lake)")
    parser.add_argument(CHILD_FLAG, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        child_main(args.memory_child)
        return 0
    started = time.perf_counter()
    scales = []
    for n in (int(s) for s in args.scales.split(",") if s.strip()):
        scales.append(run_scale(n, args))
        print(f"  {n} shipments done in {scales[-1]['seconds']:.0f} s", file=sys.stderr, flush=True)
    containers = ", ".join(f"{s['shipments']:,} shipments = {s['containers']:,} containers" for s in scales)
    print(f"\n## Scale: full and unchanged syncs into {args.destination} (rate window {args.window:g} s, maps "
          f"{'off' if args.no_maps else 'on'}; {containers})\n")
    print(scale_table(scales))
    print("\n## Done-when figures (pipeline)\n")
    print(checks_table(scales))
    print(f"\ntotal benchmark time {time.perf_counter() - started:.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
