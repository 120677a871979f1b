"""The theoretical minimum number of requests for a sync, computed from the sandbox's own answers.

A minimal client pages every list at 100 rows, reads only tracking requests updated since its last run,
fetches each terminal/port/vessel named by a relationship of a page's resources (shipments, containers,
transport events, terminals, ports; a port's own `terminals` list excepted) and included by no page exactly
once ever, fetches a container's events
only when a page did not include them and they changed, and fetches a container's map when it was never
fetched or is at sea (its map has a `current_vessel` feature) with a last fetch at least an hour ago in
the sandbox's simulated time. It lists the custom fields and their definitions (no updated-since filter:
whole lists) only when they are due, as the pipeline does (`custom_fields_due`: on the first sync, then once
their cadence, `Settings.custom_fields_every_hours`, has passed in simulated time). Probing uses its own client and limiter log (so it never draws on the
benchmarked client's budget) and happens before the sandbox counters are reset for the sync.
"""

from __future__ import annotations

import math
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path
from typing import Any

import requests
from bench_sync import make_client

from pipelines.settings import PAGE_SIZE
from pipelines.source.resources import SHIPMENT_INCLUDES, custom_fields_due

REFERENCE_TYPES = ("terminal", "port", "vessel")
#: A port's list of all its terminals is a directory, not a reference a loaded row needs resolved.
NOT_NEEDED = {("port", "terminals")}
MAP_REFRESH_SECONDS = 3600.0
ROUTES = {
    "shipments": "GET /v2/shipments",
    "tracking_requests": "GET /v2/tracking_requests",
    "parties": "GET /v2/parties",
    "shipping_lines": "GET /v2/shipping_lines",
    "custom_field_definitions": "GET /v2/custom_field_definitions",
    "custom_fields": "GET /v2/custom_fields",
    "transport_events": "GET /v2/containers/{id}/transport_events",
    "maps": "GET /v2/containers/{id}/map_geojson",
    "terminal": "GET /v2/terminals/{id}",
    "port": "GET /v2/ports/{id}",
    "vessel": "GET /v2/vessels/{id}",
}


def _parse(ts: str) -> datetime:
    return datetime.fromisoformat(ts.replace("Z", "+00:00"))


@dataclass
class MinimalClient:
    """What a minimal client would remember between syncs (simulated times, ids known, event sets)."""

    last_sync_at: str | None = None
    known_refs: dict[str, set[str]] = field(default_factory=lambda: {t: set() for t in REFERENCE_TYPES})
    event_sets: dict[str, list[str]] = field(default_factory=dict)
    map_fetched_at: dict[str, datetime] = field(default_factory=dict)
    shipping_line_pages: int | None = None
    custom_fields_listed_at: datetime | None = None


class SandboxProbe:
    """Reads a running sandbox: control endpoints, list totals, and the minimum for the next sync."""

    def __init__(self, base_url: str, api_key: str, window: float, workdir: Path) -> None:
        self.base_url = base_url
        self.root = base_url.removesuffix("/v2")
        self.client = make_client(base_url, api_key, window, workdir / "probe-limiter.sqlite")
        self.model = MinimalClient()
        #: maps fetched by the last `minimum()` that needed them: [(container_id, FeatureCollection)]
        self.last_maps: list[tuple[str, dict[str, Any]]] = []

    def clock(self) -> str:
        """The sandbox's simulated now (ISO 8601)."""
        return requests.get(f"{self.root}/_sandbox/clock", timeout=10).json()["now"]

    def advance(self, seconds: float) -> None:
        """Move the simulated clock forward."""
        requests.post(f"{self.root}/_sandbox/clock", json={"advance_seconds": seconds}, timeout=10).raise_for_status()

    def stats(self) -> dict[str, Any]:
        """The sandbox's counters since the last reset."""
        return requests.get(f"{self.root}/_sandbox/stats", timeout=10).json()

    def reset(self) -> None:
        """Zero the sandbox counters and its rate-limit windows (probing requests are forgotten)."""
        requests.post(f"{self.root}/_sandbox/stats/reset", timeout=10).raise_for_status()

    def total(self, path: str, **params: Any) -> int:
        """`meta.total` of a list endpoint."""
        return self.client.get(path, params={"page[size]": 1, **params})["meta"]["total"]

    def minimum(self, fetch_maps: bool = True) -> Counter:
        """Requests a minimal client needs for the sync about to start, by component; updates the model."""
        m = self.model
        now_iso = self.clock()
        now = _parse(now_iso)
        need: Counter = Counter()
        need["shipments"] = math.ceil(self.total("/shipments") / PAGE_SIZE)
        updated = (
            self.total("/tracking_requests")
            if m.last_sync_at is None
            else self.total("/tracking_requests", **{"filter[updated_at][start]": m.last_sync_at})
        )
        need["tracking_requests"] = max(1, math.ceil(updated / PAGE_SIZE))
        need["parties"] = max(1, math.ceil(self.total("/parties") / PAGE_SIZE))
        if m.shipping_line_pages is None:
            m.shipping_line_pages = sum(
                1 for _ in self.client.paginate("/shipping_lines", params={"page[size]": PAGE_SIZE})
            )
        need["shipping_lines"] = m.shipping_line_pages
        self._custom_fields_due(now, need)
        container_ids = self._walk_shipments(need)
        self._maps_due(container_ids, now, need, fetch_maps)
        m.last_sync_at = now_iso
        return need

    def _custom_fields_due(self, now: datetime, need: Counter) -> None:
        """Both custom-field lists, page by page (they carry no total), when their cadence says they are due."""
        m = self.model
        if not custom_fields_due(m.custom_fields_listed_at, now, self.client.settings.custom_fields_every_hours):
            return
        for name in ("custom_field_definitions", "custom_fields"):
            need[name] = max(1, sum(1 for _ in self.client.paginate(f"/{name}", params={"page[size]": PAGE_SIZE})))
        m.custom_fields_listed_at = now

    def _walk_shipments(self, need: Counter) -> list[str]:
        """Page the shipments as the pipeline does; count reference and event fetches; → container ids."""
        m = self.model
        referenced = {t: set() for t in REFERENCE_TYPES}
        included = {t: set() for t in REFERENCE_TYPES}
        containers: dict[str, list[str]] = {}
        event_ids: set[str] = set()
        params = {"page[size]": PAGE_SIZE, "include": ",".join(SHIPMENT_INCLUDES)}
        for document in self.client.paginate("/shipments", params=params):
            resources = list(document.get("data") or []) + list(document.get("included") or [])
            for resource in resources:
                if resource["type"] in included:
                    included[resource["type"]].add(resource["id"])
                if resource["type"] == "transport_event":
                    event_ids.add(resource["id"])
                for name, rel in (resource.get("relationships") or {}).items():
                    if (resource["type"], name) in NOT_NEEDED:
                        continue
                    data = rel.get("data") if isinstance(rel, dict) else None
                    for ref in data if isinstance(data, list) else [data] if data else []:
                        if ref.get("type") in referenced:
                            referenced[ref["type"]].add(ref["id"])
                if resource["type"] == "container":
                    events = (resource.get("relationships") or {}).get("transport_events", {}).get("data") or []
                    containers[resource["id"]] = sorted(e["id"] for e in events)
        for type_ in REFERENCE_TYPES:
            need[type_] = len(referenced[type_] - included[type_] - m.known_refs[type_])
            m.known_refs[type_] |= referenced[type_] | included[type_]
        for cid, events in containers.items():
            if events and not set(events) <= event_ids and m.event_sets.get(cid) != events:
                need["transport_events"] += 1
            m.event_sets[cid] = events
        return list(containers)

    def _maps_due(self, container_ids: list[str], now: datetime, need: Counter, fetch_maps: bool) -> None:
        """Never-fetched containers, plus at-sea ones (probed via `current_vessel`) fetched ≥ 1 h ago."""
        m = self.model
        due = [cid for cid in container_ids if cid not in m.map_fetched_at]
        stale = [
            cid for cid in container_ids
            if cid in m.map_fetched_at and (now - m.map_fetched_at[cid]).total_seconds() >= MAP_REFRESH_SECONDS
        ]
        self.last_maps = []
        if stale and fetch_maps:
            for cid in stale:
                collection = self.client.get(f"/containers/{cid}/map_geojson")
                self.last_maps.append((cid, collection))
                if any((f.get("properties") or {}).get("feature_type") == "current_vessel"
                       for f in collection.get("features") or []):
                    due.append(cid)
        for cid in due:
            m.map_fetched_at[cid] = now
        need["maps"] = len(due)

    def fetch_all_maps(self) -> list[tuple[str, dict[str, Any]]]:
        """Every known container's map (for the feature-rate benchmark), unless the last probe has them."""
        if len(self.last_maps) == len(self.model.event_sets):
            return self.last_maps
        return [(cid, self.client.get(f"/containers/{cid}/map_geojson")) for cid in self.model.event_sets]

    def close(self) -> None:
        """Close the probing client."""
        self.client.close()
