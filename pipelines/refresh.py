"""Targeted refresh: load only what webhook notifications name, and the route maps the budget allows.

Polling re-reads every page to find the few shipments that changed. Webhooks say which changed: the
receiver journals each notification (`pipelines.webhooks.receiver`), and `refresh_from_notifications` loads the
shipments, containers, events and tracking requests they name, through the same dlt source and load path as
the full sync (`pipelines.sync.load_account`), so the rows are the ones a full sync would load. Complete
payloads cost no request; an incomplete one costs one GET per shipment per refresh
(`pipelines.webhooks.plan_batch`). The journal is marked only after the load committed: a crash in between
applies the same notifications again, which loads the same rows again.

`refresh_maps` spends a request budget on the route maps the map-freshness scheduler ranks first
(`pipelines.source.map_schedule`), from the same `fetch_log` the full sync keeps.
"""

from __future__ import annotations

import logging
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import dlt

from pipelines.api import rows_by_type
from pipelines.api.client import OceanTrackingClient
from pipelines.errors import NotFoundError
from pipelines.journals import NotificationJournal
from pipelines.source.bookkeeping import loaded_rows
from pipelines.source.map_schedule import DEFAULT_FRESHNESS_BOUND_SECONDS, MapPlan, candidates_sql, plan_maps
from pipelines.source.resources import SHIPMENT_INCLUDES, ocean_tracking
from pipelines.source.tables import TABLES
from pipelines.sync import Loaded, load_account
from pipelines.warehouse.destinations import Target, make_pipeline
from pipelines.webhooks import (
    Notice,
    plan_batch,
    shipments_named,
    tracking_requests_named,
    version_key,
)

logger = logging.getLogger(__name__)

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

    pipeline = known_pipeline(target, pipelines_dir)
    source = ocean_tracking(
        client=client, include_maps=False, shipment_documents=documents,
        loaded_event_ids=loaded_event_ids(pipeline, _container_ids(documents)),
        tracking_request_rows=tracking_rows,
    ).with_resources(*TARGETED_RESOURCES)
    loaded = load_account(pipeline, source, target, client=client)

    failed = _failed_notices(notices, batch.unresolved, gone)
    applied = [notice_id for notice_id in batch.applied if notice_id not in failed]
    journal.record_applied_versions({key: when for key, when in batch.versions.items()
                                     if key.split("/", 1)[1] not in gone})  # fmt: skip
    journal.mark_applied([*applied, *batch.superseded], run_id)
    for notice_id, why in failed.items():
        journal.mark_failed(notice_id, why)
        logger.warning("Notification %s could not be applied: %s", notice_id, why)
    fetched = len(batch.to_fetch - gone.keys())
    return RefreshResult(loaded, len(applied), len(batch.superseded), failed, len(documents), fetched,
                         len(tracking_rows), client.stats())


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


def plan_map_refresh(pipeline: dlt.Pipeline, budget: int, *, now: datetime | None = None,
                     bound_seconds: float = DEFAULT_FRESHNESS_BOUND_SECONDS) -> MapPlan:
    """Rank the maps worth a request in the loaded tables and choose the first `budget` of them."""
    now = now or datetime.now(UTC)
    rows = loaded_rows(pipeline, candidates_sql(now, bound_seconds), "containers", "shipments",
                       "transport_events", "fetch_log")
    return plan_maps(rows, budget, now, bound_seconds)


def refresh_maps(client: OceanTrackingClient, target: Target, budget: int, *,
                 bound_seconds: float = DEFAULT_FRESHNESS_BOUND_SECONDS,
                 pipelines_dir: str | Path | None = None) -> MapRefreshResult:
    """Fetch the route maps the scheduler ranks first, at most `budget` requests, and load them."""
    pipeline = known_pipeline(target, pipelines_dir)
    plan = plan_map_refresh(pipeline, budget, bound_seconds=bound_seconds)
    logger.info("Map refresh: %s", plan.explain())
    if not plan.chosen:
        return MapRefreshResult(plan, None, client.stats())
    source = ocean_tracking(client=client, scheduled_maps=plan.chosen).with_resources("map_features")
    loaded = load_account(pipeline, source, target, client=client)
    return MapRefreshResult(plan, loaded, client.stats())
