"""Degenerate geometry never stops a map: a line of two identical points (the service sends them for a
vessel that stayed put), a line with unknown positions, an empty or missing geometry, a part of zero length
left by the antimeridian split. What each means is `pipelines.geo.frame`'s to decide (its module docstring);
here: the frame, the renderers, and the map assets over a warehouse whose `map_features` hold such lines,
where one container's map that still cannot be drawn is reported while the others are drawn."""

from __future__ import annotations

import struct

import geopandas as gpd
import numpy as np
import pyarrow as pa
import pytest
import shapely

from assets.maps import containers_at_sea, route_files
from pipelines.geo.frame import (
    frame_center,
    line_runs,
    lines_in_frame,
    load_land,
    point_positions,
    seam_longitude,
)
from pipelines.geo.render import features_frame, render_container_route, render_overview
from tests.support.dagster import map_metadata, materialize_maps, query_rows, warehouse_resource
from tests.support.lakes import lake_in

VALENCIA = (-0.32, 39.44)
# As the service sent it (issue 31): the past track of a vessel at berth between two position reports.
STAY = shapely.LineString([VALENCIA, VALENCIA])
NAN = float("nan")

with np.errstate(invalid="ignore"):  # shapely warns of the NaN these lines are made to hold
    NAN_LINE = shapely.linestrings([[0, 0], [NAN, 1], [3, 3]])
    NAN_ONLY = shapely.linestrings([[NAN, NAN], [NAN, NAN]])
    NAN_POINT = shapely.points([NAN, NAN])
    CUT_LINE = shapely.linestrings([[0, 0], [1, 1], [NAN, 5], [2, 2], [3, 3], [1e300, 0]])

DEGENERATE_LINES = {
    "two identical points": STAY,
    "three identical points": shapely.LineString([VALENCIA, VALENCIA, VALENCIA]),
    "a zero-length part left by the antimeridian split": shapely.MultiLineString(
        [[(180, 1), (180, 1)], [(-180, 1), (-170, 2)]]
    ),
    "an empty line": shapely.from_wkt("LINESTRING EMPTY"),
    "an empty collection": shapely.from_wkt("GEOMETRYCOLLECTION EMPTY"),
    "no geometry": None,
    "a NaN vertex": NAN_LINE,
    "only NaN": NAN_ONLY,
    "an infinite vertex": shapely.linestrings([[0, 0], [np.inf, 1], [3, 3]]),
    "a longitude out of range": shapely.linestrings([[0, 0], [1e300, 0], [3, 3]]),
}

# A route round the world except 88°E..112°E: the frame's seam is then chosen by `seam_longitude`.
ROUND_THE_WORLD = shapely.MultiLineString(
    [[(x, 0.0) for x in range(112, 181)], [(x, 0.0) for x in range(-180, 89)]]
)


def _geoms(*geoms) -> np.ndarray:
    return np.array(list(geoms), dtype=object)


# ---- the frame -------------------------------------------------------------------------------------------


def test_a_line_that_stays_at_one_place_frames_a_map_as_the_point_it_is():
    shanghai_busan = shapely.LineString([(121.5, 31.2), (129.0, 35.1)])

    assert frame_center(_geoms(STAY)) == pytest.approx(VALENCIA[0])
    assert frame_center(_geoms(shanghai_busan, STAY)) == frame_center(_geoms(shanghai_busan, shapely.Point(VALENCIA)))
    assert seam_longitude(_geoms(ROUND_THE_WORLD, STAY)) == seam_longitude(_geoms(ROUND_THE_WORLD))
    paths, owner = lines_in_frame(_geoms(shanghai_busan, STAY), 0.0)
    assert [p.tolist() for p in paths][1] == [list(VALENCIA), list(VALENCIA)]  # zero length: frames, draws nothing
    assert owner.tolist() == [0, 1]


@pytest.mark.parametrize("name", DEGENERATE_LINES)
def test_a_degenerate_line_never_stops_the_frame(name):
    line = DEGENERATE_LINES[name]
    shanghai_la = shapely.LineString([(121.5, 31.2), (-118.2, 33.7)])

    alone = frame_center(_geoms(line))
    with_route = frame_center(_geoms(shanghai_la, line))
    round_the_world = frame_center(_geoms(ROUND_THE_WORLD, line))
    paths, _ = lines_in_frame(_geoms(shanghai_la, line), with_route)

    assert np.isfinite([alone, with_route, round_the_world]).all()
    assert all(np.isfinite(path).all() and len(path) >= 2 for path in paths)
    if name in ("an empty line", "an empty collection", "no geometry", "only NaN"):  # nothing to show
        assert (alone, with_route) == (0.0, frame_center(_geoms(shanghai_la)))
        assert round_the_world == frame_center(_geoms(ROUND_THE_WORLD))


def test_a_line_is_cut_at_its_unknown_positions():
    coords, lengths, owner = line_runs(_geoms(None, CUT_LINE))
    single, _, _ = line_runs(_geoms(NAN_LINE))

    assert coords.tolist() == [[0, 0], [1, 1], [2, 2], [3, 3]]
    assert lengths.tolist() == [2, 2] and owner.tolist() == [1, 1]
    assert single.tolist() == [[0, 0], [0, 0], [3, 3], [3, 3]]  # a run of one vertex: the point it is


def test_point_positions_are_the_known_ones():
    geoms = _geoms(
        shapely.Point(1, 2),
        shapely.from_wkt("POINT EMPTY"),
        NAN_POINT,
        None,
        shapely.MultiPoint([(3, 4), (NAN, 0)]),
        shapely.Point(1, 95),
    )

    owner, xy = point_positions(geoms)

    assert owner.tolist() == [0, 4] and xy.tolist() == [[1, 2], [3, 4]]


def test_a_geometry_that_cannot_be_read_is_taken_as_missing():
    one_point_line = struct.pack("<BII", 1, 2, 1) + struct.pack("<dd", 1.0, 2.0)  # WKB GEOS refuses
    table = pa.table({"feature_type": ["past_vessel_locations", "port"],
                      "geometry": [one_point_line, shapely.to_wkb(shapely.Point(1, 2))]})  # fmt: skip

    frame = features_frame(table)

    assert frame.geometry.isna().tolist() == [True, False]


# ---- the renderers -------------------------------------------------------------------------------------


def _features(rows: list[tuple[str, str, object]]) -> gpd.GeoDataFrame:
    """(container id, feature type, geometry) rows as `features_frame` makes them."""
    return gpd.GeoDataFrame(
        {
            "container_id": [container for container, _, _ in rows],
            "feature_index": list(range(len(rows))),
            "feature_type": [kind for _, kind, _ in rows],
            "name": ["Valencia" if kind == "port" else None for _, kind, _ in rows],
            "label": ["POD" if kind == "port" else None for _, kind, _ in rows],
            "vessel_name": ["MSC STAY" if kind == "current_vessel" else None for _, kind, _ in rows],
        },
        geometry=[geometry for _, _, geometry in rows],
        crs="EPSG:4326",
    )


def test_the_renderers_draw_a_route_whatever_degenerate_geometry_it_holds(tmp_path):
    route = [
        ("c1", "port", shapely.Point(VALENCIA)),
        ("c1", "past_vessel_locations", shapely.LineString([(3.0, 38.0), VALENCIA])),
        ("c1", "current_vessel", shapely.Point(VALENCIA)),
        ("c1", "current_vessel", shapely.from_wkt("POINT EMPTY")),
        ("c1", "current_vessel", NAN_POINT),
        ("c1", "port", NAN_POINT),
        *(("c1", "past_vessel_locations", line) for line in DEGENERATE_LINES.values()),
        ("c2", "past_vessel_locations", STAY),
        ("c2", "current_vessel", shapely.from_wkt("POINT EMPTY")),
    ]
    features = _features(route)
    land = load_land()

    one = render_container_route(features[features["container_id"] == "c1"], land, tmp_path / "c1.png", "c1")
    overview = render_overview(features, land, tmp_path / "overview.png")

    assert one.path.is_file() and overview.path.is_file()
    assert one.labels == ("POD Valencia", "MSC STAY")  # the vessel with a position is drawn and named
    xmin, xmax, ymin, ymax = one.extent
    assert xmin < VALENCIA[0] < xmax and ymin < VALENCIA[1] < ymax
    assert overview.counts["containers"] == 2  # c2's route is a stay at Valencia
    assert overview.counts["containers_at_sea"] == overview.counts["vessels_at_sea"] == 1


# ---- the map assets ------------------------------------------------------------------------------------


@pytest.mark.slow
def test_the_map_assets_succeed_on_degenerate_lines_and_report_a_map_they_cannot_draw(map_warehouse, tmp_path):
    """The maps' warehouse cut to three containers at sea, in a lake of its own: one's past track is the
    service's line of two identical points (and a leg has an unknown position), one map cannot be written
    (a folder stands where its PNG goes), one is plain. The GeoParquet, the overview and two route maps
    are written; the third is reported, not raised."""
    stay, blocked, plain = sorted(containers_at_sea(map_warehouse))[:3]
    data_dir = tmp_path / "data"
    with lake_in(data_dir).writing(), lake_in(data_dir).connect() as con:
        # what the maps read, of three containers (`copy_lake` copies every table: seconds more)
        con.execute(f"attach 'ducklake:sqlite:{map_warehouse.store().catalog_file}' as source (read_only)")
        con.execute("create schema ocean_tracking")
        for table, key in (("map_features", "container_id"), ("containers", "id")):
            con.execute(
                f"create table ocean_tracking.{table} as select * from source.ocean_tracking.{table} "
                f"where {key} in (?, ?, ?)",
                [stay, blocked, plain],
            )
        con.execute(
            "update ocean_tracking.map_features set geometry = ?, geometry_split = ? "
            "where container_id = ? and feature_type = 'past_vessel_locations'",
            [shapely.to_wkb(STAY), shapely.to_wkb(STAY), stay],
        )
        nan_leg = shapely.to_wkb(NAN_LINE)
        con.execute(
            "update ocean_tracking.map_features set geometry = ?, geometry_split = ? "
            "where container_id = ? and feature_type = 'estimated_full_legs'",
            [nan_leg, nan_leg, stay],
        )
    warehouse = warehouse_resource(data_dir)
    files = route_files(containers_at_sea(warehouse))
    routes = tmp_path / "out" / "maps" / "routes"
    (routes / files[blocked]).mkdir(parents=True)

    result = materialize_maps(warehouse, tmp_path / "out")

    assert result.success
    route_maps = map_metadata(result, "route_maps")
    assert (route_maps["count"], route_maps["failed"]) == (2, 1)
    assert list(route_maps["failed_maps"]) == [files[blocked]]
    assert route_maps["failed_maps"][files[blocked]].startswith("IsADirectoryError: ")
    assert (routes / files[stay]).is_file() and (routes / files[plain]).is_file()
    assert not list(routes.glob(".*"))  # no partial file left behind
    assert map_metadata(result, "routes_overview")["containers_at_sea"] == 3
    [(rows,)] = query_rows(warehouse, "select count(*) from ocean_tracking.map_features")
    assert map_metadata(result, "map_features_geoparquet")["rows"] == rows
