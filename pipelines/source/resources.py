# longer than 500 lines because the dlt source is one closure over one client, fetch log and sync issues, which all its resources share.
"""The `ocean_tracking` dlt source: everything an ocean-tracking account knows, at the fewest requests.

Request plan (the service allows 100 requests a minute per account, 100 rows a page):
- `/shipments?include=containers,containers.transport_events,<terminals>,<ports>` pages bring
  shipments, their containers, transport events, terminals and ports in one stream. A non-selected
  resource (`shipment_pages`) yields each page once; dlt forks it to the transformers below.
- Terminals, ports and vessels named by a relationship but never included are fetched by id, once ever.
- Transport events: when a page did not include them (the real service may ignore the nested include),
  a container's `/transport_events` is fetched only when its event ids changed since they were recorded.
- `/tracking_requests` is incremental on `updated_at` (the only updated-since filter), re-reading a lag window.
- Maps: see `pipelines.source.map_schedule`.
- Custom field definitions and values: two paged lists, daily by default (`custom_field_resources`).
- Shipments the warehouse holds and a complete listing lacks left the account: flagged in `departed_shipments`.
- What was fetched and loaded is kept in the warehouse's `fetch_log` table, not in dlt state (see
  `pipelines.source.bookkeeping`): a shipment whose bundle (the shipment, its containers, their events)
  is unchanged since it was loaded is not loaded again, nor is an unchanged reference, party or shipping
  line, so an unchanged sync writes almost nothing. dlt state keeps the tracking requests' cursor and when
  each custom-field list was last read whole.
- Per-item requests (a map, a container's events, a terminal, port or vessel by id) that fail after their
  retries are skipped and listed in `sync_issues` (see `pipelines.source.bookkeeping`); list pages are not:
  a failed page fails the sync before anything is committed.
- Every column the API documents is declared with its dlt type before any data arrives
  (`pipelines.source`), so a column that is null so far exists anyway, typed, and a table that
  received no row yet is created empty with its columns (nested tables, holds and fees, only once a row has one).
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

import dlt
from dlt.common.schema.utils import has_table_seen_data
from dlt.sources import DltResource, DltSource

from pipelines.api import rows_by_type
from pipelines.api.client import OceanTrackingClient
from pipelines.errors import AuthorizationError, FeatureNotEnabledError, NotFoundError
from pipelines.geo.features import feature_collections_to_table
from pipelines.settings import PAGE_SIZE, SOURCE_NAME
from pipelines.source import ETA_HISTORY_COLUMNS, TABLES, column_hints, double_columns, nested_tables
from pipelines.source.bookkeeping import FETCH_LOG_TABLE, SYNC_ISSUES_TABLE, ItemIssues, SyncFetchLog, digest
from pipelines.source.map_schedule import container_phase
from pipelines.source.pages import (
    DEPARTED_TABLE,
    Page,
    changed_bundles,
    charge_version,
    deleted_rows,
    every_page,
    owners_of,
    referencing_ids,
    shipment_departures,
    value_as_json_text,
)

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


def _coerce_floats(table: str, rows: Iterable[dict[str, Any]]) -> list[dict[str, Any]]:
    """Cast the live service's string numbers (`"35.10162"`) in the table's double columns to numbers, so
    one column type holds."""
    names = double_columns(table)
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


def resource_hints(table: str) -> dict[str, Any]:
    """The dlt hints of a raw table's resource, from the registry (`pipelines.source.TABLES`): keys,
    write disposition, and every declared column (its nested tables' too), so dlt types each column, null
    or not, before any data arrives."""
    entry = TABLES[table]
    nested = {path: dlt.mark.make_nested_hints(columns=column_hints(name)) for path, name in nested_tables(table).items()}
    hints: dict[str, Any] = {"write_disposition": entry.write_disposition, "columns": entry.declared_columns(),
                             "nested_hints": nested or None}  # fmt: skip
    if entry.merge_key:
        hints["merge_key"] = entry.merge_key
    if not entry.scd2:  # dlt keys an SCD2 table's rows itself (`RawTable.scd2`)
        hints["primary_key"] = entry.primary_key
    return hints


@dataclass(frozen=True)
class Bookkeeping:
    """One source run's fetch log and sync issues, and the one wrapper every resource's rows go through."""

    log: SyncFetchLog
    issues: ItemIssues

    def around(self, table: str, items: Iterable[Any], *, routed: bool = True) -> Iterator[Any]:
        """A resource's `items` for `table`, preceded by the empty item that creates the table while it is new
        (`create_if_new`) and, when `routed`, followed by the fetch log's and sync issues' rows recorded
        meanwhile: they land in the same load package as the rows they describe (dlt table variants, kept
        apart from the resource's hints). Not `routed`: a resource with a dlt cursor (another table's item
        breaks it), or one that records nothing."""
        if routed:
            keep_routed_tables_apart()
        yield from create_if_new(table)
        yield from items
        if routed:
            yield from self.log.pending()
            yield from self.issues.pending()


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
    applied_notifications: Sequence[dict[str, Any]] | None = None,
    yield_to: Callable[[], bool] | None = None,
) -> Iterable[DltResource]:
    """Build the source's resources around one API client.

    `client` defaults to one configured the dlt way (`SOURCES__OCEAN_TRACKING__API_KEY`, `..._BASE_URL`).
    A fresh source per run is required under Dagster (dlt issue #4253), so build it inside the asset.

    A targeted refresh (`pipelines.sync`) hands in what to load instead of the `/shipments` listing:
    `shipment_documents`, JSON:API documents of some shipments with their containers and events (built from
    webhook payloads, or one GET a shipment), with `loaded_event_ids`, the events the warehouse already holds
    for their containers (those are not fetched again); or `scheduled_maps`, the `(container id, phase)`
    pairs whose route maps the map-freshness scheduler chose; and `tracking_request_rows`, flattened
    tracking requests to merge (`notified_tracking_requests`, beside the incremental resource, whose
    cursor they must not move). Every row then goes through the same transformers, so it is loaded exactly
    as the full sync would load it; `applied_notifications` (rows of `notifications_applied`) load with them.
    A map refresh stops fetching once `yield_to()` is true (notifications waiting) and loads what it has.
    """
    client = client or OceanTrackingClient()
    issues = ItemIssues(client)
    log = SyncFetchLog(map_refresh_seconds)
    books = Bookkeeping(log, issues)
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

    @dlt.transformer(data_from=shipment_pages, **resource_hints("shipments"))
    def shipments(page: Page) -> Iterator[Any]:
        yield from books.around("shipments", [page.changed_rows("shipment")])

    seen_at: list[datetime] = []

    def as_seen_by_the_service(versions: list[dict[str, Any]]) -> Any:
        """`versions` of the SCD2 resource being extracted stamped with the service's clock (its `Date`, the
        same for the whole run): dlt's `boundary_timestamp` makes a version valid from when the service showed
        it, not from when the load ran (the same on a live service; on a sandbox whose clock moves, the
        simulated instant). Left as they are where the resource is not SCD2 (`history_without_scd2`: the
        hints of the resource running, not of the one defined here, which the source holds a copy of)."""
        disposition = dlt.current.resource().write_disposition
        if not (isinstance(disposition, dict) and disposition.get("strategy") == "scd2"):
            return versions
        if not seen_at:
            seen_at.append(client.server_time() or datetime.now(UTC))
        return dlt.mark.with_hints(versions, dlt.mark.make_hints(
            write_disposition={**disposition, "boundary_timestamp": seen_at[0]}))  # fmt: skip

    # The API only shows a shipment's latest dates; SCD2 keeps every version across syncs.
    @dlt.transformer(data_from=shipment_pages, **resource_hints("shipment_eta_history"))
    def shipment_eta_history(page: Page) -> Iterator[Any]:
        # only changed shipments: the merge key retires versions of the shipments loaded, not of the rest
        versions = [{"shipment_id": row["id"], **{name: row.get(name) for name in ETA_HISTORY_COLUMNS}}
                    for row in page.changed_rows("shipment")]  # fmt: skip
        yield from books.around("shipment_eta_history", [as_seen_by_the_service(versions)],
                                routed=False)

    # Nor a container's latest last free days, holds and fees: SCD2 again, one version per change.
    @dlt.transformer(data_from=shipment_pages, **resource_hints("container_charge_history"))
    def container_charge_history(page: Page) -> Iterator[Any]:
        versions = [charge_version(row) for row in page.changed_rows("container")]
        yield from books.around("container_charge_history",
                                [as_seen_by_the_service(versions)], routed=False)

    @dlt.transformer(data_from=shipment_pages, **resource_hints(DEPARTED_TABLE))
    def departed_shipments(page: Page) -> Iterator[Any]:
        def departures() -> Iterator[Any]:
            if page.listed_shipment_ids is not None:  # the last page: the listing is complete
                if gone := shipment_departures(page.listed_shipment_ids):
                    yield gone
                else:
                    yield from create_if_still_new(DEPARTED_TABLE)

        yield from books.around(DEPARTED_TABLE, departures(), routed=False)

    @dlt.transformer(data_from=shipment_pages, **resource_hints("containers"))
    def containers(page: Page) -> Iterator[Any]:
        yield from books.around("containers", [page.changed_rows("container")])

    @dlt.transformer(data_from=shipment_pages, **resource_hints("transport_events"))
    def transport_events(page: Page) -> Iterator[Any]:
        yield from books.around("transport_events", [page.changed_rows("transport_event")])

    def references(table: str, page: Page) -> Iterator[list[dict]]:
        """A reference table's rows: those the page included (when they changed), then those its rows name
        that were never fetched, by id (`_FetchedOnce`); which columns name them is the registry's."""
        type_ = TABLES[table].jsonapi_type
        yield list(log.get().changed_rows(type_, _coerce_floats(table, page.rows.get(type_, []))))
        yield fetched_once.fetch(table, referencing_ids(page.rows, table))

    @dlt.transformer(data_from=shipment_pages, **resource_hints("terminals"))
    def terminals(page: Page) -> Iterator[Any]:
        yield from books.around("terminals", references("terminals", page))

    @dlt.transformer(data_from=shipment_pages, **resource_hints("ports"))
    def ports(page: Page) -> Iterator[Any]:
        yield from books.around("ports", references("ports", page))

    @dlt.transformer(data_from=shipment_pages, **resource_hints("vessels"))
    def vessels(page: Page) -> Iterator[Any]:
        yield from books.around("vessels", references("vessels", page))

    def route_maps(page: Page) -> Iterator[Any]:
        """The route maps due among the page's containers (or those the map scheduler chose), one request
        each, flattened into typed rows (`pipelines.geo.features`)."""
        if not include_maps or fetched_once.maps_disabled:
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
            if page.scheduled_maps is not None and yield_to is not None and yield_to():
                break  # webhook notifications wait: the maps fetched so far are loaded, the rest wait
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

    # A map is a snapshot: on DuckDB (delete-insert) the merge key swaps all of a container's features at
    # once; Delta lakes only upsert, by the primary key.
    @dlt.transformer(data_from=shipment_pages, **resource_hints("map_features"))
    def map_features(page: Page) -> Iterator[Any]:
        yield from books.around("map_features", route_maps(page))

    # A container's map is fetched at most once a sync, so its rows arrive deduplicated: the merge then
    # streams staging into the table instead of ranking every row by key, which holds the geometry blobs
    # in memory (it ran out under the load's memory limit at 10k shipments).
    map_features.apply_hints(additional_table_hints={"x-stage-data-deduplicated": True})
    # Likewise a container's events: its bundle (or its events fetched apart) is loaded at most once a sync
    # (`bookkeeping.ONCE_A_SYNC_KINDS`), and an event belongs to one container.
    transport_events.apply_hints(additional_table_hints={"x-stage-data-deduplicated": True})

    @dlt.resource(**resource_hints("tracking_requests"))
    def tracking_requests(
        updated_at: dlt.sources.incremental[str] = dlt.sources.incremental(
            "updated_at", initial_value="1970-01-01T00:00:00Z", lag=tracking_requests_lag_seconds
        ),
    ) -> Iterator[list[dict]]:
        params = {"page[size]": PAGE_SIZE, "filter[updated_at][start]": updated_at.start_value}
        # Not filtered through the fetch log: the cursor must see every row, and an unchanged sync re-reads
        # only the lag window's few rows. (An item for another table here breaks dlt's cursor.)
        pages = (rows_by_type(document).get("tracking_request", [])
                 for document in client.paginate("/tracking_requests", params=params))  # fmt: skip
        yield from books.around("tracking_requests", pages, routed=False)

    # The lag window re-reads the last minutes' rows every sync: dlt's incremental step (first) sees them all
    # and keeps its cursor, then a row loaded before with the same content is dropped, so an unchanged sync
    # writes nothing into the table (and no model is rebuilt for it: `pipelines.warehouse.models.plan_build`).
    tracking_requests.add_filter(lambda row: any(log.get().changed_rows(TABLES["tracking_requests"].jsonapi_type, [row])))

    def listed(table: str) -> Iterator[list[dict]]:
        """A list read whole each sync, page by page: only the rows that changed since they were loaded."""
        type_ = TABLES[table].jsonapi_type
        for document in client.paginate(f"/{table}", params={"page[size]": PAGE_SIZE}):
            yield list(log.get().changed_rows(type_, rows_by_type(document).get(type_, [])))

    @dlt.resource(**resource_hints("parties"))
    def parties() -> Iterator[Any]:
        yield from books.around("parties", listed("parties"))

    @dlt.resource(**resource_hints("shipping_lines"))
    def shipping_lines() -> Iterator[Any]:
        yield from books.around("shipping_lines", listed("shipping_lines"))

    @dlt.resource(table_name="tracking_requests", **resource_hints("tracking_requests"))
    def notified_tracking_requests() -> Iterator[list[dict]]:
        yield list(tracking_request_rows or ())

    return (
        *([notified_tracking_requests] if tracking_request_rows is not None else []),
        *([dlt.resource(list(applied_notifications), name="notifications_applied", **resource_hints(
            "notifications_applied"))] if applied_notifications is not None else []),
        shipment_pages,
        shipments,
        shipment_eta_history,
        container_charge_history,
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
        *custom_field_resources(client, books),
    )


def history_without_scd2(source: DltSource) -> None:
    """Keep the history tables (the registry's SCD2 tables) on destinations without dlt's `scd2` (Delta
    lakes): insert each distinct version once, keyed by a hash of its values, stamped with when it was first
    seen."""
    for name, table in TABLES.items():
        resource = source.resources.get(name)
        if resource is None or not table.scd2:
            continue
        resource.apply_hints(
            write_disposition={"disposition": "merge", "strategy": "insert-only"},
            primary_key="version_id",
            merge_key=[],
            columns={"version_id": {"data_type": "text"}, "first_seen_at": {"data_type": "timestamp"}},
        )
        resource.add_map(_stamp_version)


def _stamp_version(row: dict[str, Any]) -> dict[str, Any]:
    values = "|".join(f"{name}={value}" for name, value in sorted(row.items()))
    digest = hashlib.sha256(values.encode()).hexdigest()[:32]
    return {**row, "version_id": digest, "first_seen_at": datetime.now(UTC)}


class _FetchedOnce:
    """Fetches reference resources by id at most once per id, across runs (the ids known are in the
    fetch log: loaded before, included by a page, or gone)."""

    def __init__(self, client: OceanTrackingClient, issues: ItemIssues, log: SyncFetchLog) -> None:
        self._client = client
        self._issues = issues
        self._log = log
        self.maps_disabled = False

    def fetch(self, resource: str, ids: set[str]) -> list[dict]:
        """Fetch each id of the table `resource` the log does not know, from `/<resource>/<id>`. A JSON:API 404
        is logged and the id never asked again (the reference is gone); any other failure is a sync issue,
        and the id is asked again next sync."""
        type_ = TABLES[resource].jsonapi_type
        self._issues.cover(resource, ids)
        log = self._log.get()
        rows = []
        for id_ in log.unknown(type_, ids):
            document = self._issues.fetch(resource, id_, self._get_unless_gone, f"/{resource}/{id_}")
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


def is_new(table: str) -> bool:
    """No load has created `table` yet (dlt marks a table once data, or an empty item, reached it)."""
    existing = dlt.current.source_schema().tables.get(table)
    return existing is None or not has_table_seen_data(existing)


# Destinations that create a table from an empty item. Elsewhere the empty load job fails: PostgreSQL's
# ADBC ingest needs at least one record batch, and a Delta merge hashes each row's primary key, which the
# empty item lacks. There a table appears with its first row (the models read a missing one as empty),
# unless `create_if_still_new` can make it.
EMPTY_TABLE_DESTINATIONS = frozenset({"duckdb", "ducklake"})
# Destinations that create a table from an empty item loaded as `insert_values` instead of parquet.
# PostgreSQL types a json column by the file format (json for parquet, which its ADBC ingest can copy into,
# jsonb otherwise, which it cannot), so only a table without a json column is made this way.
INSERT_VALUES_EMPTY_DESTINATIONS = frozenset({"postgres"})


def create_if_new(table: str) -> list[Any]:
    """An empty item that has dlt create `table` with its declared columns even when no row arrives, while
    the table is new (then nothing: an empty load job a sync per table would cost a merge each), on the
    destinations that can (`EMPTY_TABLE_DESTINATIONS`)."""
    destination = dlt.current.pipeline().destination
    if destination is None or destination.destination_name not in EMPTY_TABLE_DESTINATIONS:
        return []
    if not TABLES[table].declared_columns():
        return []  # nothing to create it from: it is typed by its first item (map_features, an Arrow table)
    return [dlt.mark.materialize_table_schema()] if is_new(table) else []


def keep_routed_tables_apart() -> None:
    """The tables the running resource routes rows into (`fetch_log`, `sync_issues`: dlt table variants)
    start from its hints; without this they would get its declared columns and nested tables. Done as the
    resource runs, so the variants also start from hints applied after the source was built (a Delta
    lake's `table_format`)."""
    resource = dlt.current.resource()
    for table in (FETCH_LOG_TABLE, SYNC_ISSUES_TABLE):
        resource.apply_hints(table_name=table, columns={}, nested_hints={}, create_table_variant=True)


def create_if_still_new(table: str) -> list[Any]:
    """At the end of a resource's run that yielded no row for `table`: an empty item, loaded as `insert_values`,
    that has dlt create the table on the destinations that cannot load an empty parquet item but can this
    (`INSERT_VALUES_EMPTY_DESTINATIONS`), while it is new and has no json column. Called last, with no row of
    the table in this sync, so no row is ever loaded that way; `create_if_new` has made it elsewhere."""
    destination = dlt.current.pipeline().destination
    if destination is None or destination.destination_name not in INSERT_VALUES_EMPTY_DESTINATIONS or not is_new(table):
        return []
    columns = dlt.current.resource().compute_table_schema()["columns"]
    if any(column.get("data_type") == "json" for column in columns.values()):
        return []
    return [dlt.mark.with_hints(dlt.mark.materialize_table_schema(), dlt.mark.make_hints(file_format="insert_values"))]


#: where each custom-field resource's dlt state keeps when the service's clock last saw its list read whole
LISTED_AT_STATE = "listed_at"


def custom_fields_due(listed_at: datetime | None, now: datetime, every_hours: float) -> bool:
    """Whether a sync at `now` (the service's clock) lists a custom-field list last read whole at `listed_at`
    (None: never), with a cadence of `every_hours` (0: every sync): the service offers no updated-since filter
    on them, so between listings a sync spends nothing on them and loads nothing for them."""
    return listed_at is None or every_hours <= 0 or now - listed_at >= timedelta(hours=every_hours)


def custom_field_resources(client: OceanTrackingClient, books: Bookkeeping) -> list[DltResource]:
    """The two custom-field resources of one source run, sharing its client and bookkeeping.

    The account's custom fields: their definitions and their values on shipments, containers and tracking
    requests, read as two paged lists (`/custom_field_definitions`, `/custom_fields`: two requests for
    most accounts), never per entity (a request per entity a sync saw change would cost more at an hourly
    cadence, and would miss the edits users make, which change no shipment). The service has no
    updated-since filter on them, so they are read on a cadence of their own (`Settings.custom_fields_every_hours`,
    daily by default): each resource keeps in its dlt state when the service's clock last saw its list read
    whole (restored from the destination with the rest of the state, so it holds across hosts), and a sync
    within the cadence makes no request for it and loads nothing into its table, deleting nothing. A first
    sync always lists. Each list is read to its end before any row is used, so a failure midway leaves nothing
    half-read. The live `GET /custom_fields` answered 500 in a capture (API-NOTES §12.13), so a list that fails
    after its retries is a per-item failure (a sync issue: everything else loads, and the list stays due, so
    the next sync asks again), and an account refused the feature (403) gets one warning and no custom fields
    (asked again at the cadence). Rows that did not change since they were loaded are not loaded again; a
    value or definition the user deleted is deleted from its table once a complete listing no longer shows
    it (`pipelines.source.pages.deleted_rows`)."""
    refused: list[str] = []
    every_hours = client.settings.custom_fields_every_hours

    def listed_rows(table: str) -> list[dict[str, Any]] | None:
        """Every row of the list, or None when it failed (a sync issue) or the account is refused it."""
        if refused:
            return None
        books.issues.cover_count(table, 1)
        try:
            documents = books.issues.fetch(table, f"/{table}", every_page, client, f"/{table}")
        except AuthorizationError as error:
            refused.append(table)
            logger.warning("Custom fields skipped (%s): the account is not allowed to read them; every other "
                           "table still loads.", str(error).splitlines()[0])
            return None
        if documents is None:
            return None
        rows = [row for document in documents for row in rows_by_type(document).get(TABLES[table].jsonapi_type, [])]
        return [value_as_json_text(row) for row in rows] if table == "custom_fields" else rows

    def load(table: str) -> Iterator[Any]:
        state = dlt.current.resource_state()
        listed_at = state.get(LISTED_AT_STATE)
        started = client.server_time()  # the service's clock, before the list is read
        if not custom_fields_due(listed_at and datetime.fromisoformat(listed_at), started or datetime.now(UTC),
                                 every_hours):  # fmt: skip
            return
        rows = listed_rows(table)
        if rows is not None or refused:  # read whole, or refused: not due again before the cadence
            state[LISTED_AT_STATE] = (started or client.server_time() or datetime.now(UTC)).isoformat()
        if rows is not None:
            yield list(books.log.get().changed_rows(TABLES[table].jsonapi_type, rows))
            yield deleted_rows(table, (row["id"] for row in rows), table.replace("_", " "))
        if rows == []:  # the account has none (yet)
            yield from create_if_still_new(table)

    @dlt.resource(**resource_hints("custom_field_definitions"))
    def custom_field_definitions() -> Iterator[Any]:
        yield from books.around("custom_field_definitions", load("custom_field_definitions"))

    @dlt.resource(**resource_hints("custom_fields"))
    def custom_fields() -> Iterator[Any]:
        yield from books.around("custom_fields", load("custom_fields"))

    return [custom_field_definitions, custom_fields]
