"""One page of `/shipments` as the source's transformers see it: which shipment each container and
event belongs to, and which shipments changed since they were loaded (their "bundle": the shipment, its
containers and their included events, digested as the page brought them)."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from pipelines.api.client import OceanTrackingClient
from pipelines.extract.fetch_log import FetchLog, digest
from pipelines.settings import PAGE_SIZE


@dataclass(frozen=True)
class Page:
    """One page of `/shipments` as the transformers get it: every row by type (what decides the requests:
    maps due, references named), the shipment each container and included event belongs to, and the
    shipments whose bundle changed since the fetch log's record."""

    rows: dict[str, list[dict]]
    owners: dict[tuple[str, str], str]
    changed_shipments: frozenset[str]
    # Set on the closing page only, which has no rows: every shipment id the complete listing showed.
    listed_shipment_ids: frozenset[str] | None = None
    # Set on the one page of a map refresh, which has no rows: the `(container id, phase)` pairs whose
    # route maps the map-freshness scheduler chose (`pipelines.extract.map_schedule.plan_maps`).
    scheduled_maps: tuple[tuple[str, str], ...] | None = None

    @classmethod
    def closing(cls, listed_shipment_ids: set[str]) -> Page:
        """The page after the last one: no rows, and the ids of every shipment the listing showed (what is
        not among them has left the account, `pipelines.extract.roster`)."""
        return cls({}, {}, frozenset(), frozenset(listed_shipment_ids))

    def changed_rows(self, type_: str) -> list[dict]:
        """The rows of `type_` (shipment, container, transport_event) worth loading: those of changed
        shipments, and those that belong to no shipment of the page (such as events fetched apart)."""
        rows = self.rows.get(type_, [])
        if type_ == "shipment":
            return [row for row in rows if row["id"] in self.changed_shipments]
        return [
            row for row in rows
            if (owner := self.owners.get((type_, row["id"]))) is None or owner in self.changed_shipments
        ]


def owners_of(page: dict[str, list[dict]]) -> dict[tuple[str, str], str]:
    """The shipment each container and included event of the page belongs to (by the container's
    `shipment_id`, else the shipment's `containers_ids`; an event by its container, else its `shipment_id`)."""
    owners: dict[tuple[str, str], str] = {}
    for shipment in page.get("shipment", []):
        for container_id in shipment.get("containers_ids") or ():
            owners[("container", container_id)] = shipment["id"]
    for container in page.get("container", []):
        if container.get("shipment_id"):
            owners[("container", container["id"])] = container["shipment_id"]
    for event in page.get("transport_event", []):
        owner = owners.get(("container", event.get("container_id"))) or event.get("shipment_id")
        if owner:
            owners[("transport_event", event["id"])] = owner
    return owners


def changed_bundles(page: dict[str, list[dict]], owners: dict[tuple[str, str], str], log: FetchLog) -> frozenset[str]:
    """The shipments of the page whose bundle (the shipment, its containers and their included events)
    differs from the fetch log's digest, each recorded. Computed before any event is fetched apart, so
    the digest is of what the service sent on the page."""
    members: dict[str, list[dict]] = {shipment["id"]: [shipment] for shipment in page.get("shipment", [])}
    for type_ in ("container", "transport_event"):
        for row in page.get(type_, []):
            owner = owners.get((type_, row["id"]))
            if owner in members:
                members[owner].append(row)
    digests = [(shipment_id, digest(rows)) for shipment_id, rows in members.items()]
    changed = set()
    for (shipment_id, value), is_changed in zip(digests, log.changed("shipment", digests), strict=True):
        if is_changed:
            log.record("shipment", shipment_id, value)
            changed.add(shipment_id)
    return frozenset(changed)


def every_page(client: OceanTrackingClient, path: str) -> list[dict[str, Any]]:
    """Every page of a list, read to the end before any is used, so a failure midway leaves nothing half-read."""
    return list(client.paginate(path, {"page[size]": PAGE_SIZE}))
