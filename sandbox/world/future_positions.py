"""Estimated future positions of a vessel: the sea route from where it is (or from given coordinates)
to a destination port, as the spec's `vessel_with_positions` model.

The spec warns that the live timestamps have a fixed spacing of one minute whatever the distance; the
sandbox does the same: one position per route vertex, one minute apart from the vessel's latest fix.
"""

from __future__ import annotations

import itertools

from . import lanes
from .fleet import Fleet, Vessel
from .reference import Port
from .timeutil import MINUTE, iso


def future_positions(fleet: Fleet, v: Vessel, port: Port, now: int,
                     start: tuple[float, float] | None = None) -> dict:
    """The vessel resource at `now` plus `positions` from `start` ((lon, lat); default: its current
    position) to `port`, each {latitude, longitude, heading, timestamp, estimated}."""
    resource = fleet.vessel_resource(v, now)
    resource.pop("links", None)
    a = resource["attributes"]
    origin = start if start is not None else (a["longitude"], a["latitude"])
    path = lanes.sea_path((round(origin[0], 5), round(origin[1], 5)), (port.longitude, port.latitude))
    base = fleet.position_time(v, now)
    coords = path.coords
    positions = []
    for k, ((x1, y1), nxt) in enumerate(itertools.zip_longest(coords, coords[1:])):
        heading = round(lanes.bearing_deg(x1, y1, *nxt)) if nxt is not None and nxt != (x1, y1) else None
        positions.append({"latitude": round(y1, 6), "longitude": round(lanes.normalize_lon(x1), 6),
                          "heading": heading, "timestamp": iso(base + k * MINUTE), "estimated": True})
    a["positions"] = positions
    return resource
