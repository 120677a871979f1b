"""From webhook notifications to what a targeted refresh loads: one shipment document per shipment named.

A notification (`webhook_notification`) names the object that changed and carries related resources in
`included`: the transport event, its container and shipment, the tracking request, ports, terminals,
vessels. Where those resources are complete (every attribute and relationship the full sync loads for
their table, `is_complete`), the rows come from them: no request at all. Where they are not (the live
service's payloads leave out some container attributes and relationships), the shipment is fetched once
per refresh with the same includes the listing uses. `/shipments` has no id filter, so that GET per
shipment is the cheapest way; the refresh batches every notification of a shipment into one.

Newer wins: of the notifications of one shipment, the newest complete one gives the rows (and, for the
events, each event's newest rendering); only when a newer notification came without complete resources (the
vendor's "minimal" events, such as `container.transport.available`) is the shipment fetched. A notification
older than what was already applied for its shipment (`Batch.superseded`) is not applied at all, so a late
delivery never regresses a row.

Pure functions over JSON-like documents; the refresh (`pipelines.refresh`) does the HTTP and the load.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from pipelines.api.jsonapi import flatten_resource
from pipelines.extract.columns import api_columns

# The resource types a shipment document carries, and the table each becomes.
BUNDLE_TYPES = {"shipment": "shipments", "container": "containers", "transport_event": "transport_events"}
# Included references loaded as a page's are (vessels never come on a page: fetched by id, once).
REFERENCE_TABLES = {"port": "ports", "terminal": "terminals"}
TRACKING_REQUEST = "tracking_request"
# Declared columns a resource need not carry to be complete, because the REST API does not send them either:
# `links.self` comes on some resources only, and live tracking requests carry `shipment_tags`, not `tags`.
OPTIONAL_COLUMNS = frozenset({"self_link"})
OPTIONAL_BY_TABLE = {"tracking_requests": frozenset({"tags"})}


@dataclass(frozen=True)
class Notice:
    """What the refresh needs of one journaled notification: its id, when the service created it, and its
    parsed JSON:API document."""

    id: str
    created_at: datetime
    document: Mapping[str, Any]


@dataclass
class Batch:
    """The work of one targeted refresh, grouped per shipment.

    `documents`: shipment id → a JSON:API document of the shipment with its containers and events, built
    from complete payloads; `to_fetch`: shipments whose payloads were incomplete (one GET each);
    `tracking_requests`: tracking request id → its newest complete resource, `tracking_requests_to_fetch`
    the others; `versions`: shipment (or tracking request) key → the newest notification applied for it;
    `applied` the notification ids this batch applies, `superseded` those older than what was applied
    already (nothing to load), `unresolved` those naming no shipment or tracking request, with why."""

    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    to_fetch: set[str] = field(default_factory=set)
    tracking_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    tracking_requests_to_fetch: set[str] = field(default_factory=set)
    versions: dict[str, datetime] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    unresolved: dict[str, str] = field(default_factory=dict)


@cache
def required_columns(table: str) -> frozenset[str]:
    """The columns a resource must yield for `table` to count as complete: the declared ones, a nested
    object's columns (`import_deadlines__pickup_lfd_line`) counting as its parent attribute."""
    optional = OPTIONAL_COLUMNS | OPTIONAL_BY_TABLE.get(table, frozenset())
    return frozenset(name.split("__", 1)[0] for name in api_columns()[table]) - optional


def is_complete(resource: Mapping[str, Any], table: str) -> bool:
    """Whether a resource carries every attribute and relationship the full sync loads for `table`, so a
    row built from it equals the row a page would give."""
    try:
        row = flatten_resource(resource)
    except ValueError:
        return False
    return required_columns(table) <= row.keys()


def version_key(kind: str, item_id: str) -> str:
    """The key under which the newest applied notification of an item is remembered (`shipment/<id>`)."""
    return f"{kind}/{item_id}"


def _by_type(document: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The document's included resources by type and id (raw JSON:API resource objects)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for resource in document.get("included") or ():
        if isinstance(resource, Mapping) and resource.get("type") and resource.get("id"):
            out.setdefault(str(resource["type"]), {})[str(resource["id"])] = dict(resource)
    return out


def _related_id(resource: Mapping[str, Any], name: str, type_: str | None = None) -> str | None:
    data = ((resource.get("relationships") or {}).get(name) or {}).get("data")
    if isinstance(data, Mapping) and data.get("id") and (type_ is None or data.get("type") == type_):
        return str(data["id"])
    return None


def _related_ids(resource: Mapping[str, Any], name: str) -> list[str]:
    data = ((resource.get("relationships") or {}).get(name) or {}).get("data")
    return [str(item["id"]) for item in data if isinstance(item, Mapping) and item.get("id")] if isinstance(data, list) else []


def shipments_named(document: Mapping[str, Any]) -> set[str]:
    """The shipments a notification is about: those it includes, or those its included resources name
    (a transport event's, container's or estimate's `shipment`, a tracking request's tracked object)."""
    included = _by_type(document)
    named = set(included.get("shipment", {}))
    for type_, resources in included.items():
        for resource in resources.values():
            if type_ == TRACKING_REQUEST:
                if shipment := _related_id(resource, "tracked_object", "shipment"):
                    named.add(shipment)
            elif shipment := _related_id(resource, "shipment", "shipment"):
                named.add(shipment)
    return named


def tracking_requests_named(document: Mapping[str, Any]) -> set[str]:
    """The tracking requests a notification is about: the reference object when it is one, and those included."""
    named = set(_by_type(document).get(TRACKING_REQUEST, {}))
    reference = ((document.get("data") or {}).get("relationships") or {}).get("reference_object") or {}
    data = reference.get("data") or {}
    if isinstance(data, Mapping) and data.get("type") == TRACKING_REQUEST and data.get("id"):
        named.add(str(data["id"]))
    return named


def plan_batch(notices: Iterable[Notice], applied: Mapping[str, datetime]) -> Batch:
    """Group notifications into one refresh: per shipment the newest complete bundle or one GET, per
    tracking request its newest complete resource or one GET. `applied` maps version keys to the newest
    notification applied before; a notification older than that for everything it names is superseded,
    not applied."""
    batch = Batch()
    latest: dict[str, datetime] = {}  # shipment -> when its newest notification was created
    bundles: dict[str, tuple[datetime, dict]] = {}  # shipment -> its newest complete notification's included
    events: dict[str, tuple[datetime, dict]] = {}  # event id -> (when, resource), newest rendering
    references: dict[tuple[str, str], dict] = {}
    for notice in sorted(notices, key=lambda n: n.created_at):
        included = _by_type(notice.document)
        shipments = shipments_named(notice.document)
        requests_ = tracking_requests_named(notice.document)
        keys = [version_key("shipment", s) for s in shipments] + [version_key(TRACKING_REQUEST, t) for t in requests_]
        if not keys:
            batch.unresolved[notice.id] = "names no shipment or tracking request"
            continue
        if all(key in applied and notice.created_at < applied[key] for key in keys):
            batch.superseded.append(notice.id)
            continue
        batch.applied.append(notice.id)
        for key in keys:
            batch.versions[key] = max(notice.created_at, batch.versions.get(key, notice.created_at))
        for shipment_id in shipments:
            latest[shipment_id] = notice.created_at
            if bundle_complete(shipment_id, included):
                bundles[shipment_id] = (notice.created_at, included)
        for event_id, event in included.get("transport_event", {}).items():
            events[event_id] = (notice.created_at, event)
        for type_, table in REFERENCE_TABLES.items():
            for item_id, resource in included.get(type_, {}).items():
                if is_complete(resource, table):
                    references[(type_, item_id)] = resource
        for request_id in requests_:
            resource = included.get(TRACKING_REQUEST, {}).get(request_id)
            if resource is not None and is_complete(resource, "tracking_requests"):
                batch.tracking_requests[request_id] = resource
                batch.tracking_requests_to_fetch.discard(request_id)
            elif request_id not in batch.tracking_requests:
                batch.tracking_requests_to_fetch.add(request_id)
    for shipment_id, changed_at in latest.items():
        bundle_at, included = bundles.get(shipment_id, (None, {}))
        if bundle_at is not None and bundle_at >= changed_at:  # no change since the newest complete bundle
            batch.documents[shipment_id] = shipment_document(shipment_id, included, events, references)
        else:
            batch.to_fetch.add(shipment_id)
    return batch


def bundle_complete(shipment_id: str, included: Mapping[str, Mapping[str, dict]]) -> bool:
    """Whether a notification's resources hold the shipment and every container it lists, all complete."""
    shipment = included.get("shipment", {}).get(shipment_id)
    if shipment is None or not is_complete(shipment, "shipments"):
        return False
    containers = included.get("container", {})
    return all(container_id in containers and is_complete(containers[container_id], "containers")
               for container_id in _related_ids(shipment, "containers"))


def shipment_document(shipment_id: str, included: Mapping[str, Mapping[str, dict]],
                      events: Mapping[str, tuple[datetime, dict]],
                      references: Mapping[tuple[str, str], dict]) -> dict[str, Any]:
    """A `/shipments` page of one shipment built from a notification's complete resources (`bundle_complete`):
    the shipment, its containers, every complete event of theirs the batch saw, the references they name."""
    shipment = included["shipment"][shipment_id]
    containers = [included["container"][container_id] for container_id in _related_ids(shipment, "containers")]
    container_ids = {container["id"] for container in containers}
    bundle_events = [
        event for _, event in events.values()
        if _related_id(event, "container") in container_ids and is_complete(event, "transport_events")
    ]
    return {"data": [shipment], "included": [*containers, *bundle_events, *references.values()]}
