"""When a container's route map is worth another request.

Maps cost one request per container, the largest share of the rate budget, so a map is fetched only
when it can have changed: never fetched, the container changed phase since the last fetch (departed,
arrived), or it is at sea and the last fetch is older than the refresh interval (the service refreshes
vessel positions about every 15 minutes and advises at most hourly polling for containers at sea).
A container that has arrived keeps its last map: its route no longer moves.
"""

from __future__ import annotations

from dataclasses import dataclass
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


@dataclass(frozen=True)
class MapSchedule:
    """The per-container fetch log kept in dlt source state: `{container_id: [phase, fetched_at_epoch]}`."""

    entries: dict[str, list[Any]]
    refresh_seconds: float = 3600.0

    def is_due(self, container_id: str, phase: Phase, now_epoch: float) -> bool:
        """True when the container's map can have changed since it was last fetched."""
        entry = self.entries.get(container_id)
        if entry is None:
            return True
        last_phase, fetched_at = entry[0], float(entry[1])
        if last_phase != phase:
            return True
        age = now_epoch - fetched_at
        if phase is Phase.AT_SEA:
            return age >= self.refresh_seconds
        if phase is Phase.PRE_DEPARTURE:
            return age >= PRE_DEPARTURE_REFRESH_SECONDS
        return False

    def record(self, container_id: str, phase: Phase, fetched_at_epoch: float) -> None:
        """Remember a successful fetch so the next run can skip an unchanged map."""
        self.entries[container_id] = [str(phase), fetched_at_epoch]
