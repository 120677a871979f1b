# longer than 500 lines because the full sync and the targeted refresh are one load path (`load_account`), with its lock, key claim and fixed costs.
"""The load paths of an account: one sync (the CLI's `sync` and the Dagster ingest both run it) and the targeted
refresh, both through `load_account`.

`load_account` owns `pipeline.run`: it first finishes a load an interrupted run left behind (dlt keeps
the package; its own `run` would load that package and return without extracting), then extracts,
normalizes and loads afresh, then refreshes the derived views. It holds the dataset's sync lock throughout
(a second run of the account, on any host, waits), and a dataset answers to one API key: the first load
records the key's fingerprint (and where it was loaded from) in the dataset's dlt state, another key is
refused before it extracts, and a key the service rejects is never recorded (`claim_dataset`). Per-item requests that failed after their
retries were skipped and recorded (`sync_issues`); the load reports them, and fails the sync after loading
when too many failed (`pipelines.source.bookkeeping`). `sync_account` adds what the CLI does after a load
and Dagster does as downstream assets: the analytics models.

The targeted refresh loads only what webhook notifications name, and the route maps the budget allows. Polling re-reads every page to find the few shipments that changed. Webhooks say which changed: the
receiver journals each notification (`pipelines.webhooks.receiver`), and `refresh_from_notifications` loads the
shipments, containers, events and tracking requests they name, through the same dlt source and load path as
the full sync (`load_account`), so the rows are the ones a full sync would load. Complete
payloads cost no request; an incomplete one costs one GET per shipment per refresh
(`pipelines.webhooks.plan_batch`). The journal is marked only after the load committed: a crash in between
applies the same notifications again, which loads the same rows again.

`refresh_maps` spends a request budget on the route maps the map-freshness scheduler ranks first
(`pipelines.source.map_schedule`), from the same `fetch_log` the full sync keeps.
"""

from __future__ import annotations

import gc
import ipaddress
import logging
from collections.abc import Callable, Collection, Iterable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import UTC, datetime
from functools import partial
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import dlt
from dlt.common.pipeline import LoadInfo
from dlt.pipeline.exceptions import PipelineStepFailed
from dlt.sources import DltSource

from pipelines import compat
from pipelines.api import rows_by_type
from pipelines.api.client import OceanTrackingClient
from pipelines.compat import lake_connections_kept
from pipelines.errors import AuthenticationError, ConfigurationError, NotFoundError
from pipelines.journals import Notification, NotificationJournal
from pipelines.settings import SOURCE_NAME, cleanup_grace
from pipelines.source import TABLES
from pipelines.source.bookkeeping import ItemIssuesReport, issues_of_load, loaded_rows
from pipelines.source.map_schedule import DEFAULT_FRESHNESS_BOUND_SECONDS, MapPlan, candidates_sql, plan_maps
from pipelines.source.resources import SHIPMENT_INCLUDES, history_without_scd2, ocean_tracking
from pipelines.warehouse import (
    LOAD_COMMITS,
    SYNC_LOCK_WAIT_SECONDS,
    count_rows,
    current_snapshot,
    ensure_geometry_view,
    loader_session,
    name_commits_after,
    set_lake_options,
)
from pipelines.warehouse.connections import (
    WarehouseLockedError,
    connect_waiting,
    exclusive_file_lock,
    locked_error,
)
from pipelines.warehouse.destinations import (
    Target,
    is_postgres,
    make_pipeline,
    publish_geometry_view,
    unreachable,
)
from pipelines.warehouse.maintenance import cleanup_old_files
from pipelines.warehouse.models import build_models, build_models_in_postgres
from pipelines.webhooks import (
    Notice,
    plan_batch,
    shipments_named,
    tracking_requests_named,
    version_key,
)

logger = logging.getLogger(__name__)

# Where the dataset's dlt state records which key loads it (a sha256 prefix, never the key), and from where
# (the base URL's scheme, host and port).
KEY_FINGERPRINT_STATE = "api_key_fingerprint"
KEY_ORIGIN_STATE = "api_origin"


class DatasetOfAnotherKeyError(ConfigurationError):
    """The dataset was loaded with another API key: most likely another account's data."""


@dataclass(frozen=True)
class Loaded:
    """What `load_account` did: dlt's load info, whether it first finished an interrupted load, the items that
    failed (skipped, listed in `sync_issues`), and on PostgreSQL whether the PostGIS view of the map features
    was made (`publish_geometry_view`: None when there was nothing to make it from)."""

    load_info: LoadInfo
    finished_pending_load: bool
    issues: ItemIssuesReport
    postgis_view: bool | None = None


@dataclass
class SyncResult:
    """What one sync did: the load, the API spend, rows per raw table and per model (embedded warehouse only)."""

    loaded: Loaded
    api_stats: dict[str, Any]
    row_counts: dict[str, int] = field(default_factory=dict)
    model_rows: dict[str, int] = field(default_factory=dict)
    models_reason: str = ""  # what decided which models the sync built (`pipelines.warehouse.models.plan_build`)


def finish_pending_load(pipeline: dlt.Pipeline, target: Target) -> bool:
    """Normalize and load what an interrupted run extracted but did not load; True when there was some."""
    if not pipeline.has_pending_data:
        return False
    logger.warning("Finishing the load an interrupted sync left in %s before extracting afresh.", pipeline.working_dir)
    finish_normalize_commit(pipeline)
    pipeline.normalize()
    load_waiting(pipeline, target)
    return True


def load_waiting(pipeline: dlt.Pipeline, target: Target) -> LoadInfo:
    """Load the normalized package into the target, waiting for the warehouse instead of failing.

    On a lake, the files it let go more than the cleanup grace ago are deleted first, in the same session
    (`cleanup_old_files`), and the load's commits are named after it (`sync <load id>: dlt load`:
    `name_commits_after`). A lake's writer lock is taken for the load only (the extraction never holds it),
    waited for while a model run, a maintenance run or a write-back publish holds it. A plain DuckDB file another process
    took after the extraction began is waited for, then the package is loaded. Either way an extraction
    is never thrown away, nor fetched again, because the load had to wait: past the wait the package
    stays pending and the next sync loads it first."""
    store = target.store
    kept = "The extracted data is kept: the next sync loads it first."
    if store is None:
        return pipeline.load()
    if store.is_lake:
        try:
            with store.writing():
                with loader_session(pipeline, store) as con:  # a lake older than the writer's options gets them
                    set_lake_options(con)
                    # the files the lake let go past their grace (what the nightly maintenance expired, what the
                    # merges since replaced) leave the disk now, not a night later
                    cleanup_old_files(con, cleanup_grace(), metadata_schema=store.catalog_tables_schema)
                    before = current_snapshot(con)
                info = pipeline.load()
                with loader_session(pipeline, store) as con:
                    name_commits_after(con, before, f"{sync_name(info.loads_ids)}: {LOAD_COMMITS}",
                                       metadata_schema=store.catalog_tables_schema)  # fmt: skip
                return info
        except WarehouseLockedError as error:
            raise WarehouseLockedError(f"{error} {kept}") from None
    try:
        return pipeline.load()
    except PipelineStepFailed as error:
        if locked_error(error, store.duckdb_file) is None:
            raise
    logger.warning("The load found %s held by another process; waiting for it, the extracted data is kept.",
                   store.duckdb_file)
    try:
        connect_waiting(store.duckdb_file).close()
        return pipeline.load()
    except (WarehouseLockedError, PipelineStepFailed) as error:
        locked = error if isinstance(error, WarehouseLockedError) else locked_error(error, store.duckdb_file)
        if locked is None:
            raise
        raise WarehouseLockedError(f"{locked} {kept}") from None


def finish_normalize_commit(pipeline: dlt.Pipeline) -> None:
    """Complete a normalize step killed while it committed (dlt issue #4446).

    dlt commits a normalized package by renaming it into the load folder, then deleting its extracted copy.
    A kill between the two leaves both copies, and every later normalize fails on the rename ("Directory
    not empty"). The rename is atomic, so the normalized copy is whole; deleting the extracted copy finishes
    dlt's own commit. Dropping the package instead would lose the state it carries."""
    committed = set(pipeline.list_extracted_load_packages()) & set(pipeline.list_normalized_load_packages())
    if committed:
        extracted = compat.extracted_packages(pipeline)
        for load_id in sorted(committed):
            logger.warning("Finishing the commit of normalized package %s that an interrupted sync left.", load_id)
            extracted.delete_package(load_id)


# Allocations between two young-generation collections while the pages stream (the default is 700).
PAGE_LOOP_GC_THRESHOLD = 50_000


@contextmanager
def gc_tuned(threshold: int = PAGE_LOOP_GC_THRESHOLD) -> Iterator[None]:
    """Run the extraction with cheaper garbage collection, then restore the interpreter's settings.

    A page allocates some hundred thousand short-lived objects (parsed JSON, rows) and creates almost no
    reference cycles, so the default young-generation threshold (700 allocations) runs thousands of
    collections a sync for nothing, and each full collection walks every object the process holds (dlt,
    DuckDB, Dagster). What exists before the extraction is frozen out of the collector's walks
    (`gc.freeze`) and collections run less often. Measured in `bench/hot_path.py`."""
    previous = gc.get_threshold()
    gc.freeze()
    gc.set_threshold(threshold, *previous[1:])
    try:
        yield
    finally:
        gc.set_threshold(*previous)
        gc.unfreeze()


def claim_dataset(pipeline: dlt.Pipeline, client: OceanTrackingClient, *, adopt_key: bool = False) -> None:
    """Make sure the dataset answers to the client's key before anything is extracted into it, and record the
    key on its first load. The fingerprint lives in the dataset's dlt state (restored from the destination on
    every host), so two accounts can never be merged into one dataset by a forgotten `--account` or
    `--dataset`. A key rotated for the same account is taken with `adopt_key`.

    A key other than the recorded one (or the first) is checked with the service first, one cheap request
    (`OceanTrackingClient.check_key`): a key the service rejects is reported as rejected and never recorded,
    so a mistyped key neither re-keys the dataset nor passes for another account's. Where the dataset was
    loaded from (the base URL's origin) is recorded beside the fingerprint, so a dataset a sandbox loaded
    (the demo's) is named as such when a real key meets it."""
    state = pipeline.state.get("sources", {}).get(SOURCE_NAME, {})
    recorded, loaded_from = state.get(KEY_FINGERPRINT_STATE), state.get(KEY_ORIGIN_STATE)
    fingerprint, origin = client.settings.api_key.fingerprint, client.origin
    if recorded == fingerprint and loaded_from == origin:
        return
    if recorded != fingerprint:
        check_key_for(client, pipeline.dataset_name, recorded)
        if recorded and not adopt_key:
            raise DatasetOfAnotherKeyError(another_key_message(pipeline.dataset_name, recorded, loaded_from,
                                                               fingerprint, origin))
        if recorded:
            logger.warning("Dataset %s now answers to the key sha256:%s (was sha256:%s).", pipeline.dataset_name,
                           fingerprint, recorded)
    with pipeline.managed_state() as managed:  # extracted with the next package, so the destination keeps it
        claimed = managed.setdefault("sources", {}).setdefault(SOURCE_NAME, {})
        claimed[KEY_FINGERPRINT_STATE], claimed[KEY_ORIGIN_STATE] = fingerprint, origin


def check_key_for(client: OceanTrackingClient, dataset: str, recorded: str | None) -> None:
    """`client.check_key()`, its 401 saying that the dataset was left as it was (and answers to its key)."""
    try:
        client.check_key()
    except AuthenticationError as error:
        kept = (f"dataset {dataset} still answers to its key (sha256:{recorded}); nothing was changed" if recorded
                else "nothing was loaded")
        raise AuthenticationError(
            f"the service at {client.origin} rejected this API key (sha256:{client.settings.api_key.fingerprint}): {kept}",
            status=error.status, method=error.method, path=error.path, errors=error.errors, hint=error.hint,
        ) from None


def another_key_message(dataset: str, recorded: str, loaded_from: str | None, fingerprint: str, origin: str) -> str:
    """Why a dataset refuses a key the service accepts, and what to do: another account's dataset (or the same
    account's rotated key); a dataset loaded from another place, a sandbox most likely, is named as such."""
    if loaded_from is None or loaded_from == origin:
        return (f"Dataset {dataset} was loaded with another API key (sha256:{recorded}) than this one "
                f"(sha256:{fingerprint}), which {origin} accepts, so it likely holds another account: give this "
                "account its own (--account, or --dataset). If the same account's key was rotated, run once with "
                "--adopt-new-key.")
    sandbox = " (a local sandbox, such as the demo's?)" if is_loopback(loaded_from) else ""
    return (f"Dataset {dataset} was loaded from {loaded_from}{sandbox} with another API key (sha256:{recorded}), "
            f"not from {origin} with this one (sha256:{fingerprint}): load this account into a dataset of its own "
            "(--dataset NAME, or --account), or remove the old warehouse if its data is not wanted.")


def is_loopback(origin: str) -> bool:
    """Whether an origin (`http://127.0.0.1:8080`) is this machine: where a sandbox runs."""
    host = urlparse(origin).hostname or ""
    try:
        return host == "localhost" or ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


@contextmanager
def syncing(pipeline: dlt.Pipeline, target: Target) -> Iterator[None]:
    """Hold the dataset's sync lock: the warehouse's (`WarehouseStore.syncing`), or for a server destination a
    file lock beside the pipeline's working folder (one host; across hosts its own server serializes the
    commits)."""
    if target.store is not None:
        with target.store.syncing(target.dataset_name):
            yield
        return
    lock = Path(pipeline.pipelines_dir) / f"{pipeline.pipeline_name}.sync.lock"
    with exclusive_file_lock(lock, f"the sync lock of dataset {target.dataset_name} (another run of this account)",
                             timeout=SYNC_LOCK_WAIT_SECONDS):
        yield


def load_account(pipeline: dlt.Pipeline, source: DltSource, target: Target, *, client: OceanTrackingClient,
                 adopt_key: bool = False) -> Loaded:
    """Load one sync of `source` into `target`: finish a pending load, extract afresh, refresh the views.

    dlt's `run`, in its steps (restore the state, extract, normalize, load), so that only the load holds
    the warehouse (`load_waiting`). The caller decides when a sync with too many failed items fails
    (`raise_if_excessive`): after it has reported what loaded. A plain DuckDB file another process holds
    is waited for (bounded) before any request is spent, and reported as held, not as dlt's connection
    failure; a server destination (PostgreSQL) that cannot be reached is one line naming its host and port.
    After a load into PostgreSQL the PostGIS view of the map features is refreshed (`publish_geometry_view`).
    All of it under the dataset's sync lock (`syncing`); the key of `client` (the source's) is checked against
    the dataset's (`claim_dataset`) once the state is restored, before the extraction."""
    try:
        with syncing(pipeline, target), lake_connections_kept():
            return _load_account(pipeline, source, target, client, adopt_key)
    except Exception as error:
        if (reason := unreachable(pipeline, error)) is None:
            raise
        raise reason from None


def _load_account(pipeline: dlt.Pipeline, source: DltSource, target: Target, client: OceanTrackingClient,
                  adopt_key: bool) -> Loaded:
    store = target.store
    if store is not None and not store.is_lake:
        connect_waiting(store.duckdb_file).close()
    if target.table_format:
        for resource in source.resources.values():
            resource.apply_hints(table_format=target.table_format)
        history_without_scd2(source)
    finished = finish_pending_load(pipeline, target)
    try:
        if pipeline.config.restore_from_destination:
            pipeline.sync_destination()
        claim_dataset(pipeline, client, adopt_key=adopt_key)
        with gc_tuned():
            pipeline.extract(source, loader_file_format="parquet")
        pipeline.normalize()
    except Exception as error:
        locked = locked_error(error, store.duckdb_file) if store is not None and not store.is_lake else None
        if locked is None:
            raise
        raise locked from None
    info = load_waiting(pipeline, target)
    info.raise_on_failed_jobs()
    postgis_view = None
    if store is not None:
        refresh_views(pipeline, target)
    else:
        postgis_view = publish_geometry_view(pipeline, target.dataset_name)
    source_state = pipeline.state.get("sources", {}).get(SOURCE_NAME, {})
    return Loaded(info, finished, issues_of_load(source_state, info.loads_ids), postgis_view)


def refresh_views(pipeline: dlt.Pipeline, target: Target) -> None:
    """After a load into the embedded warehouse: the typed-geometry view of the map features, once the table
    exists (`ensure_geometry_view`), in the loader's session, under the writer lock."""
    with target.store.writing(), loader_session(pipeline, target.store) as con:
        ensure_geometry_view(con, target.dataset_name)


def sync_account(
    client: OceanTrackingClient,
    target: Target,
    *,
    include_maps: bool = True,
    map_refresh_seconds: float = 3600.0,
    pipelines_dir: str | Path | None = None,
    models: bool = True,
    adopt_key: bool = False,
) -> SyncResult:
    """Extract the whole account through `client` into `target`, then build the analytics models.

    Models are built by `dbt build` on the embedded warehouse (a DuckLake or a DuckDB file) and on
    PostgreSQL; other destinations get the raw tables only (run dbt there by hand, see sql/README.md). Too many failed items do not raise here: the caller reports the sync, then calls
    `raise_if_excessive(result.loaded.issues)`. The models go to the schema of the client's account
    (`analytics`, or `analytics_<account>`)."""
    pipeline = make_pipeline(target, pipelines_dir)
    source = ocean_tracking(client=client, include_maps=include_maps, map_refresh_seconds=map_refresh_seconds)
    with lake_connections_kept():  # the load and the summary's row counts share one attach of the lake
        loaded = load_account(pipeline, source, target, client=client, adopt_key=adopt_key)
        result = SyncResult(loaded, client.stats())
        store = target.store
        schema = client.settings.account.analytics_schema
        if store is not None:
            if models:
                models_built = build_models(store, app_url=client.settings.app_url, raw_schema=target.dataset_name,
                                            analytics_schema=schema, sync_name=sync_name(loaded.load_info.loads_ids),
                                            session=partial(loader_session, pipeline, store))
                result.model_rows, result.models_reason = models_built.rows, models_built.reason
            with loader_session(pipeline, store) as con:
                result.row_counts = count_rows(con, target.dataset_name)
        elif models and is_postgres(pipeline):
            result.model_rows = build_models_in_postgres(pipeline, app_url=client.settings.app_url,
                                                         raw_schema=target.dataset_name, analytics_schema=schema)
    return result


def sync_name(load_ids: Iterable[str]) -> str:
    """How the lake's commits of a sync name it (its load's and its build's): by its dlt load ids (each raw
    row's `_dlt_load_id`)."""
    return f"sync {', '.join(load_ids) or '(nothing loaded)'}"


# The resources a targeted refresh runs: those of the tables notifications name (the registry's `notified`), the
# tracking requests through `notified_tracking_requests`, beside the incremental resource whose cursor they keep.
TARGETED_RESOURCES = (*(name for name, table in TABLES.items() if table.notified and name != "tracking_requests"),
                      "notified_tracking_requests")  # fmt: skip
DEFAULT_BATCH_LIMIT = 5_000
# Container ids per query when asking which events are loaded already.
IDS_PER_QUERY = 500


@dataclass
class RefreshResult:
    """What one targeted refresh did: the load (None when there was nothing to load), the notifications
    applied, superseded by newer ones and failed (id -> why), the shipments loaded, and the API spend."""

    loaded: Loaded | None
    applied: int = 0
    superseded: int = 0
    failed: dict[str, str] = field(default_factory=dict)
    shipments: int = 0
    shipments_fetched: int = 0
    tracking_requests: int = 0
    api_stats: dict[str, Any] = field(default_factory=dict)

    def summary(self) -> str:
        """One line for the CLI and the run log."""
        requests = sum(int(count) for count in self.api_stats.get("requests", {}).values())
        return (f"Applied {self.applied} notification(s) ({self.superseded} superseded by newer ones, "
                f"{len(self.failed)} failed): {self.shipments} shipment(s), {self.shipments_fetched} of them "
                f"fetched, {self.tracking_requests} tracking request(s); {requests} API request(s).")


def refresh_from_notifications(
    client: OceanTrackingClient,
    target: Target,
    journal: NotificationJournal,
    *,
    limit: int = DEFAULT_BATCH_LIMIT,
    pipelines_dir: str | Path | None = None,
    run_id: str | None = None,
) -> RefreshResult:
    """Load what the journal's pending notifications name (at most `limit` of them, oldest first) and mark
    them applied; those whose shipment the service no longer has are marked failed, with why. As the journal's
    one consumer (`NotificationJournal.consuming`): two refreshes on any hosts never apply the same
    notifications at once, nor an older one after a newer one."""
    with journal.consuming():
        return _refresh_from_notifications(client, target, journal, limit, pipelines_dir, run_id)


def _refresh_from_notifications(client: OceanTrackingClient, target: Target, journal: NotificationJournal, limit: int,
                                pipelines_dir: str | Path | None, run_id: str | None) -> RefreshResult:
    pending = journal.pending(limit)
    if not pending:
        return RefreshResult(None, api_stats=client.stats())
    notices = [Notice(n.id, n.created_at, n.document) for n in pending]
    batch = plan_batch(notices, _applied_versions(journal, notices))
    documents = list(batch.documents.values())
    gone: dict[str, str] = {}
    for shipment_id in sorted(batch.to_fetch):
        try:
            documents.append(client.get(f"/shipments/{shipment_id}", params={"include": ",".join(SHIPMENT_INCLUDES)}))
        except NotFoundError:
            gone[shipment_id] = f"shipment {shipment_id} is not found at the service (left the account?)"
    tracking_requests = list(batch.tracking_requests.values())
    for request_id in sorted(batch.tracking_requests_to_fetch):
        try:
            tracking_requests.append(client.get(f"/tracking_requests/{request_id}")["data"])
        except NotFoundError:
            gone[request_id] = f"tracking request {request_id} is not found at the service"
    tracking_rows = rows_by_type({"data": tracking_requests}).get("tracking_request", []) if tracking_requests else []

    failed = _failed_notices(notices, batch.unresolved, gone)
    applied = [notice_id for notice_id in batch.applied if notice_id not in failed]
    pipeline = known_pipeline(target, pipelines_dir)
    source = ocean_tracking(
        client=client, include_maps=False, shipment_documents=documents,
        loaded_event_ids=loaded_event_ids(pipeline, _container_ids(documents)),
        tracking_request_rows=tracking_rows,
        applied_notifications=applied_rows(pending, {*applied, *batch.superseded}),
    ).with_resources(*TARGETED_RESOURCES)
    loaded = load_account(pipeline, source, target, client=client)

    journal.record_applied_versions({key: when for key, when in batch.versions.items()
                                     if key.split("/", 1)[1] not in gone})  # fmt: skip
    journal.mark_applied([*applied, *batch.superseded], run_id)
    for notice_id, why in failed.items():
        journal.mark_failed(notice_id, why)
        logger.warning("Notification %s could not be applied: %s", notice_id, why)
    fetched = len(batch.to_fetch - gone.keys())
    return RefreshResult(loaded, len(applied), len(batch.superseded), failed, len(documents), fetched,
                         len(tracking_rows), client.stats())


def applied_rows(notifications: Iterable[Notification], ids: Collection[str]) -> list[dict[str, Any]]:
    """The `notifications_applied` rows of the notifications `ids` names: loaded with the changes they name, so
    the warehouse itself says how far behind the service it is (`webhook_freshness`)."""
    return [{"id": n.id, "event": n.event, "created_at": n.created_at, "received_at": n.received_at,
             "reference_type": n.reference_type, "reference_id": n.reference_id}
            for n in notifications if n.id in ids]


def _applied_versions(journal: NotificationJournal, notices: list[Notice]) -> dict[str, datetime]:
    keys = {version_key("shipment", s) for notice in notices for s in shipments_named(notice.document)}
    keys |= {version_key("tracking_request", t) for notice in notices for t in tracking_requests_named(notice.document)}
    return journal.applied_versions(keys)


def known_pipeline(target: Target, pipelines_dir: str | Path | None = None) -> dlt.Pipeline:
    """The target's pipeline with its schema: restored from the destination when this host has no working
    folder yet, so the refresh can read what is loaded before it decides what to fetch."""
    pipeline = make_pipeline(target, pipelines_dir)
    if not pipeline.default_schema_name and not pipeline.has_pending_data:
        pipeline.sync_destination()
    return pipeline


def _failed_notices(notices: Iterable[Notice], unresolved: dict[str, str], gone: dict[str, str]) -> dict[str, str]:
    """Notification id -> why it could not be applied: it names nothing loadable, or what it names is gone."""
    failed = dict(unresolved)
    for notice in notices:
        missing = [gone[s] for s in sorted(shipments_named(notice.document)) if s in gone]
        if missing:
            failed[notice.id] = "; ".join(missing)
    return failed


def _container_ids(documents: Iterable[dict[str, Any]]) -> set[str]:
    ids = set()
    for document in documents:
        ids.update(row["id"] for row in rows_by_type(document).get("container", []))
    return ids


def loaded_event_ids(pipeline: dlt.Pipeline, container_ids: Iterable[str]) -> set[str]:
    """The ids of the events the destination holds for these containers: a refresh fetches a container's
    events only when some are neither in the payload nor loaded."""
    ids = sorted(container_ids)
    found: set[str] = set()
    for start in range(0, len(ids), IDS_PER_QUERY):
        chunk = ", ".join("'" + item.replace("'", "''") + "'" for item in ids[start:start + IDS_PER_QUERY])
        sql = f"select id from transport_events where container_id in ({chunk})"
        found.update(row["id"] for row in loaded_rows(pipeline, sql, "transport_events"))
    return found


# ---- route maps ------------------------------------------------------------------------------------------
@dataclass
class MapRefreshResult:
    """What one map refresh did: the plan (what was chosen and the freshness it achieves) and the load."""

    plan: MapPlan
    loaded: Loaded | None
    api_stats: dict[str, Any] = field(default_factory=dict)
    maps_fetched: int = 0  # maps requested: all of the plan's, unless it stopped for notifications (`yielded`)
    yielded: bool = False  # stopped early for waiting notifications: the rest of the plan is still due


def plan_map_refresh(pipeline: dlt.Pipeline, budget: int, *, now: datetime | None = None,
                     bound_seconds: float = DEFAULT_FRESHNESS_BOUND_SECONDS) -> MapPlan:
    """Rank the maps worth a request in the loaded tables and choose the first `budget` of them."""
    now = now or datetime.now(UTC)
    rows = loaded_rows(pipeline, candidates_sql(now, bound_seconds), "containers", "shipments",
                       "transport_events", "fetch_log")
    return plan_maps(rows, budget, now, bound_seconds)


def refresh_maps(client: OceanTrackingClient, target: Target, budget: int, *,
                 bound_seconds: float = DEFAULT_FRESHNESS_BOUND_SECONDS,
                 pipelines_dir: str | Path | None = None, yield_to: Callable[[], bool] | None = None) -> MapRefreshResult:
    """Fetch the route maps the scheduler ranks first, at most `budget` requests, and load them; stop fetching
    early, loading what was fetched, once `yield_to()` is true (webhook notifications waiting for the warehouse)."""
    pipeline = known_pipeline(target, pipelines_dir)
    plan = plan_map_refresh(pipeline, budget, bound_seconds=bound_seconds)
    logger.info("Map refresh: %s", plan.explain())
    if not plan.chosen:
        return MapRefreshResult(plan, None, client.stats())
    answers: list[bool] = []  # asked before each map: whether to stop

    def yielding() -> bool:
        answers.append(any(answers) or (yield_to is not None and yield_to()))
        return answers[-1]

    source = ocean_tracking(client=client, scheduled_maps=plan.chosen, yield_to=yielding).with_resources("map_features")
    loaded = load_account(pipeline, source, target, client=client)
    return MapRefreshResult(plan, loaded, client.stats(), maps_fetched=answers.count(False), yielded=any(answers))
