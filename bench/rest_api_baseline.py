"""The baseline the pipeline is measured against: the same account extracted by dlt's own `rest_api` source,
configured by hand as a dlt user would from the API's documentation, loaded into a DuckLake. Run alone, a
full and an unchanged sync of a fresh sandbox (frozen clock):

    uv run python bench/rest_api_baseline.py [--shipments 60] [--window 1] [--no-maps]

The configuration: `Authorization: Token <key>`, JSON:API pages of 100 followed by `links.next`, records
from `data`, merged on `id`. Resources: shipments (with the pipeline's `include=`, though `data` keeps only
the shipments), containers (the list, parent of the maps), tracking requests (incremental on
`updated_at` through `filter[updated_at][start]`), parties, shipping lines, and unless `--no-maps` every
container's `map_geojson` as a dependent resource (its features, each container's set replaced on merge,
geometry kept as one JSON column). No proactive rate limiting: dlt's client retries a 429 after its
`Retry-After`. There is no map schedule and no per-item event or reference fetches: what a generic
configuration does not know.
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt
from bench_sync import API_KEY, warehouse_target
from bench_table import render
from dlt.sources.rest_api import rest_api_source

from pipelines.settings import PAGE_SIZE
from pipelines.source.resources import SHIPMENT_INCLUDES

PIPELINE_NAME = DATASET_NAME = "rest_api_baseline"
START = "2026-11-01T00:00:00+00:00"


def baseline_config(base_url: str, api_key: str, include_maps: bool = True) -> dict[str, Any]:
    """The hand-written `RESTAPIConfig` for the account (see the module docstring)."""
    page = {"page[size]": PAGE_SIZE}
    updated_since = {"type": "incremental", "cursor_path": "attributes.updated_at",
                     "initial_value": "1970-01-01T00:00:00Z"}
    resources: list[dict[str, Any]] = [
        {"name": "shipments",
         "endpoint": {"path": "shipments", "params": {**page, "include": ",".join(SHIPMENT_INCLUDES)}}},
        {"name": "containers", "endpoint": {"path": "containers", "params": page}},
        {"name": "tracking_requests",
         "endpoint": {"path": "tracking_requests", "params": {**page, "filter[updated_at][start]": updated_since}}},
        {"name": "parties", "endpoint": {"path": "parties", "params": page}},
        {"name": "shipping_lines", "endpoint": {"path": "shipping_lines", "params": page}},
    ]
    if include_maps:
        resources.append({
            "name": "container_maps",
            "endpoint": {"path": "containers/{resources.containers.id}/map_geojson", "data_selector": "features",
                         "paginator": "single_page"},
            "include_from_parent": ["id"],
            "primary_key": [],
            "merge_key": "_containers_id",
            "write_disposition": {"disposition": "merge", "strategy": "delete-insert"},
            "columns": {"geometry": {"data_type": "json"}},
        })  # fmt: skip
    return {
        "client": {
            "base_url": base_url.rstrip("/") + "/",
            "auth": {"type": "api_key", "name": "Authorization", "api_key": f"Token {api_key}", "location": "header"},
            "paginator": {"type": "json_link", "next_url_path": "links.next"},
        },
        "resource_defaults": {"primary_key": "id", "write_disposition": "merge", "endpoint": {"data_selector": "data"}},
        "resources": resources,
    }


@dataclass
class BaselineRun:
    """One baseline sync: wall seconds, rows loaded per table, and the dlt pipeline (for its state)."""

    wall_seconds: float
    rows: dict[str, int]
    pipeline: dlt.Pipeline


def baseline_pipeline(workdir: Path) -> dlt.Pipeline:
    """The baseline's dlt pipeline: the DuckLake in `workdir` (`bench_sync.warehouse_target`), its own
    dataset, working folder under `workdir/dlt`."""
    os.environ.setdefault("RUNTIME__DLTHUB_TELEMETRY", "false")
    return dlt.pipeline(pipeline_name=PIPELINE_NAME, destination=warehouse_target(workdir).destination,
                        dataset_name=DATASET_NAME, pipelines_dir=str(workdir / "dlt"))


def sync(base_url: str, api_key: str, workdir: Path, include_maps: bool = True) -> BaselineRun:
    """One `pipeline.run` of the hand-configured source into the DuckLake in `workdir`; a first call in a
    fresh workdir is a full sync, later ones are incremental (tracking requests only)."""
    pipeline = baseline_pipeline(workdir)
    source = rest_api_source(baseline_config(base_url, api_key, include_maps))
    started = time.perf_counter()
    pipeline.run(source).raise_on_failed_jobs()
    wall = time.perf_counter() - started
    rows = pipeline.last_trace.last_normalize_info.row_counts
    return BaselineRun(wall, {t: n for t, n in rows.items() if not t.startswith("_dlt")}, pipeline)


def main(argv: list[str] | None = None) -> int:
    """A full then an unchanged sync of a fresh sandbox with a frozen clock; prints one row per sync."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", type=int, default=60, help="shipments in the sandbox world (at least 50)")
    parser.add_argument("--window", type=float, default=1.0, help="sandbox rate window, seconds")
    parser.add_argument("--no-maps", action="store_true", help="leave out the per-container maps")
    args = parser.parse_args(argv)
    from sandbox.launcher import start_sandbox

    sandbox = start_sandbox("--shipments", str(args.shipments), "--rate-window", str(args.window), "--speed", "0",
                            "--start", START, "--api-key", API_KEY)  # fmt: skip
    rows = []
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-rest-api-") as tmp:
        for label in ("full", "unchanged"):
            run = sync(sandbox.base_url, API_KEY, Path(tmp), include_maps=not args.no_maps)
            rows.append((label, run.wall_seconds, sum(run.rows.values())))
    print(f"\n## dlt rest_api baseline, {args.shipments} shipments (window {args.window:g} s)\n")
    print(render(("sync", "wall s", "rows"), rows))
    return 0


if __name__ == "__main__":
    sys.exit(main())
