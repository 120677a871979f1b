"""The frame a route map is drawn in: centred on the routes so that no line streaks across the map.

A trans-Pacific route (Shanghai -> Los Angeles) drawn on a -180..180 frame either
streaks across the whole map (the raw `geometry`) or, with the antimeridian-split `geometry_split`, falls
into two pieces at the map's left and right edges, with an extent that has to span ~360 degrees to show
both. So every map here is drawn in a frame *centred on the route*: the central longitude is the middle of
the shortest longitude arc that holds every vertex of the map (the complement of the largest empty gap
between longitudes on the circle), and every longitude is shifted into [central - 180, central + 180).
Routes that stay on one side of 180 keep their plain -180..180 longitudes; a trans-Pacific route ends up
in a continuous 100..260-style frame (ticks are still labelled 120°W, not 240°). The geometry drawn is
`geometry_split` (its pieces meet at +/-180, which the shift turns into one seamless path); every line is
then cut again at the frame's own seam (central +/- 180) with `pipelines.geo.features.split_antimeridian`, so the
overview of all routes, whose seam falls in the emptiest band of longitudes, never streaks either. (The renderer draws
land three times, shifted by -360, 0, +360, so that whatever frame is chosen it is covered.)
"""

from __future__ import annotations

import math
from collections.abc import Iterable

import numpy as np
import shapely

from pipelines.geo.features import split_antimeridian


def central_longitude(lons: Iterable[float] | np.ndarray) -> float:
    """Middle of the shortest arc of the circle that holds every longitude (0 when there are none); in
    [-180, 180] unless the arc crosses the antimeridian, then in (0, 360).

    Ties between equally large gaps go to the first one in sorted order, so the answer is deterministic.
    """
    x = np.asarray(lons, dtype=np.float64)
    x = x[np.isfinite(x)]
    if x.size == 0:
        return 0.0
    x = np.unique(np.mod(x + 180.0, 360.0) - 180.0)
    if x.size == 1:
        return float(x[0])
    gaps = np.diff(np.concatenate([x, [x[0] + 360.0]]))
    k = int(np.argmax(gaps))
    start = x[(k + 1) % x.size]
    span = 360.0 - gaps[k]
    # An arc over the antimeridian gets its centre in (0, 360): a 0..360 frame where Asia keeps its
    # longitudes and the Americas move by +360; any other arc keeps its -180..180 centre.
    return float(start + span / 2.0)


def frame_center(geoms: np.ndarray) -> float:
    """Central longitude for a set of geometries, with lines densified to 2-degree steps so that a long
    straight ocean segment counts as occupied longitude, not as a gap."""
    geoms = np.asarray(geoms, dtype=object)
    geoms = geoms[~shapely.is_missing(geoms)] if geoms.size else geoms
    if geoms.size == 0:
        return 0.0
    coords = shapely.get_coordinates(shapely.segmentize(geoms, 2.0))
    return central_longitude(coords[:, 0]) if len(coords) else 0.0


def wrap_to_frame(x: np.ndarray, lon0: float) -> np.ndarray:
    """Longitudes shifted by whole turns into [lon0 - 180, lon0 + 180)."""
    return np.mod(np.asarray(x, dtype=np.float64) - lon0 + 180.0, 360.0) - 180.0 + lon0


def lines_in_frame(geoms: np.ndarray | Iterable, lon0: float) -> tuple[list[np.ndarray], np.ndarray]:
    """Every (multi)line as vertex arrays in the frame centred on lon0, cut at the frame's seam.

    Returns (paths, owner): `paths[i]` is an (n, 2) array, `owner[i]` the index of the input geometry
    it came from (for styling).
    """
    geoms = np.asarray(list(geoms) if not isinstance(geoms, np.ndarray) else geoms, dtype=object)
    if geoms.size == 0:
        return [], np.zeros(0, dtype=np.int64)
    geoms = np.where(shapely.is_missing(geoms), shapely.from_wkt("LINESTRING EMPTY"), geoms)
    parts, part_owner = shapely.get_parts(geoms, return_index=True)
    coords, part_of = shapely.get_coordinates(parts, return_index=True)
    lengths = np.bincount(part_of, minlength=len(parts)).astype(np.int64)
    keep_part = lengths >= 2
    keep_vertex = keep_part[part_of]
    coords, lengths, part_owner = coords[keep_vertex], lengths[keep_part], part_owner[keep_part]
    if lengths.size == 0:
        return [], np.zeros(0, dtype=np.int64)
    shifted = coords.copy()
    shifted[:, 0] -= lon0
    cut = split_antimeridian(shifted, lengths)  # wraps into [-180, 180] and cuts jumps > 180 degrees
    paths: list[np.ndarray] = []
    owner: list[int] = []
    for line, who in zip(cut, part_owner, strict=True):
        for piece in shapely.get_parts(line):
            xy = shapely.get_coordinates(piece)
            if len(xy) >= 2:
                xy[:, 0] += lon0
                paths.append(xy)
                owner.append(int(who))
    return paths, np.asarray(owner, dtype=np.int64)


def fit_extent(
    bounds: tuple[float, float, float, float],
    box_aspect: float,
    margin: float = 0.08,
    min_lon_span: float = 12.0,
    min_lat_span: float = 6.0,
) -> tuple[tuple[float, float, float, float], float]:
    """(xmin, xmax, ymin, ymax) around `bounds` with a margin, shaped to fill an axes box of
    width/height `box_aspect` at a local equirectangular scale (a degree of longitude drawn cos(lat)
    times as wide as a degree of latitude); also returns that y/x scale."""
    xmin, ymin, xmax, ymax = bounds
    cx, cy = (xmin + xmax) / 2.0, (ymin + ymax) / 2.0
    w = max(xmax - xmin, min_lon_span) * (1.0 + 2.0 * margin)
    h = max(ymax - ymin, min_lat_span) * (1.0 + 2.0 * margin)
    scale = 1.0 / math.cos(math.radians(min(abs(cy), 60.0)))  # drawn height of 1° lat per 1° lon
    if w / (h * scale) < box_aspect:
        w = h * scale * box_aspect
    else:
        h = w / (scale * box_aspect)
    w = min(w, 360.0)
    if h > 180.0:
        h = 180.0
        w = min(max(w, h * scale * box_aspect), 360.0)
    ymin_out = min(max(cy - h / 2.0, -90.0), 90.0 - h)
    return (cx - w / 2.0, cx + w / 2.0, ymin_out, ymin_out + h), scale


