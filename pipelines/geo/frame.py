"""What a route map is drawn in and on besides its routes: the frame, centred on the routes so that no line
streaks across the map; the land outline; and the port labels, placed so that none hides another.

A trans-Pacific route (Shanghai -> Los Angeles) drawn on a -180..180 frame either streaks across the
whole map (the raw `geometry`) or, with the antimeridian-split `geometry_split`, falls into two pieces at
the map's left and right edges, with an extent that has to span ~360 degrees to show both. So every map
here is drawn in a frame *centred on the route*: the central longitude is the middle of the shortest
longitude arc that holds every vertex of the map (the complement of the largest empty gap between
longitudes on the circle), and every longitude is shifted into [central - 180, central + 180). Routes
that stay on one side of 180 keep their plain -180..180 longitudes; a trans-Pacific route ends up in a
continuous 100..260-style frame (ticks are still labelled 120°W, not 240°).

When the lines go round the world (the overview of a fleet) no longitude is empty, and the "largest gap"
is whichever 2-degree step between densified vertices happens to be widest: once that was 97°E, which cut
the Europe-Asia lane at Malacca and Sumatra in two at the map's edges. Then the seam is chosen instead
(`seam_longitude`): the meridian crossed by the fewest route segments with the least land along it.

The geometry drawn is `geometry_split` (its pieces meet at +/-180, which the shift turns into one seamless
path); every line is then cut again at the frame's own seam (central +/- 180) with
`pipelines.geo.features.split_antimeridian`, so no line streaks across the map. (The renderer draws land
three times, shifted by -360, 0, +360, so that whatever frame is chosen it is covered.)

Degenerate geometry is decided on once, here (`line_runs`, `point_positions`), and every map follows it:
a missing or empty geometry shows nothing; a vertex the ingest would refuse (NaN, infinite, out of range:
`pipelines.geo.features.known_positions`) is a position not known, so a line is cut there (as matplotlib
cuts a path at a NaN) rather than joined across it; and a line
whose vertices all lie at one place (two identical positions: a vessel that did not move between two
reports; a piece of one vertex between unknown positions; a piece the antimeridian split cut at its own
vertex) is the point it is: it frames the map like any other position, and draws nothing (it has no
length). So no such geometry can stop a map, and it never moves one.

The land (`load_land`) is an offline outline: Natural Earth 1:110m land, vendored as a small GeoJSON.
Nothing is downloaded at run time (cartopy and geodatasets fetch their data from the internet, which the
pipeline's machines cannot reach). `pipelines/geo/reference_data/land_110m.geojson` was derived once, with
`python -m pipelines.geo.frame`, from the Natural Earth 1:110m "admin 0 countries" layer that pyogrio ships
in its wheel as a test fixture (`pyogrio/tests/fixtures/naturalearth_lowres`, copied there from GeoPandas):
the 177 countries dissolved into land polygons, split into single polygons, coordinates rounded to 0.001
degree. Natural Earth is public domain ("Made with Natural Earth. Free vector and raster map data @
naturalearthdata.com"); see `pipelines/geo/reference_data/LAND_LICENSE.md`. Regenerating needs pyogrio's
fixture only; the runtime reads the vendored file and needs no extra dependency.

Text on the route maps (`route_port_labels`, `overview_port_labels`, `place_label`): which ports get a
label and with what text, and where a label goes so that it hides no other label, marker or the legend.

Port features carry their name (`name`) and their role on the container's route (`label`: POL, TS1, POD)
in their properties, so no other table is read. A route map labels every port of its route with its role
and name; the overview labels each place once, by name, the places most containers call at first, and
leaves out a label that finds no free spot.
"""

from __future__ import annotations

import argparse
import math
from collections.abc import Iterable
from dataclasses import dataclass
from functools import lru_cache
from pathlib import Path

import geopandas as gpd
import numpy as np
import shapely
from matplotlib.transforms import Bbox

from pipelines.geo import LAND_PATH
from pipelines.geo.features import known_positions, split_antimeridian

DENSIFY_DEGREES = 2.0  # lines are densified to this step before their longitudes are looked at
SEAM_LATITUDES = (-60.0, 75.0)  # the land a seam cuts is measured between these (Antarctica left out)


def _largest_gap(x: np.ndarray) -> tuple[float, float]:
    """(first longitude after the largest empty gap between the longitudes on the circle, that gap's width);
    ties go to the first gap in sorted order. `x` holds at least two distinct longitudes in [-180, 180)."""
    gaps = np.diff(np.concatenate([x, [x[0] + 360.0]]))
    k = int(np.argmax(gaps))
    return float(x[(k + 1) % x.size]), float(gaps[k])


def _unique_longitudes(lons: Iterable[float] | np.ndarray) -> np.ndarray:
    x = np.asarray(lons, dtype=np.float64)
    x = x[np.isfinite(x)]
    return np.unique(np.mod(x + 180.0, 360.0) - 180.0)


def central_longitude(lons: Iterable[float] | np.ndarray) -> float:
    """Middle of the shortest arc of the circle that holds every longitude (0 when there are none); in
    [-180, 180] unless the arc crosses the antimeridian, then in (0, 360).

    Ties between equally large gaps go to the first one in sorted order, so the answer is deterministic.
    """
    x = _unique_longitudes(lons)
    if x.size == 0:
        return 0.0
    if x.size == 1:
        return float(x[0])
    start, gap = _largest_gap(x)
    # An arc over the antimeridian gets its centre in (0, 360): a 0..360 frame where Asia keeps its
    # longitudes and the Americas move by +360; any other arc keeps its -180..180 centre.
    return start + (360.0 - gap) / 2.0


def _single_parts(geoms: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """(the points, lines and polygons inside `geoms`, with collections opened to any depth; the index in
    `geoms` of the geometry each came from). Missing geometries have no parts."""
    owner = np.flatnonzero(~shapely.is_missing(geoms))
    parts = geoms[owner]
    while parts.size and np.isin(shapely.get_type_id(parts), (4, 5, 6, 7)).any():
        parts, index = shapely.get_parts(parts, return_index=True)
        owner = owner[index]
    return parts, owner


def point_positions(geoms: np.ndarray | Iterable) -> tuple[np.ndarray, np.ndarray]:
    """(the index in `geoms` of the geometry each position belongs to, the (n, 2) positions): every point
    (also of a multi-point or a collection) whose position is known. Missing and empty geometries and
    unknown positions (`known_positions`) give none (the module docstring says why)."""
    geoms = np.asarray(list(geoms) if not isinstance(geoms, np.ndarray) else geoms, dtype=object)
    parts, owner = _single_parts(geoms)
    points = shapely.get_type_id(parts) == 0
    xy, part_of = shapely.get_coordinates(parts[points], return_index=True)
    known = known_positions(xy)
    return owner[points][part_of[known]], xy[known]


def line_runs(geoms: np.ndarray | Iterable) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The lines of `geoms` (polygons by their rings) as runs of known positions: (the vertices, one flat
    (N, 2) array; how many vertices each run has, always 2 or more; the index in `geoms` of the geometry
    each run came from).

    A line is cut into runs at every vertex whose position is not known (`known_positions`); a run of
    one vertex is given that vertex twice, a zero-length line, which is how every line that stays at one
    place comes out (see the module docstring: such a line is the point it is)."""
    geoms = np.asarray(list(geoms) if not isinstance(geoms, np.ndarray) else geoms, dtype=object)
    parts, owner = _single_parts(geoms)
    types = shapely.get_type_id(parts)
    rings, ring_of = shapely.get_rings(parts[types == 3], return_index=True)
    lines = np.concatenate([parts[(types == 1) | (types == 2)], rings])
    line_owner = np.concatenate([owner[(types == 1) | (types == 2)], owner[types == 3][ring_of]])
    coords, line_of = shapely.get_coordinates(lines, return_index=True)
    known = known_positions(coords)
    # a run starts at a line's first vertex and after every unknown one
    starts = np.ones(len(coords), dtype=bool)
    starts[1:] = (line_of[1:] != line_of[:-1]) | ~known[:-1]
    coords, line_of, starts = coords[known], line_of[known], starts[known]
    run_of = np.cumsum(starts) - 1
    lengths = np.bincount(run_of, minlength=int(starts.sum())).astype(np.int64)
    single = np.flatnonzero(lengths == 1)
    if single.size:  # one vertex: given twice, a zero-length line
        first_vertex = np.cumsum(lengths) - lengths
        coords = np.insert(coords, first_vertex[single] + 1, coords[first_vertex[single]], axis=0)
        lengths[single] = 2
    return coords, lengths, line_owner[line_of[starts]]


def _moving_lines(coords: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """The runs of `line_runs` that go somewhere, as LineStrings: those whose vertices are not all at one
    place (GEOS cannot densify a zero-length line: "point array must contain 0 or >1 elements")."""
    if not lengths.size:
        return np.empty(0, dtype=object)
    first = np.cumsum(lengths) - lengths
    spread = np.maximum.reduceat(coords, first) - np.minimum.reduceat(coords, first)
    lines = shapely.linestrings(coords, indices=np.repeat(np.arange(lengths.size), lengths))
    return lines[(spread > 0).any(axis=1)]


def frame_center(geoms: np.ndarray, land: np.ndarray | None = None) -> float:
    """Central longitude for a set of geometries, with lines densified to `DENSIFY_DEGREES` steps so that
    a long straight ocean segment counts as occupied longitude, not as a gap; a line that stays at one
    place counts as the point it is, and unknown positions not at all (`line_runs`).

    When some band of longitudes wider than that step holds nothing, the frame is centred opposite it
    (`central_longitude`). When the lines go round the world there is no such band: the frame's seam is
    then `seam_longitude`'s meridian (fewest lines and least land cut, given the `land` polygons) and the
    centre, opposite it, is in [0, 360)."""
    coords, lengths, _ = line_runs(geoms)
    _, points = point_positions(geoms)
    densified = shapely.get_coordinates(shapely.segmentize(_moving_lines(coords, lengths), DENSIFY_DEGREES))
    x = _unique_longitudes(np.concatenate([points[:, 0], coords[:, 0], densified[:, 0]]))
    if x.size < 2 or _largest_gap(x)[1] > DENSIFY_DEGREES:
        return central_longitude(x)
    return seam_longitude(geoms, land) + 180.0


def seam_longitude(geoms: np.ndarray, land: np.ndarray | None = None) -> float:
    """The meridian (one of -179.5, -178.5, ..., 179.5) where a map of these lines is best cut: the fewest
    line segments crossing it plus the least land along it (between `SEAM_LATITUDES`), each as a share of
    its largest value over all meridians; of equal best meridians, the middle of the widest run of them.
    Lines are taken as `line_runs` gives them (a line that stays at one place crosses nothing)."""
    meridians = np.arange(-180.0, 180.0) + 0.5
    lines = _moving_lines(*line_runs(geoms)[:2])
    crossings = _crossings(shapely.segmentize(lines, DENSIFY_DEGREES), meridians).astype(np.float64)
    score = crossings / max(crossings.max(), 1.0)
    if land is not None and len(land):
        land_cut = _land_along(np.asarray(land, dtype=object), meridians)
        score += land_cut / max(land_cut.max(), 1.0)
    best = np.flatnonzero(score == score.min())
    # the widest run of consecutive best meridians, the circle closed (a run may wrap past 179.5)
    ends = np.flatnonzero(np.diff(np.concatenate([best, [best[0] + meridians.size]])) != 1)
    if ends.size == 0:  # every meridian is as good
        return float(meridians[0])
    starts = np.roll(ends + 1, 1) % best.size
    lengths = np.mod(ends - starts, best.size) + 1
    k = int(np.argmax(lengths))
    return float(meridians[best[(starts[k] + (lengths[k] - 1) // 2) % best.size]])


def _crossings(lines: np.ndarray, meridians: np.ndarray) -> np.ndarray:
    """How many line segments cross each of the evenly spaced, 1-degree apart `meridians` (a segment is
    taken the short way round, so one from 179 to -179 crosses 179.5)."""
    coords, part_of = shapely.get_coordinates(shapely.get_parts(lines), return_index=True)
    same_part = part_of[:-1] == part_of[1:]
    x0 = coords[:-1, 0][same_part]
    dx = np.mod(coords[1:, 0][same_part] - x0 + 180.0, 360.0) - 180.0
    lo, hi = np.minimum(x0, x0 + dx), np.maximum(x0, x0 + dx)
    # meridian k (longitude meridians[0] + k) lies strictly inside (lo, hi) for k in first..last
    first = np.ceil(lo - meridians[0]).astype(np.int64)
    last = np.floor(hi - meridians[0]).astype(np.int64)
    first = np.where(first == lo - meridians[0], first + 1, first)
    last = np.where(last == hi - meridians[0], last - 1, last)
    count = np.maximum(last - first + 1, 0)
    offsets = np.arange(count.sum()) - np.repeat(np.cumsum(count) - count, count)
    crossed = np.mod(np.repeat(first, count) + offsets, meridians.size)
    return np.bincount(crossed, minlength=meridians.size)


def _land_along(land: np.ndarray, meridians: np.ndarray) -> np.ndarray:
    """Degrees of latitude of land along each meridian, between `SEAM_LATITUDES`."""
    south, north = SEAM_LATITUDES
    ends = np.stack([np.column_stack([meridians, np.full(meridians.size, south)]),
                     np.column_stack([meridians, np.full(meridians.size, north)])], axis=1)  # fmt: skip
    lines = shapely.linestrings(ends)
    polygons = shapely.get_parts(land)
    which, polygon = shapely.STRtree(polygons).query(lines, predicate="intersects")
    lengths = shapely.length(shapely.intersection(lines[which], polygons[polygon]))
    return np.bincount(which, weights=lengths, minlength=meridians.size)


def wrap_to_frame(x: np.ndarray, lon0: float) -> np.ndarray:
    """Longitudes shifted by whole turns into [lon0 - 180, lon0 + 180)."""
    return np.mod(np.asarray(x, dtype=np.float64) - lon0 + 180.0, 360.0) - 180.0 + lon0


def lines_in_frame(geoms: np.ndarray | Iterable, lon0: float) -> tuple[list[np.ndarray], np.ndarray]:
    """Every (multi)line as vertex arrays in the frame centred on lon0, cut at the frame's seam (and at
    unknown positions: `line_runs`; a line that stays at one place is a zero-length path, which frames a
    map and draws nothing).

    Returns (paths, owner): `paths[i]` is an (n, 2) array, `owner[i]` the index of the input geometry
    it came from (for styling).
    """
    coords, lengths, part_owner = line_runs(geoms)
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


ATTRIBUTION = "Land: Natural Earth 1:110m (public domain)"


def pyogrio_fixture_path() -> Path:
    """Where pyogrio's wheel keeps its Natural Earth 1:110m countries fixture (the source of LAND_PATH)."""
    import pyogrio

    return (
        Path(pyogrio.__file__).resolve().parent
        / "tests"
        / "fixtures"
        / "naturalearth_lowres"
        / "naturalearth_lowres.shp"
    )


def build_land(source: Path, out_path: Path = LAND_PATH, precision: float = 0.001) -> Path:
    """Dissolve a countries layer into land polygons and write them as compact GeoJSON (EPSG:4326)."""
    countries = gpd.read_file(source).to_crs(4326)
    land = shapely.union_all(shapely.make_valid(countries.geometry.values))
    parts = shapely.get_parts(land)
    parts = parts[shapely.get_type_id(parts) == 3]  # polygons only (make_valid may leave slivers as lines)
    parts = shapely.set_precision(parts, precision)
    parts = parts[~shapely.is_empty(parts)]
    frame = gpd.GeoDataFrame({"featurecla": ["Land"] * len(parts)}, geometry=list(parts), crs=4326)
    frame = frame.iloc[frame.geometry.bounds.sort_values(["minx", "miny"]).index].reset_index(drop=True)
    out_path.parent.mkdir(parents=True, exist_ok=True)
    frame.to_file(out_path, driver="GeoJSON", COORDINATE_PRECISION=3, WRITE_BBOX="NO")
    return out_path


@lru_cache(maxsize=1)
def _cached_land(path: str) -> gpd.GeoDataFrame:
    return gpd.read_file(path)


def load_land(path: Path | None = None) -> gpd.GeoDataFrame:
    """The land polygons (EPSG:4326), read once per process; a copy, so callers may modify it."""
    return _cached_land(str(path or LAND_PATH)).copy()


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


def main(argv: list[str] | None = None) -> None:
    """Regenerate the vendored land file from pyogrio's Natural Earth fixture."""
    parser = argparse.ArgumentParser(description=main.__doc__)
    parser.add_argument("--source", type=Path, default=None, help="a countries layer (default: pyogrio's)")
    parser.add_argument("--out", type=Path, default=LAND_PATH)
    args = parser.parse_args(argv)
    out = build_land(args.source or pyogrio_fixture_path(), args.out)
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(load_land(out))} polygons)")


if __name__ == "__main__":
    main()
