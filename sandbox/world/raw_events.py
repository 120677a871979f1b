"""Raw events of a container: the carrier's own milestones behind its transport events.

Derived from the container's rendered transport events at `now` (so they follow whatever the world
says), shaped like the live `containers.raw-events` capture: the normalised `event` (null where the
spec's enum has no such milestone), the carrier's wording in `original_event` where it is not a plain
vessel movement, the deprecated actual/estimated pairs, and location/vessel/container/terminal
relationships, with vessels, ports and terminals included.
"""

from __future__ import annotations

from collections.abc import Callable

from .identifiers import reference_uuid
from .milestones import PREFIX

RAW_EVENTS = frozenset({
    "empty_out", "full_in", "positioned_in", "positioned_out", "vessel_loaded", "vessel_departed",
    "transshipment_arrived", "transshipment_discharged", "transshipment_loaded", "transshipment_departed",
    "feeder_arrived", "feeder_discharged", "feeder_loaded", "feeder_departed", "rail_loaded", "rail_departed",
    "rail_arrived", "rail_unloaded", "vessel_arrived", "vessel_discharged", "arrived_at_destination", "delivered",
    "full_out", "empty_in", "vgm_received", "carrier_release", "customs_release", "available"})
CARRIER_WORDING = {
    "empty_out": "Empty container released to shipper", "full_in": "Gate-in full at first POL",
    "vessel_loaded": "Loaded on board", "transshipment_discharged": "Discharged at transshipment port",
    "transshipment_loaded": "Loaded at transshipment port", "vessel_berthed": "Vessel berthed at POD",
    "vessel_discharged": "Discharged at last POD", "available": "Available for pickup",
    "rail_loaded": "Loaded on rail", "rail_departed": "Rail departure", "rail_arrived": "Rail arrival at final hub",
    "rail_unloaded": "De-ramp at Final Hub", "full_out": "Gate-out from Final Hub",
    "empty_in": "Empty container returned", "arrived_at_destination": "Arrived at final destination",
}


def raw_event_resources(events: list[dict], carrier: tuple[str | None, str | None], container_id: str,
                        lookup: Callable[[str, str], dict | None]) -> tuple[list[dict], list[dict]]:
    """(raw events, included resources) for a container's transport `events` (oldest first).

    `carrier` is (data_provider_name, data_provider_code); `lookup(type, id)` resolves vessels, ports
    and terminals for the `included` member and the location/vessel names."""
    included: dict[tuple[str, str], dict] = {}

    def resolve(rel: dict | None) -> dict | None:
        data = (rel or {}).get("data")
        if not data:
            return None
        key = (data["type"], data["id"])
        if key not in included:
            found = lookup(*key)
            if found is None:
                return None
            included[key] = found
        return included[key]

    out = []
    for index, te in enumerate(events):
        a, rels = te["attributes"], te["relationships"]
        name = a["event"].removeprefix(PREFIX)
        port, vessel = resolve(rels.get("location")), resolve(rels.get("vessel"))
        resolve(rels.get("terminal"))
        va = vessel["attributes"] if vessel else {}
        out.append({
            "id": reference_uuid("raw_event", te["id"]), "type": "raw_event",
            "attributes": {
                "actual_on": None, "estimated_at": None, "actual_at": a["timestamp"], "will_occur_at": None,
                "event": name if name in RAW_EVENTS else None, "timestamp": a["timestamp"], "estimated": False,
                "invalidated_at": a.get("invalidated_at"), "index": index,
                "original_event": CARRIER_WORDING.get(name), "created_at": a["created_at"],
                "data_source": "shipping_line", "data_provider_name": carrier[0], "data_provider_code": carrier[1],
                "voyage_number": a.get("voyage_number"),
                "location_name": port["attributes"]["name"] if port else None,
                "location_locode": a.get("location_locode"),
                "vessel_name": va.get("name"), "vessel_imo": va.get("imo"), "timezone": a.get("timezone"),
            },
            "relationships": {
                "location": {"data": rels["location"]["data"] if port else None},
                "vessel": {"data": rels["vessel"]["data"] if vessel else None},
                "container": {"data": {"id": container_id, "type": "container"}},
                "terminal": {"data": (rels.get("terminal") or {}).get("data")},
            },
        })
    return out, list(included.values())
