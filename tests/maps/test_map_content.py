"""What the map files say: the GeoParquet's primary geometry split at the antimeridian (the unsplit line
kept beside it), titles that count what is drawn and name it right, ports labelled by name, and a frame
cut where the fewest routes and the least land are."""

from __future__ import annotations

import json

import geopandas as gpd
import numpy as np
import pyarrow.parquet as pq
import pytest
import shapely

from assets.maps import OVERVIEW_COLUMNS, containers_at_sea, read_map_features, route_title
from pipelines.geo.frame import frame_center, lines_in_frame, load_land, overview_port_labels
from pipelines.geo.render import render_container_route, render_overview
from tests.support.dagster import map_metadata, query_rows


def _lines_jumping_over_180(geoms) -> int:
    """How many (multi)lines have two consecutive vertices of one part more than 180° of longitude apart."""
    jumping = 0
    for geom in geoms:
        if geom is None or shapely.get_type_id(geom) not in (1, 5):
            continue
        parts = shapely.get_parts(geom)
        jumping += any((np.abs(np.diff(shapely.get_coordinates(p)[:, 0])) > 180).any() for p in parts)
    return jumping


# ---- GeoParquet ----------------------------------------------------------------------------------------


@pytest.mark.slow
def test_geoparquet_primary_geometry_is_the_antimeridian_split_one(map_warehouse, materialized):
    _, data_dir = materialized
    path = data_dir / "map_features.parquet"
    geo = json.loads(pq.read_metadata(path).metadata[b"geo"])
    schema_order = [name for name in pq.read_schema(path).names if name in geo["columns"]]

    assert geo["primary_column"] == "geometry_split"
    assert schema_order == ["geometry_split", "geometry"]  # the first geometry column, and the unsplit one
    for column in geo["columns"].values():
        assert column["crs"]["id"] == {"authority": "EPSG", "code": 4326}
    assert gpd.read_parquet(path).geometry.name == "geometry_split"

    table = pq.read_table(path, columns=["container_id", "feature_index", "geometry_split", "geometry"])
    primary = shapely.from_wkb(table["geometry_split"].to_pylist())
    unsplit = shapely.from_wkb(table["geometry"].to_pylist())
    assert _lines_jumping_over_180(unsplit) > 0, "the sandbox should have routes over the antimeridian"
    assert _lines_jumping_over_180(primary) == 0

    source = {
        (container_id, index): wkb
        for container_id, index, wkb in query_rows(
            map_warehouse, "select container_id, feature_index, geometry from ocean_tracking.map_features"
        )
    }
    keys = list(zip(table["container_id"].to_pylist(), table["feature_index"].to_pylist(), strict=True))
    assert sorted(keys) == sorted(source)
    expected = shapely.from_wkb([source[key] for key in keys])
    assert (shapely.is_missing(unsplit) == shapely.is_missing(expected)).all()
    present = ~shapely.is_missing(expected)
    assert shapely.equals_exact(unsplit[present], expected[present], tolerance=0).all()
    # the split line keeps every vertex of the unsplit one (and adds the crossings at +/-180)
    assert (shapely.is_missing(primary) == shapely.is_missing(expected)).all()
    assert (shapely.get_num_coordinates(primary) >= shapely.get_num_coordinates(unsplit)).all()


# ---- titles and counts ---------------------------------------------------------------------------------


def test_overview_title_counts_containers_and_vessels_apart(tmp_path):
    line, at, port = shapely.LineString([(0, 0), (10, 5)]), shapely.Point(10, 5), shapely.Point(4, 52)
    features = gpd.GeoDataFrame(
        {
            "container_id": ["a", "a", "b", "b", "c", "d"],
            "feature_index": [0, 1, 0, 1, 0, 0],
            "feature_type": ["past_vessel_locations", "current_vessel"] * 2 + ["estimated_full_legs", "port"],
            "vessel_id": [None, "v1", None, "v1", None, None],  # two containers on board one vessel
            "vessel_name": [None, "EVER GIVEN", None, "EVER GIVEN", None, None],
            "name": [None, None, None, None, None, "Rotterdam"],
            "location_id": [None, None, None, None, None, "p1"],
        },
        geometry=[line, at, line, at, line, port],
        crs="EPSG:4326",
    )

    result = render_overview(features, None, tmp_path / "overview.png")

    assert result.title == "All routes: 3 containers, 2 at sea on 1 vessel"
    assert dict(result.counts) == {"containers": 3, "containers_at_sea": 2, "vessels_at_sea": 1, "ports": 1}
    assert result.labels == ("Rotterdam",)


def test_overview_reports_containers_at_sea_and_vessels_as_the_warehouse_counts_them(map_warehouse, materialized):
    result, _ = materialized
    [(routed, at_sea, vessels, ports)] = query_rows(
        map_warehouse,
        "select count(distinct container_id) filter (where feature_type not in ('port', 'current_vessel')), "
        "count(distinct container_id) filter (where feature_type = 'current_vessel'), "
        "count(distinct vessel_id) filter (where feature_type = 'current_vessel'), "
        "count(distinct location_id) filter (where feature_type = 'port' and name is not null) "
        "from ocean_tracking.map_features where geometry is not null",
    )
    assert vessels < at_sea, "the sandbox should have vessels carrying several containers"

    meta = map_metadata(result, "routes_overview")

    assert (meta["containers"], meta["containers_at_sea"], meta["vessels_at_sea"]) == (
        routed,
        at_sea,
        vessels,
    )
    assert meta["ports"] == ports
    assert 0 < meta["ports_labelled"] <= ports


@pytest.mark.slow
def test_route_title_names_the_container_its_vessel_and_its_first_and_last_port(map_warehouse):
    features = read_map_features(map_warehouse, in_transit_only=True)
    at_sea = containers_at_sea(map_warehouse)
    for container_id in sorted(at_sea)[:5]:
        [(vessel, pol, pod)] = query_rows(
            map_warehouse,
            "select any_value(vessel_name) filter (where feature_type = 'current_vessel'), "
            "any_value(name) filter (where label = 'POL'), any_value(name) filter (where label = 'POD') "
            "from ocean_tracking.map_features where container_id = ?",
            [container_id],
        )
        number = at_sea[container_id][0]

        title = route_title(features[features["container_id"] == container_id], number)

        assert title == f"{number} · {vessel} · {pol} → {pod}"


# ---- port labels ---------------------------------------------------------------------------------------


@pytest.mark.slow
def test_overview_labels_each_port_once_by_name_the_most_called_first(map_warehouse, tmp_path):
    features = read_map_features(map_warehouse, columns=OVERVIEW_COLUMNS)  # what the overview asset reads
    called = query_rows(
        map_warehouse,
        "select any_value(name), count(*) from ocean_tracking.map_features "
        "where feature_type = 'port' and name is not null and geometry is not null "
        "group by location_id order by count(*) desc, any_value(name)",
    )

    labels = overview_port_labels(features[features["feature_type"] == "port"])

    assert [(label.text, label.calls) for label in labels] == called
    drawn = render_overview(features, load_land(), tmp_path / "overview.png").labels
    names = {name for name, _ in called}
    assert set(drawn) <= names
    assert len(drawn) >= len(names) / 2  # most are named; a label that would hide another is left out
    assert called[0][0] in drawn


@pytest.mark.slow
def test_route_map_labels_every_port_with_its_role_and_name(map_warehouse, tmp_path):
    features = read_map_features(map_warehouse, in_transit_only=True)
    land = load_land()
    for container_id in sorted(containers_at_sea(map_warehouse))[:5]:
        ports = [
            text
            for (text,) in query_rows(
                map_warehouse,
                "select label || ' ' || name from ocean_tracking.map_features "
                "where container_id = ? and feature_type = 'port' order by feature_index",
                [container_id],
            )
        ]
        route = features[features["container_id"] == container_id]

        result = render_container_route(route, land, tmp_path / f"{container_id}.png", container_id)

        assert ports
        assert [text for text in result.labels if text in ports] == ports  # the others name the vessel


# ---- the frame's seam ----------------------------------------------------------------------------------


def _cuts(geoms: np.ndarray, lon0: float) -> int:
    """How many more pieces the lines fall into in the frame centred on lon0 than they have parts."""
    paths, _ = lines_in_frame(geoms, lon0)
    return len(paths) - len(shapely.get_parts(geoms))


def test_a_map_round_the_world_is_cut_where_the_fewest_routes_cross():
    """A route round the world except 88°E..112°E, and a busy lane of five lines over that band: every
    meridian is crossed, and the seam should cut the one route, not the five."""
    ring = shapely.MultiLineString([[(x, 0.0) for x in range(112, 181)], [(x, 0.0) for x in range(-180, 89)]])
    lane = [shapely.LineString([(x, float(y)) for x in range(88, 113, 2)]) for y in range(1, 6)]
    geoms = np.array([ring, *lane], dtype=object)

    assert _cuts(geoms, frame_center(geoms)) == 1


@pytest.mark.parametrize("box", [(-100, -50, 100, 50), (30, -40, 150, 60)])
def test_a_map_round_the_world_is_cut_through_the_ocean_when_routes_cross_everywhere_alike(box):
    ring = shapely.LineString([(x, 0.0) for x in range(-180, 181)])  # crosses every meridian once
    land = np.array([shapely.box(*box)], dtype=object)

    seam = (frame_center(np.array([ring], dtype=object), land) - 180.0 + 180.0) % 360.0 - 180.0

    assert not box[0] <= seam <= box[2]
