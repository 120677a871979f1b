"""One sync of an account, the one load path: the CLI's `sync` and the Dagster ingest both run it.

`load_account` owns `pipeline.run`: it first finishes a load an interrupted run left behind (dlt keeps
the package; its own `run` would load that package and return without extracting), then extracts,
normalizes and loads afresh, then refreshes the derived views. `sync_account` adds what the CLI does
after a load and Dagster does as downstream assets: the analytics models.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import dlt
from dlt.common.pipeline import LoadInfo
from dlt.sources import DltSource

from pipelines.api.client import OceanTrackingClient
from pipelines.extract.source import history_without_scd2, ocean_tracking
from pipelines.settings import ANALYTICS_SCHEMA
from pipelines.warehouse.destinations import Target, make_pipeline
from pipelines.warehouse.models import build_models
from pipelines.warehouse.tables import connect, create_geometry_view, table_row_counts

logger = logging.getLogger(__name__)


@dataclass
class SyncResult:
    """What one sync did: dlt's load info, whether it first finished an interrupted load, the API spend,
    rows per raw table and per model (embedded DuckDB only)."""

    load_info: LoadInfo
    finished_pending_load: bool
    api_stats: dict[str, Any]
    row_counts: dict[str, int] = field(default_factory=dict)
    model_rows: dict[str, int] = field(default_factory=dict)


def finish_pending_load(pipeline: dlt.Pipeline) -> bool:
    """Normalize and load what an interrupted run extracted but did not load; True when there was some."""
    if not pipeline.has_pending_data:
        return False
    logger.warning("Finishing the load an interrupted sync left in %s before extracting afresh.", pipeline.working_dir)
    pipeline.normalize()
    pipeline.load()
    return True


def load_account(pipeline: dlt.Pipeline, source: DltSource, target: Target) -> tuple[LoadInfo, bool]:
    """Load one sync of `source` into `target`: finish a pending load, extract afresh, refresh the views.

    Returns dlt's load info and whether an interrupted load was finished first."""
    finished = finish_pending_load(pipeline)
    if target.table_format:
        for resource in source.resources.values():
            resource.apply_hints(table_format=target.table_format)
        history_without_scd2(source)
    info = pipeline.run(source, loader_file_format="parquet")
    info.raise_on_failed_jobs()
    if target.duckdb_path is not None:
        create_geometry_view(target.duckdb_path, target.dataset_name)
    return info, finished


def sync_account(
    client: OceanTrackingClient,
    target: Target,
    *,
    include_maps: bool = True,
    map_refresh_seconds: float = 3600.0,
    pipelines_dir: str | Path | None = None,
    models: bool = True,
) -> SyncResult:
    """Extract the whole account through `client` into `target`, then build the analytics models.

    Models are built on the embedded DuckDB target (they are DuckDB SQL); other destinations get the raw
    tables only."""
    pipeline = make_pipeline(target, pipelines_dir)
    source = ocean_tracking(client=client, include_maps=include_maps, map_refresh_seconds=map_refresh_seconds)
    info, finished = load_account(pipeline, source, target)
    result = SyncResult(info, finished, client.stats())
    if target.duckdb_path is not None:
        if models:
            search_path = (target.dataset_name, ANALYTICS_SCHEMA)
            with connect(target.duckdb_path, search_path=search_path) as con:
                result.model_rows = build_models(con, app_url=client.settings.app_url)
        result.row_counts = table_row_counts(target.duckdb_path, target.dataset_name)
    return result
