"""When a container's route map is worth another request.

Maps cost one request per container, the largest share of the rate budget, so a map is fetched only
when it can have changed: never fetched, the container changed phase since the last fetch (departed,
arrived), or it is at sea and the last fetch is older than the refresh interval (the service refreshes
vessel positions about every 15 minutes and advises at most hourly polling for containers at sea).
A container that has arrived keeps its last map: its route no longer moves.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any


class Phase(StrEnum):
    """Where a container is in its ocean journey, as far as its route map is concerned."""

    PRE_DEPARTURE = "pre_departure"
    AT_SEA = "at_sea"
    ARRIVED = "arrived"


PRE_DEPARTURE_REFRESH_SECONDS = 24 * 3600


def container_phase(container: dict[str, Any], shipment: dict[str, Any] | None) -> Phase:
    """Derive the phase from flattened container and shipment rows.

    Shipments carry the port-of-lading departure (`pol_atd_at`) and port-of-discharge arrival
    (`pod_ata_at`); containers carry their own `pod_arrived_at`. Either arrival wins.
    """
    shipment = shipment or {}
    if container.get("pod_arrived_at") or shipment.get("pod_ata_at"):
        return Phase.ARRIVED
    if shipment.get("pol_atd_at") or container.get("pol_vessel_departed_at"):
        return Phase.AT_SEA
    return Phase.PRE_DEPARTURE


def due_by_age_sql(table: str, now: datetime, refresh_seconds: float) -> str:
    """DuckDB SQL returning the ids of containers whose map is due by age alone: fetched at sea at least
    `refresh_seconds` ago, or before departure at least a day ago, by the host clock. (A container never
    fetched, or fetched in another phase, is due whatever its age: that needs the page, see
    `pipelines.extract.fetch_log.FetchLog.map_due`.) Literal timestamps, so dlt can transpile it to any
    destination's dialect."""
    now = now.astimezone(UTC)
    at_sea = (now - timedelta(seconds=refresh_seconds)).isoformat()
    pre_departure = (now - timedelta(seconds=PRE_DEPARTURE_REFRESH_SECONDS)).isoformat()
    return (
        f"select item_id from {table} where kind = 'map' and ("
        f"(phase = '{Phase.AT_SEA}' and fetched_at <= cast('{at_sea}' as timestamptz)) or "
        f"(phase = '{Phase.PRE_DEPARTURE}' and fetched_at <= cast('{pre_departure}' as timestamptz)))"
    )
