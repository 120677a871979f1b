"""Ingest: the `ocean_tracking` dlt source as Dagster assets `ocean_tracking/<table>` (group `ingest`).

One subsettable multi-asset runs the one load path (`pipelines.sync.load_account`, the same the CLI's
`sync` runs) and turns its dlt `LoadInfo` into materializations. Why not `dagster-dlt`'s `@dlt_assets`
and `DagsterDltResource.run`: the resource drops the pipeline's pending load packages before every run
(an interrupted load would be thrown away instead of finished), and the decorator needs a dlt source and
pipeline built at import, which makes loading the code location slow and writes dlt's working folder.
The specs here carry what the decorator would derive (kinds, table names); the columns are reported at
materialization from dlt's schema, so they are the loaded ones.

- the source is built FRESH in the asset body with the client of the `ocean_tracking_api` resource
  (a source reused across materializations fails every second run: dlt issue #4253);
- the op runs in the `ocean_tracking` pool (limit 1 in dagster.yaml): two runs never split the
  account's 100 requests/min nor fight over DuckDB's single writer;
- with several accounts (`assets.accounts`) the asset is partitioned by account: a run loads its partition's
  account, with that account's key, into its dataset (`ocean_tracking_<account>`), and reads that account's
  webhook journal.
"""

import contextlib
import json
from collections.abc import Iterator, Mapping
from datetime import timedelta
from graphlib import TopologicalSorter
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal

import dagster as dg

from assets.accounts import SINGLE_ACCOUNT, account_of, account_partitions
from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.settings import DATASET_NAME, DEFAULT_FRESHNESS_HOURS, Account, pipelines_dir
from pipelines.source import TABLES
from pipelines.warehouse import count_rows, loader_session, newest_loads

if TYPE_CHECKING:
    import dlt

    from pipelines.api.client import OceanTrackingClient
    from pipelines.source.map_schedule import MapPlan
    from pipelines.sync import Loaded
    from pipelines.warehouse.destinations import Target

KEY_PREFIX = "ocean_tracking"
INGEST_GROUP = "ingest"

# The raw tables, their lineage (a table depends on the tables its references name) and descriptions come
# from the registry, `pipelines.source.TABLES`; all are loaded by one dlt run from one page stream.


def asset_key(table: str) -> dg.AssetKey:
    """The Dagster key of an ingest table: `ocean_tracking/<table>`."""
    return dg.AssetKey([KEY_PREFIX, table])


# Upstream tables first: a multi-asset must yield its outputs in dependency order.
LOAD_ORDER = tuple(TopologicalSorter({name: table.parents for name, table in TABLES.items()}).static_order())
INGEST_KEYS = [asset_key(table) for table in LOAD_ORDER]


def ingest_spec(table: str) -> dg.AssetSpec:
    """The spec of one ingest table: key, deps that follow the foreign keys, group, freshness policy."""
    return dg.AssetSpec(
        key=asset_key(table),
        deps=[asset_key(parent) for parent in TABLES[table].parents],
        group_name=INGEST_GROUP,
        description=TABLES[table].description,
        kinds={"dlt", "duckdb"},
        # with accounts, each partition's table is in its own dataset: named by each materialization instead
        metadata={"dagster/table_name": f"{DATASET_NAME}.{table}"} if account_partitions is None else {},
        freshness_policy=dg.FreshnessPolicy.time_window(
            fail_window=timedelta(hours=DEFAULT_FRESHNESS_HOURS),
            warn_window=timedelta(hours=DEFAULT_FRESHNESS_HOURS - 2),
        ),
    )


class IngestConfig(dg.Config):
    """Run config of an ingest run (defaults are what the schedules use).

    `mode` says what the run reads: `poll`, the listing (a full sync or a refresh, by the tables selected);
    `notifications`, what the webhook journal's pending notifications name (`pipelines.sync`);
    `maps`, the route maps the map-freshness scheduler ranks first within `map_budget` requests, aiming
    at no at-sea map older than `map_bound_minutes`."""

    include_maps: bool = True
    map_refresh_seconds: float = 3600.0
    mode: Literal["poll", "notifications", "maps"] = "poll"
    map_budget: int = 0
    map_bound_minutes: float = 360.0


def working_dir(instance: dg.DagsterInstance) -> Path:
    """Where dlt keeps the pipeline's working folders: $OCEAN_TRACKING_PIPELINES_DIR, else
    `<instance root>/dlt_pipelines` (under `.dagster/`, git-ignored). They hold pending load packages
    (finished by the next run) and a cache of the state, which dlt restores from the warehouse."""
    return pipelines_dir(default=Path(instance.root_directory) / "dlt_pipelines")


def column_schema(schema: "dlt.Schema", table: str) -> dg.TableSchema:
    """The loaded columns of a table (and their dlt data types) from dlt's schema."""
    columns = schema.get_table_columns(table) if table in schema.tables else {}
    return dg.TableSchema(
        columns=[dg.TableColumn(name, str(column.get("data_type", "unknown"))) for name, column in columns.items()]
    )


def api_spend_tags(stats: Mapping[str, Any]) -> dict[str, str]:
    """What a run spent of the rate budget, as run tags (once a run, not on every table it loaded):
    requests sent, 429s received, retries, seconds waited on the limiter. Built from `client.stats()`,
    which never holds the key. Tags are strings; the UI shows them on the run and filters runs by them."""
    return {
        f"{KEY_PREFIX}/api_requests": str(sum(int(count) for count in stats["requests"].values())),
        f"{KEY_PREFIX}/api_responses_429": str(int(stats["responses_429"])),
        f"{KEY_PREFIX}/api_retries": str(int(stats["retries"])),
        f"{KEY_PREFIX}/api_limiter_wait_seconds": f"{float(sum(stats['wait_seconds'].values())):.3f}",
    }


def table_metadata(table: str, rows: Mapping[str, int], loaded_at: Mapping[str, float]) -> dict[str, Any]:
    """Rows in the table now and when its data last changed (`dagster/last_updated_timestamp`, what
    freshness reads), when the table exists."""
    metadata: dict[str, Any] = {}
    if table in rows:
        metadata["dagster/row_count"] = dg.MetadataValue.int(rows[table])
    if table in loaded_at:
        metadata["dagster/last_updated_timestamp"] = dg.MetadataValue.timestamp(loaded_at[table])
    return metadata


@dg.multi_asset(
    name="ocean_tracking_ingest",
    specs=[ingest_spec(table) for table in LOAD_ORDER],
    can_subset=True,
    pool=OCEAN_TRACKING_POOL,
    partitions_def=account_partitions,
)
def ocean_tracking_assets(
    context: dg.AssetExecutionContext,
    config: IngestConfig,
    ocean_tracking_api: OceanTrackingApi,
    warehouse: Warehouse,
) -> Iterator[dg.MaterializeResult]:
    """Load the selected tables in one dlt run (finishing an interrupted one first); report each table's
    rows, columns and freshness, and the run's API spend once, as run tags."""
    # dlt and the source are imported when a run needs them, not when the definitions load
    from pipelines.compat import lake_connections_kept
    from pipelines.source.bookkeeping import TooManyItemFailuresError, raise_if_excessive
    from pipelines.source.resources import ocean_tracking
    from pipelines.sync import load_account
    from pipelines.warehouse.destinations import make_pipeline

    tables = [key.path[-1] for key in INGEST_KEYS if key in context.selected_asset_keys]
    account = account_of(context)
    target = warehouse.target(account)
    pipeline = make_pipeline(target, pipelines_dir=working_dir(context.instance))
    loaded = None
    # the load and the row counts below share one attach of the lake (as `sync_account` does)
    with lake_connections_kept():
        with ocean_tracking_api.client(account) as client:
            try:
                if config.mode == "poll":
                    source = ocean_tracking(
                        client=client, include_maps=config.include_maps, map_refresh_seconds=config.map_refresh_seconds
                    )
                    resources = [table for table in tables if TABLES[table].resource]
                    if resources and len(tables) < len(INGEST_KEYS):
                        source = source.with_resources(*resources)
                    loaded = load_account(pipeline, source, target, client=client)
                else:
                    loaded = targeted_load(context, config, client, target, account)
            finally:  # what a failed run spent matters as much (429s, retries)
                stats = client.stats()
                context.instance.add_run_tags(context.run_id, api_spend_tags(stats))
        context.log.info("API requests spent, by bucket: %s", json.dumps(dict(sorted(stats["requests"].items()))))
        if loaded is not None and loaded.finished_pending_load:
            context.log.warning("Finished the load an interrupted run had left pending before this one.")
        if loaded is not None and (warning := loaded.issues.warning()):
            context.log.warning(warning)
        load_ids = list(loaded.load_info.loads_ids) if loaded is not None else []
        pipeline = make_pipeline(target, pipelines_dir=working_dir(context.instance))
        schema = pipeline.default_schema
        with loader_session(pipeline, target.store) as con:
            row_counts, loaded_at = count_rows(con, target.dataset_name), newest_loads(con, target.dataset_name)
    for table in tables:
        located = {} if account.name is None else {"dagster/table_name": f"{target.dataset_name}.{table}"}
        yield dg.MaterializeResult(
            asset_key=asset_key(table),
            metadata={
                **located,
                **table_metadata(table, row_counts, loaded_at),
                "dagster/column_schema": column_schema(schema, table),
                "dlt_load_ids": dg.MetadataValue.json(load_ids),
            },
        )
    if loaded is None:
        return
    # after the materializations: what arrived is loaded and reported, and the run still fails
    try:
        raise_if_excessive(loaded.issues)
    except TooManyItemFailuresError as error:
        raise dg.Failure(description=str(error)) from None


MAPS_YIELDED_TAG = f"{KEY_PREFIX}/maps_yielded"  # a map refresh cut short: the map sensor resumes it when quiet
NOTIFICATIONS_APPLIED_TAG = f"{KEY_PREFIX}/notifications_applied"  # on a notification run once its batch is loaded


def targeted_load(context: dg.AssetExecutionContext, config: IngestConfig, client: "OceanTrackingClient",
                  target: "Target", account: Account = SINGLE_ACCOUNT) -> "Loaded | None":
    """The `notifications` and `maps` modes of an ingest run (`pipelines.sync`): what the webhook
    journal of `account` names, or the maps the scheduler chose; reported in the run's log and tags."""
    from pipelines.journals import NotificationJournal
    from pipelines.sync import refresh_from_notifications, refresh_maps

    if config.mode == "maps":
        # a map refresh fetches for minutes at the account's rate: it stops for the webhook notifications that
        # arrive meanwhile (their run waits for this one's pool slot); the map sensor resumes it once none waits
        with contextlib.ExitStack() as stack:
            journal = (stack.enter_context(NotificationJournal(account=account))
                       if NotificationJournal.exists(account=account) else None)
            result = refresh_maps(client, target, config.map_budget, bound_seconds=config.map_bound_minutes * 60,
                                  pipelines_dir=working_dir(context.instance),
                                  yield_to=(lambda: bool(journal.pending(limit=1))) if journal else None)
        context.log.info(result.plan.explain() + (" Stopped early for webhook notifications." if result.yielded else ""))
        context.instance.add_run_tags(context.run_id, {**map_plan_tags(result.plan),
                                                       f"{KEY_PREFIX}/maps_fetched": str(result.maps_fetched),
                                                       MAPS_YIELDED_TAG: str(result.yielded).lower()})
        return result.loaded
    with NotificationJournal(account=account) as journal:
        refreshed = refresh_from_notifications(client, target, journal, pipelines_dir=working_dir(context.instance),
                                               run_id=context.run_id)
    context.log.info(refreshed.summary())
    for notice_id, why in sorted(refreshed.failed.items()):
        context.log.warning(f"Notification {notice_id} could not be applied: {why}")
    context.instance.add_run_tags(context.run_id, {NOTIFICATIONS_APPLIED_TAG: str(refreshed.applied),
                                                   f"{KEY_PREFIX}/notifications_failed": str(len(refreshed.failed))})
    return refreshed.loaded


def map_plan_tags(plan: "MapPlan") -> dict[str, str]:
    """The freshness a map refresh planned, as run tags: maps chosen, at-sea maps, p95 age, bound met."""
    p95 = "" if plan.age_p95_seconds is None or plan.age_p95_seconds == float("inf") else f"{plan.age_p95_seconds / 60:.1f}"
    return {
        f"{KEY_PREFIX}/maps_chosen": str(len(plan.chosen)),
        f"{KEY_PREFIX}/maps_at_sea": str(plan.at_sea),
        f"{KEY_PREFIX}/map_age_p95_minutes": p95 or "unbounded",
        f"{KEY_PREFIX}/map_bound_met": str(plan.bound_met).lower(),
    }
