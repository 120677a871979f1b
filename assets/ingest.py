"""Ingest: the `ocean_tracking` dlt source as Dagster assets `ocean_tracking/<table>` (group `ingest`).

One multi-asset (`@dlt_assets`, subsettable) runs the dlt pipeline into the warehouse. Two measured
pitfalls shape it (see STACK-NOTES, dagster-dlt):
- the source is built FRESH in the asset body with the client of the `ocean_tracking_api` resource;
  a source built once at import fails every second materialization in one process (dlt issue #4253).
  The import-time source only describes the assets (keys, deps) and holds a client that refuses to send.
- the op runs in the `ocean_tracking` pool (limit 1 in dagster.yaml): two runs never split the
  account's 100 requests/min nor fight over DuckDB's single writer.
"""

import json
import os
import tempfile
from collections.abc import Iterator, Mapping
from datetime import timedelta
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import dagster as dg
import dlt as dlt_lib
from dagster_dlt import DagsterDltResource, DagsterDltTranslator, dlt_assets
from dagster_dlt.translator import DltResourceTranslatorData

from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.pipeline import (
    DATASET_NAME,
    PIPELINE_NAME,
    create_geometry_view,
    make_pipeline,
    table_row_counts,
)
from pipelines.source import ocean_tracking

KEY_PREFIX = "ocean_tracking"
INGEST_GROUP = "ingest"
PIPELINES_DIR_ENV = "OCEAN_TRACKING_PIPELINES_DIR"
# The daily full sync plus slack for a retried or queued run.
DEFAULT_FRESHNESS_HOURS = 26.0

# Upstream tables of each table: a row here names rows there (`<relationship>_id` columns, or
# `shipping_line_scac`), so the lineage graph reads like the foreign keys. All are loaded by one dlt run from one page stream.
TABLE_DEPS: dict[str, tuple[str, ...]] = {
    "shipments": ("terminals", "ports", "shipping_lines"),
    "shipment_eta_history": ("shipments",),
    "containers": ("shipments", "terminals"),
    "transport_events": ("containers", "vessels", "ports", "terminals"),
    "map_features": ("containers",),
    "terminals": ("ports",),
    "ports": (),
    "vessels": (),
    "tracking_requests": ("shipments", "parties"),
    "parties": (),
    "shipping_lines": (),
}

DESCRIPTIONS = {
    "shipments": "Shipments (bills of lading / bookings), merged on id; one page per 100 shipments.",
    "shipment_eta_history": "Every version of a shipment's ETD/ETA dates across syncs (SCD2).",
    "containers": "Containers of the shipments (holds and fees as child tables), from the shipment pages.",
    "transport_events": "Milestones of each container; invalidated events kept with `invalidated_at`.",
    "map_features": "Route-map GeoJSON features per container (WKB geometry); fetched only when due.",
    "terminals": "Terminals named by shipments, containers and events (fetched by id once, ever).",
    "ports": "Ports named by shipments, terminals and events (fetched by id once, ever).",
    "vessels": "Vessels named by transport events (fetched by id once, ever).",
    "tracking_requests": "Tracking requests, incremental on `updated_at` (5-minute lag window).",
    "parties": "Customers (parties) of the account.",
    "shipping_lines": "Shipping lines (carriers) and their SCACs.",
}


def asset_key(table: str) -> dg.AssetKey:
    """The Dagster key of an ingest table: `ocean_tracking/<table>`."""
    return dg.AssetKey([KEY_PREFIX, table])


# Upstream tables first: a multi-asset must yield its outputs in dependency order.
LOAD_ORDER = tuple(TopologicalSorter(TABLE_DEPS).static_order())
INGEST_KEYS = [asset_key(table) for table in LOAD_ORDER]


class OceanTrackingTranslator(DagsterDltTranslator):
    """Clean keys `ocean_tracking/<table>`, group `ingest`, deps that follow the foreign keys instead
    of dagster-dlt's synthetic `dlt_<source>_<resource>` upstream keys, and a freshness policy."""

    def get_asset_spec(self, data: DltResourceTranslatorData) -> dg.AssetSpec:
        """The default spec (table metadata, kinds) with our key, deps, group and description."""
        spec = super().get_asset_spec(data)
        name = data.resource.name
        return spec.replace_attributes(
            key=asset_key(name),
            deps=[asset_key(parent) for parent in TABLE_DEPS.get(name, ())],
            group_name=INGEST_GROUP,
            description=DESCRIPTIONS.get(name, spec.description),
            freshness_policy=dg.FreshnessPolicy.time_window(
                fail_window=timedelta(hours=DEFAULT_FRESHNESS_HOURS),
                warn_window=timedelta(hours=DEFAULT_FRESHNESS_HOURS - 2),
            ),
        )


class _DescribeOnlyClient:
    """Stands in for the API client in the import-time source, which only describes the assets.

    Building the real client at import would need the API key just to load the code location."""

    def __getattr__(self, name: str) -> Any:
        raise RuntimeError(
            "The import-time ocean_tracking source must not send requests; the asset body builds a fresh one."
        )


def _describe_only_pipeline() -> dlt_lib.Pipeline:
    """A pipeline that only tells dagster-dlt the destination kind (duckdb); it never runs."""
    return dlt_lib.pipeline(
        pipeline_name=f"{PIPELINE_NAME}_asset_specs",
        destination=dlt_lib.destinations.duckdb(os.path.join(tempfile.gettempdir(), "never_written.duckdb")),
        dataset_name=DATASET_NAME,
        pipelines_dir=os.path.join(tempfile.gettempdir(), "ocean_tracking_dagster_specs"),
    )


class IngestConfig(dg.Config):
    """Run config of an ingest run (defaults are what the schedules use)."""

    include_maps: bool = True
    map_refresh_seconds: float = 3600.0


def pipelines_dir(instance: dg.DagsterInstance) -> Path:
    """Where dlt keeps the pipeline's working folder: $OCEAN_TRACKING_PIPELINES_DIR, else
    `<instance root>/dlt_pipelines` (under `.dagster/`, git-ignored). dagster-dlt drops the local
    state before every run and restores it from the warehouse, so this folder holds nothing precious."""
    configured = os.environ.get(PIPELINES_DIR_ENV)
    if configured:
        return Path(configured)
    try:
        return Path(instance.root_directory) / "dlt_pipelines"
    except Exception:  # an instance without local artifact storage
        return Path(tempfile.gettempdir()) / "ocean_tracking_dlt_pipelines"


def api_metadata(stats: Mapping[str, Any]) -> dict[str, Any]:
    """What the run spent of the rate budget, as asset metadata: requests per bucket, 429s received,
    seconds waited on the limiter. Built from `client.stats()`, which never holds the key."""
    requests_by_bucket = {bucket: int(count) for bucket, count in sorted(stats["requests"].items())}
    return {
        "api_requests_total": dg.MetadataValue.int(sum(requests_by_bucket.values())),
        "api_requests_by_bucket": dg.MetadataValue.json(requests_by_bucket),
        "api_responses_429": dg.MetadataValue.int(int(stats["responses_429"])),
        "api_retries": dg.MetadataValue.int(int(stats["retries"])),
        "api_limiter_wait_seconds": dg.MetadataValue.float(
            round(float(sum(stats["wait_seconds"].values())), 3)
        ),
        "api_retry_sleep_seconds": dg.MetadataValue.float(round(float(stats["retry_sleep_seconds"]), 3)),
    }


@dlt_assets(
    dlt_source=ocean_tracking(client=_DescribeOnlyClient()),
    dlt_pipeline=_describe_only_pipeline(),
    name="ocean_tracking_ingest",
    dagster_dlt_translator=OceanTrackingTranslator(),
    pool=OCEAN_TRACKING_POOL,
)
def ocean_tracking_assets(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    dlt: DagsterDltResource,
    ocean_tracking_api: OceanTrackingApi,
    warehouse: Warehouse,
) -> Iterator[dg.MaterializeResult]:
    """Load the selected tables in one dlt run, refresh `map_features_geo`, and report the API spend."""
    target = warehouse.target()
    pipeline = make_pipeline(target, pipelines_dir=pipelines_dir(context.instance))
    with ocean_tracking_api.client() as client:
        source = ocean_tracking(
            client=client, include_maps=config.include_maps, map_refresh_seconds=config.map_refresh_seconds
        )
        # dagster-dlt loads everything before the first event: the stats are final when it arrives
        results = list(
            dlt.run(context=context, dlt_source=source, dlt_pipeline=pipeline, loader_file_format="parquet")
        )
        spent = api_metadata(client.stats())
    create_geometry_view(target.duckdb_path, target.dataset_name)
    # not DltEventIterator.fetch_row_count(): it raises for a table this load sent no rows to
    row_counts = table_row_counts(target.duckdb_path, target.dataset_name)
    context.log.info("API requests spent: %s", json.dumps(spent["api_requests_by_bucket"].value))
    order = {key: i for i, key in enumerate(INGEST_KEYS)}
    for result in sorted(results, key=lambda r: order.get(r.asset_key, len(order))):
        table = result.asset_key.path[-1]
        counted = {"dagster/row_count": dg.MetadataValue.int(row_counts[table])} if table in row_counts else {}
        yield dg.MaterializeResult(
            asset_key=result.asset_key, metadata={**(result.metadata or {}), **counted, **spent}
        )
