"""Metro areas: one per reference port (the live service groups a city's ports and rail ramps under a
metro area; the sandbox world has one port per city), found by id or UN/LOCODE."""

from __future__ import annotations

from .identifiers import reference_uuid
from .reference import Port, Reference


def metro_area_id(port: Port) -> str:
    """Stable id of the metro area around `port`."""
    return reference_uuid("metro_area", port.locode)


def find_metro_area(ref: Reference, id_or_locode: str) -> Port | None:
    """The port a metro area is built on, by metro area id or UN/LOCODE (case-insensitive)."""
    key = str(id_or_locode).strip()
    port = ref.ports.get(key.upper())
    if port is not None:
        return port
    return next((p for p in ref.ports.values() if metro_area_id(p) == key.lower()), None)


def metro_area_resource(port: Port) -> dict:
    """A `metro_area` resource (spec shape: numeric latitude/longitude)."""
    return {"id": metro_area_id(port), "type": "metro_area",
            "attributes": {"name": port.city or port.name, "code": port.locode, "state_abbr": port.state_abbr,
                           "country_code": port.country_code, "time_zone": port.time_zone,
                           "latitude": port.latitude, "longitude": port.longitude}}
