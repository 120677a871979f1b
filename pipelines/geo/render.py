"""Route maps as PNG: one container's route, or every route at once (matplotlib, Agg backend, no display).

Pure rendering: the callers hand in GeoDataFrames of map features (`features_frame` builds one from the
`map_features` table) and the land polygons (`pipelines.geo.frame.load_land`).

The route-centred frame every map is drawn in, the land and the labels' placement are `pipelines.geo.frame`'s.

Both renderers are deterministic: fixed figure size and dpi, fixed drawing order, no timestamps in the
PNG metadata. They return a `RenderResult` with the extent actually shown, for tests and metadata.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import dataclass, field
from pathlib import Path

import matplotlib

matplotlib.use("Agg")

import geopandas as gpd
import numpy as np
import pyarrow as pa
import shapely
from matplotlib.backends.backend_agg import FigureCanvasAgg
from matplotlib.collections import LineCollection, PatchCollection
from matplotlib.figure import Figure
from matplotlib.lines import Line2D
from matplotlib.markers import MarkerStyle
from matplotlib.patches import PathPatch
from matplotlib.path import Path as MplPath
from matplotlib.ticker import FuncFormatter, MultipleLocator

from pipelines.geo.frame import (
    ATTRIBUTION,
    OVERVIEW_PORT_OFFSETS,
    PORT_OFFSETS,
    VESSEL_OFFSETS,
    TakenBoxes,
    fit_extent,
    frame_center,
    lines_in_frame,
    load_land,
    overview_port_labels,
    place_label,
    point_positions,
    route_port_labels,
    wrap_to_frame,
)

ROUTE_FIGSIZE = (10.0, 6.25)  # inches; at ROUTE_DPI -> 1000 x 625 px
ROUTE_DPI = 100
OVERVIEW_FIGSIZE = (15.0, 6.6)  # -> 1500 x 660 px: 360 degrees wide shows about 62S..84N
OVERVIEW_DPI = 100
_AXES_RECT = (0.06, 0.07, 0.91, 0.84)  # left, bottom, width, height (figure fractions)

OCEAN = "#eaf1f7"
LAND = "#d4d4d4"
LAND_EDGE = "#b5b5b5"
PAST = "#1f4e79"
ESTIMATED = "#e07b00"
PARTIAL = "#c0392b"
PORT = "#2c3e50"
VESSEL = "#d62728"

LINE_TYPES = ("past_vessel_locations", "estimated_full_legs", "estimated_partial_leg")


@dataclass(frozen=True)
class RenderResult:
    """What a renderer wrote and which part of the world it showed (longitudes in the map's frame)."""

    path: Path
    extent: tuple[float, float, float, float]  # xmin, xmax, ymin, ymax in degrees
    central_longitude: float
    size_px: tuple[int, int]  # width, height
    title: str = ""
    labels: tuple[str, ...] = ()  # the text drawn on the map: port and vessel labels, in drawing order
    counts: Mapping[str, int] = field(default_factory=dict)  # what the map shows, by name (the overview's)

    @property
    def lon_span(self) -> float:
        """Width of the shown extent in degrees of longitude."""
        return self.extent[1] - self.extent[0]


# ---- input -------------------------------------------------------------------------------------------


def features_frame(table: pa.Table, prefer_split: bool = True) -> gpd.GeoDataFrame:
    """The `map_features` rows (an Arrow table with WKB columns) as a GeoDataFrame in EPSG:4326.

    The active geometry is `geometry_split` (the antimeridian-split variant) where present, else `geometry`.
    A WKB value GEOS cannot read (a line of one position, which the ingest never writes but another writer
    might) is taken as missing: one unreadable feature must not stop every map.
    """
    names = set(table.column_names)
    frame = table.drop_columns([c for c in ("geometry", "geometry_split") if c in names]).to_pandas()

    def read(column: str):
        if column not in names:
            return None
        with np.errstate(invalid="ignore"):  # NaN coordinates: `pipelines.geo.frame` decides what they mean
            return shapely.from_wkb(table.column(column).to_pylist(), on_invalid="ignore")

    raw, split = read("geometry"), read("geometry_split")
    if split is not None and prefer_split:
        geoms = split if raw is None else np.where(shapely.is_missing(split), raw, split)
    elif raw is not None:
        geoms = raw
    else:
        raise ValueError("map features need a `geometry` or `geometry_split` WKB column")
    return gpd.GeoDataFrame(frame, geometry=gpd.GeoSeries(geoms, crs="EPSG:4326"), crs="EPSG:4326")


def _lon_label(value: float, _pos: object = None) -> str:
    lon = (value + 180.0) % 360.0 - 180.0
    if abs(lon) < 1e-9 or abs(abs(lon) - 180.0) < 1e-9:
        return f"{abs(lon):g}°"
    return f"{abs(lon):g}°{'E' if lon > 0 else 'W'}"


def _lat_label(value: float, _pos: object = None) -> str:
    if abs(value) < 1e-9:
        return "0°"
    return f"{abs(value):g}°{'N' if value > 0 else 'S'}"


# ---- drawing -----------------------------------------------------------------------------------------


def _new_figure(figsize: tuple[float, float], dpi: int):
    fig = Figure(figsize=figsize, dpi=dpi, facecolor="white")
    ax = fig.add_axes(_AXES_RECT)
    ax.set_facecolor(OCEAN)
    box_aspect = (figsize[0] * _AXES_RECT[2]) / (figsize[1] * _AXES_RECT[3])
    return fig, ax, box_aspect


def _polygon_path(poly: shapely.Polygon, dx: float) -> MplPath:
    rings = [poly.exterior, *poly.interiors]
    vertices, codes = [], []
    for ring in rings:
        xy = np.asarray(ring.coords)
        xy = xy + np.array([dx, 0.0])
        c = np.full(len(xy), MplPath.LINETO, dtype=np.uint8)
        c[0], c[-1] = MplPath.MOVETO, MplPath.CLOSEPOLY
        vertices.append(xy)
        codes.append(c)
    return MplPath(np.concatenate(vertices), np.concatenate(codes))


def _land_polygons(land_gdf: gpd.GeoDataFrame | None) -> np.ndarray:
    """The land outline as an array of single polygons (empty when there is none)."""
    if land_gdf is None or land_gdf.empty:
        return np.empty(0, dtype=object)
    polys = shapely.get_parts(np.asarray(land_gdf.geometry.values, dtype=object))
    return polys[shapely.get_type_id(polys) == 3]


def _draw_land(ax, polys: np.ndarray, extent: tuple[float, float, float, float]) -> None:
    """Land polygons (copies at -360, 0, +360) that intersect the extent, in grey."""
    if not len(polys):
        return
    xmin, xmax, ymin, ymax = extent
    patches = []
    for dx in (-360.0, 0.0, 360.0):
        window = shapely.box(xmin - dx, ymin, xmax - dx, ymax)
        for poly in polys[shapely.intersects(polys, window)]:
            patches.append(PathPatch(_polygon_path(poly, dx)))
    ax.add_collection(
        PatchCollection(
            patches, facecolor=LAND, edgecolor=LAND_EDGE, linewidth=0.4, zorder=1, match_original=False
        )
    )


def _tick_step(span: float, max_ticks: int) -> float:
    for step in (1.0, 2.0, 5.0, 10.0, 15.0, 20.0, 30.0, 45.0, 60.0, 90.0):
        if span / step <= max_ticks:
            return step
    return 90.0


def _legend_corner(ax, xy: np.ndarray) -> str:
    """The axes corner with the fewest drawn vertices near it (fixed order on ties): where the legend
    hides the least of the route."""
    corners = {"lower left": (0, 0), "lower right": (1, 0), "upper left": (0, 1), "upper right": (1, 1)}
    if not len(xy):
        return "lower left"
    frac = ax.transAxes.inverted().transform(ax.transData.transform(xy))
    counts = {}
    for name, (cx, cy) in corners.items():
        near_x = frac[:, 0] < 0.3 if cx == 0 else frac[:, 0] > 0.7
        near_y = frac[:, 1] < 0.3 if cy == 0 else frac[:, 1] > 0.7
        counts[name] = int((near_x & near_y).sum())
    return min(corners, key=lambda name: counts[name])


def _style_axes(ax, extent: tuple[float, float, float, float]) -> None:
    xmin, xmax, ymin, ymax = extent
    ax.set_xlim(xmin, xmax)
    ax.set_ylim(ymin, ymax)
    ax.set_aspect("auto")
    # steps that divide 360, so ticks in a shifted frame land on the same meridians as in -180..180
    ax.xaxis.set_major_locator(MultipleLocator(_tick_step(xmax - xmin, 9)))
    ax.yaxis.set_major_locator(MultipleLocator(_tick_step(ymax - ymin, 7)))
    ax.xaxis.set_major_formatter(FuncFormatter(_lon_label))
    ax.yaxis.set_major_formatter(FuncFormatter(_lat_label))
    ax.tick_params(labelsize=8, colors="#555555")
    ax.grid(True, color="white", linewidth=0.6, zorder=0.5)
    for spine in ax.spines.values():
        spine.set_edgecolor("#999999")
    left, _, width, _ = _AXES_RECT  # below the axes' lower right corner, under the tick labels
    ax.figure.text(left + width, 0.004, ATTRIBUTION, ha="right", va="bottom", fontsize=6.5, color="#777777")


def _save(fig: Figure, out_path: Path, dpi: int) -> tuple[int, int]:
    out_path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(out_path, dpi=dpi, format="png", metadata={"Software": None})
    w, h = fig.get_size_inches()
    return round(w * dpi), round(h * dpi)


def _column(frame: gpd.GeoDataFrame, name: str, default: object = None) -> list:
    return frame[name].tolist() if name in frame.columns else [default] * len(frame)


def _vessel_marker(heading: object) -> MarkerStyle:
    """A triangle pointing along the compass heading (0 = north, clockwise); a circle when unknown."""
    if heading is None or not isinstance(heading, int | float) or not math.isfinite(heading):
        return MarkerStyle("o")
    return MarkerStyle(">").rotated(deg=90.0 - float(heading))


def render_container_route(
    features_gdf: gpd.GeoDataFrame,
    land_gdf: gpd.GeoDataFrame | None,
    out_path: str | Path,
    title: str,
    *,
    figsize: tuple[float, float] = ROUTE_FIGSIZE,
    dpi: int = ROUTE_DPI,
) -> RenderResult:
    """One container's route map: land in grey, past track solid, estimated legs dashed, ports labelled
    (POL/TS1/POD and name), the vessel where it is now; the extent fitted to the route with a margin."""
    out_path = Path(out_path)
    frame = features_gdf.sort_values("feature_index") if "feature_index" in features_gdf else features_gdf
    geoms = np.asarray(frame.geometry.values, dtype=object)
    land = _land_polygons(land_gdf)
    lon0 = frame_center(geoms, land)
    kinds = np.asarray(_column(frame, "feature_type", ""), dtype=object)

    line_idx = np.flatnonzero(np.isin(kinds, LINE_TYPES))
    paths, owner = lines_in_frame(geoms[line_idx], lon0)
    owner_kind = kinds[line_idx][owner] if len(owner) else np.empty(0, dtype=object)
    port_rows = frame[kinds == "port"]
    _, port_xy = point_positions(port_rows.geometry.values)
    port_xy[:, 0] = wrap_to_frame(port_xy[:, 0], lon0)
    vessel_rows = frame[kinds == "current_vessel"]
    vessel_of, vessel_xy = point_positions(vessel_rows.geometry.values)
    vessel_xy[:, 0] = wrap_to_frame(vessel_xy[:, 0], lon0)

    drawn = [*paths, port_xy, vessel_xy]
    allxy = np.concatenate(drawn) if drawn else np.empty((0, 2))
    if len(allxy):
        bounds = (allxy[:, 0].min(), allxy[:, 1].min(), allxy[:, 0].max(), allxy[:, 1].max())
    else:
        bounds = (-180.0, -60.0, 180.0, 80.0)
    fig, ax, box_aspect = _new_figure(figsize, dpi)
    extent, _ = fit_extent(bounds, box_aspect)
    _draw_land(ax, land, extent)
    _style_axes(ax, extent)
    ax.set_title(title, fontsize=12, loc="left", pad=8)

    styles = {
        "past_vessel_locations": dict(colors=PAST, linewidths=2.2, linestyles="solid", zorder=4),
        "estimated_full_legs": dict(colors=ESTIMATED, linewidths=1.8, linestyles=(0, (5, 3)), zorder=3),
        "estimated_partial_leg": dict(colors=PARTIAL, linewidths=1.8, linestyles=(0, (2, 2)), zorder=3.5),
    }
    legend = []
    names = {
        "past_vessel_locations": "Past track",
        "estimated_full_legs": "Estimated legs",
        "estimated_partial_leg": "Estimated, current leg",
    }
    for kind in LINE_TYPES:
        segs = [p for p, k in zip(paths, owner_kind, strict=True) if k == kind]
        if segs:
            ax.add_collection(LineCollection(segs, capstyle="round", joinstyle="round", **styles[kind]))
            st = styles[kind]
            legend.append(
                Line2D(
                    [], [], color=st["colors"], lw=st["linewidths"], ls=st["linestyles"], label=names[kind]
                )
            )

    renderer = FigureCanvasAgg(fig).get_renderer()
    to_px = ax.transData.transform
    taken = TakenBoxes.around(to_px(np.concatenate([port_xy, vessel_xy])), 6.0)
    legend.append(Line2D([], [], color=PORT, marker="o", mfc="white", mew=1.8, lw=0, label="Port"))
    legend.append(Line2D([], [], color=VESSEL, marker=">", lw=0, ms=9, label="Vessel now"))
    legend_box = ax.legend(
        handles=legend, loc=_legend_corner(ax, allxy), fontsize=7.5, framealpha=0.85, borderpad=0.5
    )
    taken.add(legend_box.get_window_extent(renderer))
    label_style = dict(
        fontsize=8.5,
        zorder=8,
        bbox=dict(boxstyle="round,pad=0.2", facecolor="white", edgecolor="none", alpha=0.8),
    )
    if len(port_xy):
        ax.scatter(
            port_xy[:, 0], port_xy[:, 1], s=46, color="white", edgecolors=PORT, linewidths=1.8, zorder=6
        )
    labels = []
    for port in route_port_labels(port_rows):
        x = float(wrap_to_frame(np.array([port.lon]), lon0)[0])
        place_label(
            ax, renderer, (x, port.lat), port.text, taken, PORT_OFFSETS,
            color=PORT, fontweight="bold", **label_style,
        )  # fmt: skip
        labels.append(port.text)
    vessel_names = _column(vessel_rows, "vessel_name", "")
    headings = _column(vessel_rows, "vessel_location_heading")
    for (x, y), row in zip(vessel_xy, vessel_of, strict=True):
        name, heading = vessel_names[row], headings[row]
        ax.scatter(
            [x],
            [y],
            s=150,
            marker=_vessel_marker(heading),
            color=VESSEL,
            edgecolors="white",
            linewidths=1.0,
            zorder=7,
        )
        if name:
            place_label(
                ax, renderer, (x, y), str(name), taken, VESSEL_OFFSETS, color=VESSEL, fontstyle="italic",
                **label_style,
            )  # fmt: skip
            labels.append(str(name))
    size = _save(fig, out_path, dpi)
    return RenderResult(out_path, tuple(float(v) for v in extent), lon0, size, title, tuple(labels))


def overview_title(containers: int, containers_at_sea: int, vessels_at_sea: int) -> str:
    """The overview's title from what it draws: routes of `containers` containers, `containers_at_sea` of
    them on board `vessels_at_sea` vessels (one marker a vessel; several containers often sail on one)."""

    def count(n: int, noun: str) -> str:
        return f"{n} {noun}" if n == 1 else f"{n} {noun}s"

    routes = f"All routes: {count(containers, 'container')}"
    if not containers_at_sea:
        return f"{routes}, none at sea"
    return f"{routes}, {containers_at_sea} at sea on {count(vessels_at_sea, 'vessel')}"


def _vessels(frame: gpd.GeoDataFrame, rows: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Of the current_vessel features at `rows` (positions in `frame`, with a point), one known position
    per vessel (its id, else its name, else the position itself), in order of first appearance; also the
    containers of the features with a known position."""
    known, xy = point_positions(frame.geometry.values[rows])
    rows = rows[known]
    ids, names = _column(frame, "vessel_id"), _column(frame, "vessel_name")
    first: dict[object, int] = {}
    for i, (row, (x, y)) in enumerate(zip(rows, xy, strict=True)):
        first.setdefault(ids[row] or names[row] or (x, y), i)
    return xy[list(first.values())], np.asarray(_column(frame, "container_id"), dtype=object)[rows]


def render_overview(
    all_features_gdf: gpd.GeoDataFrame,
    land_gdf: gpd.GeoDataFrame | None,
    out_path: str | Path,
    title: str | None = None,
    *,
    figsize: tuple[float, float] = OVERVIEW_FIGSIZE,
    dpi: int = OVERVIEW_DPI,
) -> RenderResult:
    """Every route (thin translucent lines: solid travelled, dashed estimated), the ports (labelled by
    name where a label fits, the most called first) and one marker per vessel at sea, on one map centred
    on the fleet and cut where the fewest routes and least land are (`pipelines.geo.frame.frame_center`).

    The result's `counts` are what is drawn: `containers` (with a route line), `containers_at_sea` (with
    a current vessel position), `vessels_at_sea` (vessel markers) and `ports` (port places); the default
    title says them (`overview_title`)."""
    out_path = Path(out_path)
    frame = all_features_gdf
    if {"container_id", "feature_index"} <= set(frame.columns):
        frame = frame.sort_values(["container_id", "feature_index"])
    geoms = np.asarray(frame.geometry.values, dtype=object)
    kinds = np.asarray(_column(frame, "feature_type", ""), dtype=object)
    points = ~shapely.is_missing(geoms) & (shapely.get_type_id(geoms) == 0)
    land = _land_polygons(land_gdf)
    lon0 = frame_center(geoms, land)

    fig, ax, box_aspect = _new_figure(figsize, dpi)
    line_idx = np.flatnonzero(np.isin(kinds, LINE_TYPES))
    paths, owner = lines_in_frame(geoms[line_idx], lon0)
    owner_kind = kinds[line_idx][owner] if len(owner) else np.empty(0, dtype=object)
    past = [p for p, k in zip(paths, owner_kind, strict=True) if k == "past_vessel_locations"]
    est = [p for p, k in zip(paths, owner_kind, strict=True) if k != "past_vessel_locations"]
    if est:
        ax.add_collection(
            LineCollection(
                est, colors=ESTIMATED, linewidths=0.7, alpha=0.35, linestyles=(0, (4, 3)), zorder=4.5
            )
        )
    if past:
        ax.add_collection(LineCollection(past, colors=PAST, linewidths=0.8, alpha=0.4, zorder=4))

    _, port_xy = point_positions(geoms[(kinds == "port") & points])
    port_xy[:, 0] = wrap_to_frame(port_xy[:, 0], lon0)
    if len(port_xy):
        ax.scatter(
            port_xy[:, 0], port_xy[:, 1], s=10, color="white", edgecolors=PORT, linewidths=0.7, zorder=5
        )
    vessel_xy, at_sea = _vessels(frame, np.flatnonzero((kinds == "current_vessel") & points))
    vessel_xy[:, 0] = wrap_to_frame(vessel_xy[:, 0], lon0)
    if len(vessel_xy):
        ax.scatter(
            vessel_xy[:, 0], vessel_xy[:, 1], s=28, color=VESSEL, edgecolors="white", linewidths=0.6, zorder=6
        )

    drawn = [*paths, port_xy, vessel_xy]
    allxy = np.concatenate(drawn)
    if len(allxy):
        bounds = (allxy[:, 0].min(), allxy[:, 1].min(), allxy[:, 0].max(), allxy[:, 1].max())
    else:
        bounds = (lon0 - 180.0, -60.0, lon0 + 180.0, 80.0)
    extent, _ = fit_extent(bounds, box_aspect, margin=0.04)
    _draw_land(ax, land, extent)
    _style_axes(ax, extent)
    routed = np.asarray(_column(frame, "container_id"), dtype=object)[line_idx[owner]]
    counts = {
        "containers": len({c for c in routed if c is not None}),
        "containers_at_sea": len({c for c in at_sea if c is not None}),
        "vessels_at_sea": len(vessel_xy),
    }
    title = title or overview_title(**counts)
    ax.set_title(title, fontsize=12, loc="left", pad=8)
    legend = [
        Line2D([], [], color=PAST, lw=1.2, alpha=0.7, label="Travelled"),
        Line2D([], [], color=ESTIMATED, lw=1.2, ls=(0, (4, 3)), alpha=0.7, label="Estimated"),
        Line2D([], [], color=PORT, marker="o", mfc="white", lw=0, ms=4, label="Port"),
        Line2D([], [], color=VESSEL, marker="o", lw=0, ms=6, label="Vessel now"),
    ]
    legend_box = ax.legend(handles=legend, loc="lower left", fontsize=7.5, framealpha=0.85)
    renderer = FigureCanvasAgg(fig).get_renderer()
    taken = TakenBoxes.around(ax.transData.transform(np.concatenate([port_xy, vessel_xy])), 3.0)
    taken.add(legend_box.get_window_extent(renderer))
    ports = overview_port_labels(frame[kinds == "port"])
    counts["ports"] = len(ports)
    labels = []
    box = dict(boxstyle="round,pad=0.1", facecolor="white", edgecolor="none", alpha=0.7)
    style = dict(fontsize=6.5, color=PORT, zorder=7, bbox=box)
    for port in ports:
        x = float(wrap_to_frame(np.array([port.lon]), lon0)[0])
        if place_label(
            ax, renderer, (x, port.lat), port.text, taken, OVERVIEW_PORT_OFFSETS, required=False, **style
        ):
            labels.append(port.text)
    size = _save(fig, out_path, dpi)
    return RenderResult(out_path, tuple(float(v) for v in extent), lon0, size, title, tuple(labels), counts)


def render_route_with_land(features_gdf: gpd.GeoDataFrame, out_path: str | Path, title: str) -> RenderResult:
    """`render_container_route` over the vendored land outline (read once per process): the unit of work
    of a pool of drawing processes, which cannot be handed the outline cheaply with every map."""
    return render_container_route(features_gdf, load_land(), out_path, title)
