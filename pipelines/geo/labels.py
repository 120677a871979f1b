"""Text on the route maps: which ports get a label and with what text, and where a label goes so that it
hides no other label, marker or the legend.

Port features carry their name (`name`) and their role on the container's route (`label`: POL, TS1, POD)
in their properties, so no other table is read. A route map labels every port of its route with its role
and name; the overview labels each place once, by name, the places most containers call at first, and
leaves out a label that finds no free spot.
"""

from __future__ import annotations

from dataclasses import dataclass

import geopandas as gpd
import numpy as np
import shapely
from matplotlib.transforms import Bbox

from pipelines.geo.frame import point_positions

# (dx, dy, ha, va) in points from the anchor, tried in order
PORT_OFFSETS = (
    (7, 5, "left", "bottom"),
    (7, -5, "left", "top"),
    (-7, 5, "right", "bottom"),
    (-7, -5, "right", "top"),
    (0, 9, "center", "bottom"),
    (0, -9, "center", "top"),
    (7, 18, "left", "bottom"),
    (7, -18, "left", "top"),
    (-7, 18, "right", "bottom"),
    (-7, -18, "right", "top"),
)
VESSEL_OFFSETS = (
    (-10, 8, "right", "bottom"),
    (-10, -8, "right", "top"),
    (10, 8, "left", "bottom"),
    (10, -8, "left", "top"),
    (0, 12, "center", "bottom"),
    (0, -12, "center", "top"),
    (-10, 22, "right", "bottom"),
    (10, -22, "left", "top"),
)
OVERVIEW_PORT_OFFSETS = (
    (4, 2, "left", "bottom"),
    (-4, 2, "right", "bottom"),
    (4, -2, "left", "top"),
    (-4, -2, "right", "top"),
    (0, 5, "center", "bottom"),
    (0, -5, "center", "top"),
)


@dataclass(frozen=True)
class PortLabel:
    """A port's label: where (longitude, latitude as loaded), its text, and how many port features (calls
    of a container's route) it stands for."""

    lon: float
    lat: float
    text: str
    calls: int = 1


def _texts(ports: gpd.GeoDataFrame, name: str) -> list[str]:
    values = ports[name].tolist() if name in ports.columns else [None] * len(ports)
    return ["" if value is None or value != value else str(value).strip() for value in values]  # NaN != NaN


def _point_rows(ports: gpd.GeoDataFrame) -> tuple[np.ndarray, np.ndarray]:
    """(row positions of the ports drawn as a point at a known position, their (n, 2) coordinates)."""
    geoms = np.asarray(ports.geometry.values, dtype=object)
    rows, xy = point_positions(geoms)
    single = shapely.get_type_id(geoms[rows]) == 0
    return rows[single], xy[single]


def route_port_labels(ports: gpd.GeoDataFrame) -> list[PortLabel]:
    """One label a port feature of one container's route, in the features' order: its role and name
    ("POL Shanghai"), either alone when the other is missing; ports with neither are left out."""
    rows, xy = _point_rows(ports)
    roles, names = _texts(ports, "label"), _texts(ports, "name")
    labels = []
    for row, (lon, lat) in zip(rows, xy, strict=True):
        text = " ".join(part for part in (roles[row], names[row]) if part)
        if text:
            labels.append(PortLabel(float(lon), float(lat), text))
    return labels


def overview_port_labels(ports: gpd.GeoDataFrame) -> list[PortLabel]:
    """One label a port place (its `location_id`, else its name) over every container's route: its name,
    at its first feature's point, with the number of port features there; the most called first, then
    by name. Ports without a name are left out."""
    rows, xy = _point_rows(ports)
    names, places = _texts(ports, "name"), _texts(ports, "location_id")
    found: dict[str, list] = {}
    for row, (lon, lat) in zip(rows, xy, strict=True):
        if not names[row]:
            continue
        entry = found.setdefault(places[row] or names[row], [float(lon), float(lat), names[row], 0])
        entry[3] += 1
    labels = [PortLabel(*entry) for entry in found.values()]
    return sorted(labels, key=lambda label: (-label.calls, label.text, label.lon, label.lat))


class TakenBoxes:
    """Boxes on the figure (display pixels: markers, the legend, placed labels) that a label must not
    overlap; checked all at once with numpy, as an overview has thousands of port markers."""

    def __init__(self, extents: np.ndarray | None = None) -> None:
        self._extents = np.empty((0, 4)) if extents is None else np.asarray(extents, dtype=np.float64)

    @classmethod
    def around(cls, px: np.ndarray, half: float) -> TakenBoxes:
        """Squares of side 2 * `half` centred on the (n, 2) pixel positions `px` (the markers)."""
        px = np.asarray(px, dtype=np.float64).reshape(-1, 2)
        return cls(np.column_stack([px - half, px + half]))

    def add(self, box: Bbox) -> None:
        """Take `box`."""
        self._extents = np.vstack([self._extents, box.extents])

    def overlaps(self, box: Bbox) -> bool:
        """Whether `box` overlaps or touches any taken box (as `Bbox.overlaps`)."""
        x0, y0, x1, y1 = box.extents
        e = self._extents
        return bool(((e[:, 0] <= x1) & (x0 <= e[:, 2]) & (e[:, 1] <= y1) & (y0 <= e[:, 3])).any())


def place_label(
    ax,
    renderer,
    xy: tuple[float, float],
    text: str,
    taken: TakenBoxes,
    offsets,
    *,
    required: bool = True,
    **style,
) -> bool:
    """Annotate `xy` at the first of `offsets` whose text box overlaps no taken box and stays inside
    the axes, and take that box. When none is free: at the first offset if `required`, else not at all.
    Returns whether the label was drawn. Deterministic: fixed order, Agg's text metrics."""
    axes_box = ax.get_window_extent(renderer)
    first = None
    for dx, dy, ha, va in offsets:
        ann = ax.annotate(text, xy, xytext=(dx, dy), textcoords="offset points", ha=ha, va=va, **style)
        box = ann.get_window_extent(renderer)
        inside = (
            axes_box.x0 <= box.x0
            and box.x1 <= axes_box.x1
            and axes_box.y0 <= box.y0
            and box.y1 <= axes_box.y1
        )
        if inside and not taken.overlaps(box):
            taken.add(box)
            if first is not None:
                first.remove()
            return True
        if first is None and required:
            first = ann
        else:
            ann.remove()
    if first is None:
        return False
    taken.add(first.get_window_extent(renderer))
    return True
