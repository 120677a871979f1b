"""Map pictures and files: the `maps` Dagster assets over a warehouse synced from the REAL sandbox, and the
renderer's antimeridian handling, land outline and determinism."""

from __future__ import annotations

import json
import os
import shutil
from pathlib import Path

import geopandas as gpd
import matplotlib.image as mpimg
import numpy as np
import pyarrow.parquet as pq
import pytest
import shapely

import assets.maps
from assets.maps import containers_at_sea, read_map_features, route_files
from assets.resources import Warehouse
from pipelines.geo.frame import LAND_PATH, central_longitude, lines_in_frame, load_land, wrap_to_frame
from pipelines.geo.render import (
    OVERVIEW_DPI,
    OVERVIEW_FIGSIZE,
    ROUTE_DPI,
    ROUTE_FIGSIZE,
    render_container_route,
)
from pipelines.warehouse.maintenance import backup_lake, restore_lake
from tests.support.dagster import map_metadata, materialize_maps, query_rows, warehouse_resource
from tests.support.lakes import lake_in

ROUTE_PX = (round(ROUTE_FIGSIZE[1] * ROUTE_DPI), round(ROUTE_FIGSIZE[0] * ROUTE_DPI))  # rows, columns
OVERVIEW_PX = (round(OVERVIEW_FIGSIZE[1] * OVERVIEW_DPI), round(OVERVIEW_FIGSIZE[0] * OVERVIEW_DPI))


def _png(path: Path) -> np.ndarray:
    assert path.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", path
    return mpimg.imread(path)


@pytest.mark.slow
def test_geoparquet_reads_back_with_every_feature(map_warehouse, materialized):
    result, data_dir = materialized
    path = data_dir / "map_features.parquet"
    [(rows,)] = query_rows(map_warehouse, "select count(*) from ocean_tracking.map_features")
    assert rows > 0

    frame = gpd.read_parquet(path)

    assert frame.crs.to_epsg() == 4326
    assert len(frame) == rows
    meta = map_metadata(result, "map_features_geoparquet")
    assert meta["rows"] == rows
    assert meta["bytes"] == path.stat().st_size
    assert meta["path"] == str(path)


def test_geoparquet_footer_records_epsg_4326_as_projjson(materialized):
    """GIS tools read the CRS from the file's `geo` metadata: each geometry column's `crs` is EPSG:4326's
    PROJJSON (without one, readers assume OGC:CRS84 and report no EPSG code). The primary column, the one
    they draw, is the antimeridian-split geometry."""
    _, data_dir = materialized
    geo = json.loads(pq.read_metadata(data_dir / "map_features.parquet").metadata[b"geo"])

    assert geo["primary_column"] == "geometry_split"
    assert set(geo["columns"]) == {"geometry", "geometry_split"}
    for column in geo["columns"].values():
        assert column["encoding"] == "WKB"
        assert column["crs"]["type"] == "GeographicCRS"
        assert column["crs"]["id"] == {"authority": "EPSG", "code": 4326}


@pytest.mark.slow
def test_one_route_map_per_container_at_sea(map_warehouse, materialized):
    result, data_dir = materialized
    folder = data_dir / "maps" / "routes"
    expected = sorted(
        n
        for (n,) in query_rows(
            map_warehouse,
            "select c.number from ocean_tracking.containers c where c.id in (select container_id from "
            "ocean_tracking.map_features where feature_type = 'current_vessel')",
        )
    )
    assert expected, "the sandbox should have containers at sea"
    assert len(set(expected)) == len(expected)

    pngs = sorted(folder.glob("*.png"))

    assert [p.stem for p in pngs] == expected
    for path in pngs:
        image = _png(path)
        assert image.shape[:2] == ROUTE_PX
        assert float(image[..., :3].var()) > 0.0
    meta = map_metadata(result, "route_maps")
    assert meta["count"] == len(expected)
    assert meta["folder"] == str(folder)
    assert meta["preview"].startswith("![") and "data:image/png;base64," in meta["preview"]


def test_overview_written_and_not_blank(materialized):
    result, data_dir = materialized
    path = data_dir / "maps" / "overview.png"

    image = _png(path)

    assert image.shape[:2] == OVERVIEW_PX
    assert float(image[..., :3].var()) > 0.0
    meta = map_metadata(result, "routes_overview")
    assert meta["path"] == str(path)
    assert "data:image/png;base64," in meta["preview"]


def _files(folder: Path) -> dict[str, tuple[int, bytes]]:
    """Every file under the folder: modification time (ns) and bytes."""
    return {
        str(path.relative_to(folder)): (path.stat().st_mtime_ns, path.read_bytes())
        for path in sorted(folder.rglob("*"))
        if path.is_file()
    }


@pytest.mark.slow
def test_a_second_run_with_no_change_rewrites_nothing(map_warehouse, materialized):
    _, data_dir = materialized
    before = _files(data_dir)

    result = materialize_maps(map_warehouse, data_dir)

    assert result.success
    assert _files(data_dir) == before
    assert map_metadata(result, "map_features_geoparquet")["skipped_unchanged"] is True
    routes = map_metadata(result, "route_maps")
    assert routes["skipped_unchanged"] is True
    assert routes["rendered"] == routes["removed"] == 0
    assert routes["count"] == routes["unchanged"] == len(list((data_dir / "maps" / "routes").glob("*.png")))
    overview = map_metadata(result, "routes_overview")
    assert overview["skipped_unchanged"] is True
    assert overview["containers"] == map_metadata(materialized[0], "routes_overview")["containers"]


@pytest.fixture
def changed_copy(map_warehouse, materialized, tmp_path) -> tuple[Warehouse, Path, dict[str, str]]:
    """A copy of the synced lake (backup and restore) in which one container at sea had its map refreshed
    (its rows swapped under a new load id, as dlt's merge does) and another's map went away, with a copy of
    the files the first run made from the original."""
    copy_dir = tmp_path / "copy"
    backup_lake(map_warehouse.store(), tmp_path / "backup", journal=tmp_path / "no-journal.sqlite")
    restore_lake(tmp_path / "backup", lake_in(copy_dir), journal=copy_dir / "no-journal.sqlite")
    store = lake_in(copy_dir)
    refreshed, gone, lost = sorted(containers_at_sea(map_warehouse))[:3]
    with store.writing(), store.connect() as con:
        con.execute(
            "insert into ocean_tracking.map_features select * replace ('9999999999.000001' as _dlt_load_id) "
            "from ocean_tracking.map_features where container_id = ?",
            [refreshed],
        )
        con.execute(
            "delete from ocean_tracking.map_features where container_id = ? and _dlt_load_id <> '9999999999.000001'",
            [refreshed],
        )
        con.execute("delete from ocean_tracking.map_features where container_id = ?", [gone])
    out = tmp_path / "out"
    shutil.copytree(materialized[1], out)  # copy2: modification times kept
    files = route_files(containers_at_sea(map_warehouse))
    (out / "maps" / "routes" / files[lost]).unlink()  # a map the manifest lists, deleted by hand
    return warehouse_resource(copy_dir), out, {"refreshed": files[refreshed], "gone": files[gone], "lost": files[lost]}


@pytest.mark.slow
def test_only_changed_maps_are_redrawn_and_gone_ones_removed(changed_copy):
    warehouse, out, names = changed_copy
    routes = out / "maps" / "routes"
    before = _files(out)

    result = materialize_maps(warehouse, out)

    assert result.success
    after = _files(out)
    redrawn = {name for name in before.keys() & after.keys() if before[name][0] != after[name][0]}
    assert redrawn == {
        "map_features.parquet", "maps/overview.png", "maps/overview.json", "maps/routes/manifest.json",
        f"maps/routes/{names['refreshed']}",
    }  # fmt: skip
    assert set(before) - set(after) == {f"maps/routes/{names['gone']}"}
    assert set(after) - set(before) == {f"maps/routes/{names['lost']}"}
    meta = map_metadata(result, "route_maps")
    assert (meta["rendered"], meta["removed"], meta["skipped_unchanged"]) == (2, 1, False)
    assert meta["count"] == len(list(routes.glob("*.png"))) == meta["unchanged"] + 2
    assert map_metadata(result, "routes_overview")["skipped_unchanged"] is False
    geoparquet = map_metadata(result, "map_features_geoparquet")
    assert geoparquet["skipped_unchanged"] is False
    [(rows,)] = query_rows(warehouse, "select count(*) from ocean_tracking.map_features")
    assert geoparquet["rows"] == rows == len(gpd.read_parquet(out / "map_features.parquet"))


def test_trans_pacific_route_is_drawn_continuous_not_across_the_world(map_warehouse, tmp_path):
    features = read_map_features(map_warehouse, in_transit_only=True)
    lines = features[features["feature_type"] != "port"]
    crossing = sorted(set(lines.loc[shapely.get_type_id(lines.geometry.values) == 5, "container_id"]))
    assert crossing, "the sandbox should have a container at sea on a route over the antimeridian"

    for container_id in crossing[:3]:
        route = features[features["container_id"] == container_id]
        naive_span = route.total_bounds[2] - route.total_bounds[0]  # the split geometry on a -180..180 frame
        rendered = render_container_route(route, load_land(), tmp_path / f"{container_id}.png", container_id)

        assert naive_span > 300
        assert rendered.lon_span < 200
        xmin, xmax, _, _ = rendered.extent
        assert xmin < 180 < xmax  # the antimeridian is inside the map, not at its edges
        image = _png(rendered.path)
        assert image.shape[:2] == ROUTE_PX


def test_rendering_is_deterministic(map_warehouse, tmp_path):
    features = read_map_features(map_warehouse, in_transit_only=True)
    container_id = sorted(features["container_id"].unique())[0]
    route = features[features["container_id"] == container_id]
    land = load_land()

    first = render_container_route(route, land, tmp_path / "a.png", "same")
    second = render_container_route(route, land, tmp_path / "b.png", "same")

    assert first.path.read_bytes() == second.path.read_bytes()
    assert first.extent == second.extent


@pytest.mark.slow
def test_worker_processes_draw_the_same_maps_as_the_run_itself(map_warehouse, materialized, tmp_path, monkeypatch):
    _, data_dir = materialized
    in_process = {name: data for name, (_, data) in _files(data_dir / "maps" / "routes").items()}
    monkeypatch.setattr(assets.maps, "MAPS_PER_PROCESS", 1)  # a pool for any two maps
    monkeypatch.setattr(os, "cpu_count", lambda: 2)  # and two workers, on a one-core machine too
    with assets.maps.drawing_pool(2) as pool:
        assert pool._max_workers >= 2
    result = materialize_maps(map_warehouse, tmp_path / "pooled")
    assert result.success
    pooled = {name: data for name, (_, data) in _files(tmp_path / "pooled" / "maps" / "routes").items()}
    assert pooled.keys() == in_process.keys() and len(pooled) > 2
    pngs = [name for name in pooled if name.endswith(".png")]
    assert all(pooled[name] == in_process[name] for name in pngs)


@pytest.mark.slow
def test_empty_warehouse_gives_no_route_maps_and_an_empty_overview(tmp_path):
    empty = lake_in(tmp_path / "data")
    with empty.writing(), empty.connect():
        pass  # the writer's attach creates the lake, with no table in it

    result = materialize_maps(warehouse_resource(tmp_path / "data"), tmp_path / "out")

    assert result.success
    assert map_metadata(result, "route_maps")["count"] == 0
    assert map_metadata(result, "map_features_geoparquet")["rows"] == 0
    assert _png(tmp_path / "out" / "maps" / "overview.png").shape[:2] == OVERVIEW_PX


# ---- pure pieces ---------------------------------------------------------------------------------------


def test_land_outline_is_vendored_small_and_global():
    land = load_land()

    assert LAND_PATH.stat().st_size < 1_000_000
    assert land.crs.to_epsg() == 4326
    assert len(land) > 50
    assert set(shapely.get_type_id(land.geometry.values)) == {3}
    xmin, ymin, xmax, ymax = land.total_bounds
    assert xmin >= -180 and xmax <= 180 and ymin >= -90 and ymax <= 90
    assert (LAND_PATH.parent / "LAND_LICENSE.md").exists()


@pytest.mark.parametrize(
    ("lons", "expected"),
    [
        ([-10.0, 20.0], 5.0),
        ([170.0, -170.0], 180.0),  # across the antimeridian: centred on it
        ([121.5, -118.2], 181.65),  # Shanghai - Los Angeles over the Pacific: a 0..360 frame
        ([-179.0, -150.0], -164.5),
        ([], 0.0),
    ],
)
def test_central_longitude_is_middle_of_shortest_arc(lons, expected):
    assert central_longitude(lons) == pytest.approx(expected)


def test_split_line_becomes_one_continuous_path_in_the_route_frame():
    split = shapely.MultiLineString([[(170, 30), (180, 35)], [(-180, 35), (-160, 40)]])
    lon0 = central_longitude(shapely.get_coordinates(split)[:, 0])

    paths, owner = lines_in_frame(np.array([split], dtype=object), lon0)

    xs = np.concatenate([p[:, 0] for p in paths])
    assert xs.min() == pytest.approx(170) and xs.max() == pytest.approx(200)
    assert list(owner) == [0] * len(paths)
    assert wrap_to_frame(np.array([-160.0]), lon0)[0] == pytest.approx(200)


def test_line_over_the_frame_seam_is_cut_not_streaked():
    line = shapely.LineString([(-10, 0), (10, 0)])  # crosses 0, the seam of a frame centred on 180

    paths, _ = lines_in_frame(np.array([line], dtype=object), 180.0)

    assert len(paths) == 2
    for path in paths:
        assert np.ptp(path[:, 0]) <= 10 + 1e-9
