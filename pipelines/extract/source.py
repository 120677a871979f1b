"""The `ocean_tracking` dlt source: everything an ocean-tracking account knows, at the fewest requests.

Request plan (the service allows 100 requests a minute per account, 100 rows a page):
- `/shipments?include=containers,containers.transport_events,<terminals>,<ports>` pages bring
  shipments, their containers, transport events, terminals and ports in one stream. A non-selected
  resource (`shipment_pages`) yields each page once; dlt forks it to the transformers below.
- Terminals, ports and vessels named by a relationship but never included are fetched by id, once per
  id ever.
- Transport events: when a page did not include them (the real service may ignore the nested include),
  a container's `/transport_events` is fetched only when its event ids changed since they were recorded.
- `/tracking_requests` is incremental on `updated_at` (the only endpoint with an updated-since filter),
  re-reading a lag window so rows updated at the boundary are not lost.
- Maps: see `pipelines.extract.map_schedule`.
- Custom field definitions and values: two paged lists a sync (`pipelines.extract.custom_fields`).
- Once the shipment pages complete, shipments the warehouse holds and the listing lacks have left the
  account: flagged in `departed_shipments` (`pipelines.extract.roster`), never deleted.
- What was fetched and loaded is kept in the warehouse's `fetch_log` table, not in dlt state (see
  `pipelines.extract.fetch_log`): a shipment whose bundle (the shipment, its containers, their events)
  is unchanged since it was loaded is not loaded again, nor is an unchanged reference, party or shipping
  line, so an unchanged sync writes almost nothing. dlt state keeps the tracking requests' cursor.
- Per-item requests (a map, a container's events, a terminal, port or vessel by id) that fail after their
  retries are skipped and listed in `sync_issues` (see `pipelines.extract.item_issues`); list pages are not:
  a failed page fails the sync before anything is committed.
- Every column the API documents is declared with its dlt type before any data arrives
  (`pipelines.extract.columns`), so a column that is null so far exists anyway, typed, and a table that
  received no row yet is created empty with its columns (nested tables, holds and fees, only once a row has one).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Collection, Iterable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import dlt
from dlt.sources import DltResource, DltSource

from pipelines.api import rows_by_type
from pipelines.api.client import OceanTrackingClient
from pipelines.errors import FeatureNotEnabledError, NotFoundError
from pipelines.extract.custom_fields import custom_field_resources
from pipelines.extract.fetch_log import SyncFetchLog, digest
from pipelines.extract.hints import (
    create_if_new,
    create_if_still_new,
    declared,
    is_new,
    keep_routed_tables_apart,
)
from pipelines.extract.item_issues import ItemIssues
from pipelines.extract.map_schedule import container_phase
from pipelines.extract.pages import Page, changed_bundles, every_page, owners_of
from pipelines.extract.roster import DEPARTED_COLUMNS, DEPARTED_TABLE, shipment_departures
from pipelines.geo.features import feature_collections_to_table
from pipelines.settings import PAGE_SIZE, SOURCE_NAME

logger = logging.getLogger(__name__)

SHIPMENT_INCLUDES = (
    "containers",
    "containers.transport_events",
    "pod_terminal",
    "port_of_lading",
    "port_of_discharge",
    "destination",
    "destination_terminal",
)
TRACKING_REQUEST_LAG_SECONDS = 300
ETA_HISTORY_COLUMNS = (
    "pol_etd_at",
    "pol_atd_at",
    "pod_eta_at",
    "pod_ata_at",
    "destination_eta_at",
    "destination_ata_at",
)

FLOAT_COLUMNS = {
    "ports": ("latitude", "longitude"),
    "vessels": ("latitude", "longitude", "nautical_speed_knots", "navigational_heading_degrees"),
}


def _coerce_floats(table: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cast the live service's string coordinates (`"35.10162"`) to numbers so one column type holds."""
    names = FLOAT_COLUMNS.get(table, ())
    out = []
    for row in rows:
        for name in names:
            value = row.get(name)
            if isinstance(value, str):
                try:
                    row[name] = float(value)
                except ValueError:
                    row[name] = None
        out.append(row)
    return out


@dlt.source(name=SOURCE_NAME, max_table_nesting=1)
def ocean_tracking(
    client: OceanTrackingClient | None = None,
    include_maps: bool = True,
    map_refresh_seconds: float = 3600.0,
    tracking_requests_lag_seconds: float = TRACKING_REQUEST_LAG_SECONDS,
    shipment_documents: Iterable[dict[str, Any]] | None = None,
    loaded_event_ids: Collection[str] = (),
    scheduled_maps: Sequence[tuple[str, str]] | None = None,
    tracking_request_rows: Sequence[dict[str, Any]] | None = None,
) -> Iterable[DltResource]:
    """Build the source's resources around one API client.

    `client` defaults to one configured the dlt way (`SOURCES__OCEAN_TRACKING__API_KEY`, `..._BASE_URL`).
    A fresh source per run is required under Dagster (dlt issue #4253), so build it inside the asset.

    A targeted refresh (`pipelines.refresh`) hands in what to load instead of the `/shipments` listing:
    `shipment_documents`, JSON:API documents of some shipments with their containers and events (built from
    webhook payloads, or one GET a shipment), with `loaded_event_ids`, the events the warehouse already holds
    for their containers (those are not fetched again); or `scheduled_maps`, the `(container id, phase)`
    pairs whose route maps the map-freshness scheduler chose; and `tracking_request_rows`, flattened
    tracking requests to merge (`notified_tracking_requests`, beside the incremental resource, whose
    cursor they must not move). Every row then goes through the same transformers, so it is loaded exactly
    as the full sync would load it.
    """
    client = client or OceanTrackingClient()
    issues = ItemIssues(client)
    log = SyncFetchLog(map_refresh_seconds)
    fetched_once = _FetchedOnce(client, issues, log)
    already_loaded = frozenset(loaded_event_ids)

    @dlt.resource(selected=False)
    def shipment_pages() -> Iterator[Page]:
        if scheduled_maps is not None:
            yield Page({}, {}, frozenset(), scheduled_maps=tuple(scheduled_maps))
            return
        if shipment_documents is not None:  # a targeted refresh: no listing, so nothing is known to have left
            yield from (_page(document) for document in shipment_documents)
            return
        params = {"page[size]": PAGE_SIZE, "include": ",".join(SHIPMENT_INCLUDES)}
        listed: set[str] = set()
        for document in client.paginate("/shipments", params=params):
            page = _page(document)
            listed.update(row["id"] for row in page.rows.get("shipment", []))
            yield page
        yield Page.closing(listed)  # the listing completed: what it lacks left the account

    def _page(document: dict[str, Any]) -> Page:
        rows = rows_by_type(document)
        owners = owners_of(rows)  # before events fetched apart join the page: those are always loaded
        changed = changed_bundles(rows, owners, log.get())
        # in the page, so the vessels and ports these events name are fetched too
        rows.setdefault("transport_event", []).extend(_events_not_included(rows))
        return Page(rows, owners, changed)

    def _events_not_included(page: dict[str, list[dict]]) -> list[dict]:
        """Events of containers whose events the page lacks (the live service may ignore the nested
        include), fetched only when the container's event ids changed since they were last recorded and
        some are neither on the page nor already loaded."""
        on_page = {row["id"] for row in page.get("transport_event", [])}
        known = on_page | already_loaded
        containers = page.get("container", [])
        issues.cover_count("transport_events", len(containers))
        event_sets = [(c["id"], sorted(c.get("transport_events_ids") or [])) for c in containers]
        digests = [(container_id, digest(event_ids)) for container_id, event_ids in event_sets]
        rows: list[dict] = []
        changed = log.get().changed("transport_events", digests)
        for (container_id, event_ids), (_, value), is_changed in zip(event_sets, digests, changed, strict=True):
            if not is_changed:
                continue
            if event_ids and not set(event_ids) <= known:
                path = f"/containers/{container_id}/transport_events"
                documents = issues.fetch("transport_events", container_id, every_page, client, path)
                if documents is None:
                    continue  # not recorded: the next sync asks again
                for document in documents:  # all its events: those the page included are there already
                    rows.extend(row for row in rows_by_type(document).get("transport_event", [])
                                if row["id"] not in on_page)  # fmt: skip
            log.get().record("transport_events", container_id, value)
        return rows

    @dlt.transformer(
        data_from=shipment_pages,
        primary_key="id",
        write_disposition="merge",
        **declared("shipments"),
    )
    def shipments(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("shipments")
        yield page.changed_rows("shipment")
        yield from log.pending()
        yield from issues.pending()

    # The API only shows a shipment's latest dates; SCD2 keeps every version across syncs, with
    # `_dlt_valid_from` / `_dlt_valid_to` marking when each was seen.
    @dlt.transformer(
        data_from=shipment_pages,
        merge_key="shipment_id",
        write_disposition={"disposition": "merge", "strategy": "scd2"},
        columns={"shipment_id": {"data_type": "text"}, **{name: {"data_type": "timestamp"} for name in ETA_HISTORY_COLUMNS}},
    )
    def shipment_eta_history(page: Page) -> Iterator[list[dict]]:
        yield from create_if_new("shipment_eta_history")
        # only changed shipments: the merge key retires versions of the shipments loaded, not of the rest
        yield [
            {"shipment_id": row["id"], **{name: row.get(name) for name in ETA_HISTORY_COLUMNS}}
            for row in page.changed_rows("shipment")
        ]

    @dlt.transformer(data_from=shipment_pages, primary_key="shipment_id", write_disposition="merge",
                     columns=DEPARTED_COLUMNS)
    def departed_shipments(page: Page) -> Iterator[Any]:
        yield from create_if_new(DEPARTED_TABLE)
        if page.listed_shipment_ids is not None:  # the last page: the listing is complete
            if departures := shipment_departures(page.listed_shipment_ids):
                yield departures
            else:
                yield from create_if_still_new(DEPARTED_TABLE)

    @dlt.transformer(
        data_from=shipment_pages,
        primary_key="id",
        write_disposition="merge",
        **declared("containers"),
    )
    def containers(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("containers")
        yield page.changed_rows("container")
        yield from issues.pending()

    @dlt.transformer(
        data_from=shipment_pages,
        primary_key="id",
        write_disposition="merge",
        **declared("transport_events"),
    )
    def transport_events(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("transport_events")
        yield page.changed_rows("transport_event")
        yield from log.pending()
        yield from issues.pending()

    @dlt.transformer(data_from=shipment_pages, primary_key="id", write_disposition="merge", **declared("terminals"))
    def terminals(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("terminals")
        yield list(log.get().changed_rows("terminal", page.rows.get("terminal", [])))
        wanted = _related_ids(page.rows, {"container": ("pod_terminal_id", "pickup_facility_id")})
        wanted |= _related_ids(
            page.rows,
            {"shipment": ("pod_terminal_id", "destination_terminal_id"), "transport_event": ("terminal_id",)},
        )
        yield fetched_once.fetch("terminal", "/terminals/{}", wanted)
        yield from log.pending()
        yield from issues.pending()

    @dlt.transformer(data_from=shipment_pages, primary_key="id", write_disposition="merge", **declared("ports"))
    def ports(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("ports")
        yield list(log.get().changed_rows("port", _coerce_floats("ports", page.rows.get("port", []))))
        wanted = _related_ids(
            page.rows,
            {
                "shipment": ("port_of_lading_id", "port_of_discharge_id", "destination_id"),
                "terminal": ("port_id",),
                "transport_event": ("location_id",),
            },
        )
        yield fetched_once.fetch("port", "/ports/{}", wanted)
        yield from log.pending()
        yield from issues.pending()

    @dlt.transformer(data_from=shipment_pages, primary_key="id", write_disposition="merge", **declared("vessels"))
    def vessels(page: Page) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new("vessels")
        wanted = _related_ids(page.rows, {"transport_event": ("vessel_id",)})
        yield fetched_once.fetch("vessel", "/vessels/{}", wanted)
        yield from log.pending()
        yield from issues.pending()

    # A map is a snapshot: on DuckDB (delete-insert) the merge key swaps all of a container's features at
    # once; Delta lakes only upsert, by the primary key.
    @dlt.transformer(
        data_from=shipment_pages,
        primary_key=("container_id", "feature_index"),
        merge_key="container_id",
        write_disposition="merge",
    )
    def map_features(page: Page) -> Iterator[Any]:
        if not include_maps or fetched_once.maps_disabled:
            yield from issues.pending()
            return
        if page.scheduled_maps is not None:  # chosen by the map-freshness scheduler: all are due
            phases = list(page.scheduled_maps)
            due = {container_id for container_id, _ in phases}
        else:
            shipments_by_id = {row["id"]: row for row in page.rows.get("shipment", [])}
            phases = [
                (container["id"], str(container_phase(container, shipments_by_id.get(container.get("shipment_id")))))
                for container in page.rows.get("container", [])
            ]
            due = set(log.get().map_due(phases))
        collected: list[tuple[str, dict[str, Any]]] = []
        issues.cover_count("map_features", len(phases))
        for container_id, phase in phases:
            if container_id not in due:
                continue
            path = f"/containers/{container_id}/map_geojson"
            try:
                collection = issues.fetch("map_features", container_id, client.get, path)
            except FeatureNotEnabledError as error:
                fetched_once.disable_maps(error)
                break
            if collection is None:
                continue  # not recorded: due again next sync
            collected.append((container_id, collection))
            log.get().record_map(container_id, phase, datetime.now(UTC))
        if collected:
            yield feature_collections_to_table(collected)
        elif not fetched_once.maps_disabled and is_new("map_features"):
            yield feature_collections_to_table([])  # the table, typed by its Arrow schema, with no rows yet
        yield from log.pending()
        yield from issues.pending()

    # A container's map is fetched at most once a sync, so its rows arrive deduplicated: the merge then
    # streams staging into the table instead of ranking every row by key, which holds the geometry blobs
    # in memory (it ran out under the load's memory limit at 10k shipments).
    map_features.apply_hints(additional_table_hints={"x-stage-data-deduplicated": True})
    # Likewise a container's events: its bundle (or its events fetched apart) is loaded at most once a sync
    # (`fetch_log.ONCE_A_SYNC_KINDS`), and an event belongs to one container.
    transport_events.apply_hints(additional_table_hints={"x-stage-data-deduplicated": True})

    @dlt.resource(primary_key="id", write_disposition="merge", **declared("tracking_requests"))
    def tracking_requests(
        updated_at: dlt.sources.incremental[str] = dlt.sources.incremental(
            "updated_at", initial_value="1970-01-01T00:00:00Z", lag=tracking_requests_lag_seconds
        ),
    ) -> Iterator[list[dict]]:
        yield from create_if_new("tracking_requests")
        params = {"page[size]": PAGE_SIZE, "filter[updated_at][start]": updated_at.start_value}
        # Not filtered through the fetch log: the cursor must see every row, and an unchanged sync re-reads
        # only the lag window's few rows. (An item for another table here breaks dlt's cursor.)
        for document in client.paginate("/tracking_requests", params=params):
            yield rows_by_type(document).get("tracking_request", [])

    @dlt.resource(primary_key="id", write_disposition="merge", **declared("parties"))
    def parties() -> Iterator[list[dict]]:
        keep_routed_tables_apart()
        yield from create_if_new("parties")
        for document in client.paginate("/parties", params={"page[size]": PAGE_SIZE}):
            yield list(log.get().changed_rows("party", rows_by_type(document).get("party", [])))
            yield from log.pending()

    @dlt.resource(primary_key="id", write_disposition="merge", **declared("shipping_lines"))
    def shipping_lines() -> Iterator[list[dict]]:
        keep_routed_tables_apart()
        yield from create_if_new("shipping_lines")
        for document in client.paginate("/shipping_lines", params={"page[size]": PAGE_SIZE}):
            yield list(log.get().changed_rows("shipping_line", rows_by_type(document).get("shipping_line", [])))
            yield from log.pending()

    @dlt.resource(table_name="tracking_requests", primary_key="id", write_disposition="merge",
                  **declared("tracking_requests"))
    def notified_tracking_requests() -> Iterator[list[dict]]:
        yield list(tracking_request_rows or ())

    return (
        *([notified_tracking_requests] if tracking_request_rows is not None else []),
        shipment_pages,
        shipments,
        shipment_eta_history,
        containers,
        transport_events,
        terminals,
        ports,
        vessels,
        map_features,
        tracking_requests,
        parties,
        shipping_lines,
        departed_shipments,
        *custom_field_resources(client, issues, log),
    )


def history_without_scd2(source: DltSource) -> None:
    """Keep `shipment_eta_history` on destinations without dlt's `scd2` (Delta lakes): insert each distinct
    version once, keyed by a hash of its dates, stamped with when it was first seen."""
    resource = source.resources.get("shipment_eta_history")
    if resource is None:
        return
    resource.apply_hints(
        write_disposition={"disposition": "merge", "strategy": "insert-only"},
        primary_key="version_id",
        merge_key=[],
        columns={"version_id": {"data_type": "text"}, "first_seen_at": {"data_type": "timestamp"}},
    )
    resource.add_map(_stamp_version)


def _stamp_version(row: dict[str, Any]) -> dict[str, Any]:
    values = "|".join(str(row.get(name)) for name in ("shipment_id", *ETA_HISTORY_COLUMNS))
    digest = hashlib.sha256(values.encode()).hexdigest()[:32]
    return {**row, "version_id": digest, "first_seen_at": datetime.now(UTC)}


def _related_ids(page: dict[str, list[dict]], columns_by_type: dict[str, tuple[str, ...]]) -> set[str]:
    """Ids named by the given `<relationship>_id` columns of the page's rows."""
    ids = set()
    for type_, columns in columns_by_type.items():
        for row in page.get(type_, []):
            for column in columns:
                if value := row.get(column):
                    ids.add(value)
    return ids


class _FetchedOnce:
    """Fetches reference resources by id at most once per id, across runs (the ids known are in the
    fetch log: loaded before, included by a page, or gone)."""

    def __init__(self, client: OceanTrackingClient, issues: ItemIssues, log: SyncFetchLog) -> None:
        self._client = client
        self._issues = issues
        self._log = log
        self.maps_disabled = False

    def fetch(self, type_: str, path_template: str, ids: set[str]) -> list[dict]:
        """Fetch each id the log does not know. A JSON:API 404 is logged and the id never asked again (the
        reference is gone); any other failure is a sync issue, and the id is asked again next sync."""
        resource = f"{type_}s"
        self._issues.cover(resource, ids)
        log = self._log.get()
        rows = []
        for id_ in log.unknown(type_, ids):
            document = self._issues.fetch(resource, id_, self._get_unless_gone, path_template.format(id_))
            if document is None:
                continue
            if document is _GONE:
                logger.warning("%s %s is referenced but not found; skipped", type_, id_)
                log.record(type_, id_)
                continue
            for row in _coerce_floats(resource, rows_by_type(document).get(type_, [])):
                log.record(type_, row["id"], digest(row))
                rows.append(row)
            if not any(row["id"] == id_ for row in rows):
                log.record(type_, id_)  # answered without the row asked for: not asked again either
        return rows

    def _get_unless_gone(self, path: str) -> dict[str, Any] | object:
        try:
            return self._client.get(path)
        except NotFoundError:
            return _GONE

    def disable_maps(self, error: Exception) -> None:
        """Turn maps off for this run with one warning: the account lacks the routing entitlement."""
        if not self.maps_disabled:
            logger.warning(
                "Route maps skipped (%s). The account needs the Routing Data entitlement; "
                "every other table still loads.",
                error,
            )
        self.maps_disabled = True


_GONE = object()
