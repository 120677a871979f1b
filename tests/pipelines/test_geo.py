"""GeoJSON route maps → Arrow: typed columns, WKB, antimeridian split, tolerance."""

from __future__ import annotations

import itertools
import json
from datetime import UTC, datetime

import numpy as np
import pyarrow as pa
import pytest
import shapely
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from pipelines.errors import MalformedResponseError
from pipelines.geo.features import (
    PROPERTY_TYPES,
    SCHEMA,
    feature_collections_to_table,
    split_antimeridian,
)


def feature(geometry, **props):
    return {"type": "Feature", "geometry": geometry, "properties": props}


def fc(*features):
    return {"type": "FeatureCollection", "features": list(features)}


PORT = feature(
    {"type": "Point", "coordinates": ["129.04", "35.1"]},  # live quirk: strings
    feature_type="port", ports_sequence=1, ports_total=2, location_id="l1", location_type="Port", name="Busan",
    country_code="KR", label="POL", outbound_atd_at="2025-11-18T15:26:00Z", inbound_eta_at=None, future_field="x",
)
VESSEL = feature(
    {"type": "Point", "coordinates": [-170.5, 40.0]},
    feature_type="current_vessel", ports_sequence=1, vessel_id="v1", vessel_name="MAERSK Ü", vessel_imo=9728253,
    vessel_location_timestamp="2025-11-20T08:00:00+02:00", vessel_location_heading=87, vessel_location_speed="12.5",
)
PAST = feature(
    {"type": "LineString", "coordinates": [[170.0, 30.0], [179.0, 35.0], [-179.0, 37.0], [-170.5, 40.0]]},
    feature_type="past_vessel_locations", ports_sequence=1, vessel_id="v1", start_time="2025-11-18T15:26:00Z",
    end_time="2025-11-20T08:00:00Z", point_count=4,
)
PARTIAL = feature(
    {"type": "LineString", "coordinates": [[-170.5, 40.0], [-150.0, 45.0]]},
    feature_type="estimated_partial_leg", ports_sequence=1, current_port_id="p1", next_port_id="p2", point_count=2,
)


def rows(table):
    return table.to_pylist()


def test_schema_covers_every_spec_property():
    names = set(SCHEMA.names)
    for prop in ("ports_total", "time_zone", "updated_at", "departure_port_atd", "arrival_port_time_zone",
                 "start_time", "previous_port_id", "current_port_id", "vessel_location_heading"):
        assert prop in names
    assert SCHEMA.field("updated_at").type == pa.timestamp("us", tz="UTC")
    assert SCHEMA.field("ports_sequence").type == pa.int64()
    assert len(PROPERTY_TYPES) == 47


def test_table_types_and_values():
    table = feature_collections_to_table([("c1", fc(PORT, VESSEL, PAST)), ("c2", fc(PARTIAL)), ("c3", fc())])
    assert table.schema == SCHEMA
    port, vessel, past, partial = rows(table)
    assert [r["container_id"] for r in (port, vessel, past, partial)] == ["c1", "c1", "c1", "c2"]
    assert [r["feature_index"] for r in (port, vessel, past, partial)] == [0, 1, 2, 0]
    assert port["outbound_atd_at"] == datetime(2025, 11, 18, 15, 26, tzinfo=UTC)
    assert json.loads(port["extra_properties"]) == {"future_field": "x"}
    assert shapely.from_wkb(port["geometry"]).equals(shapely.Point(129.04, 35.1))
    assert vessel["vessel_imo"] == "9728253"  # number coerced to the string column
    assert vessel["vessel_location_timestamp"] == datetime(2025, 11, 20, 6, 0, tzinfo=UTC)
    assert vessel["vessel_location_speed"] == 12.5 and vessel["vessel_location_heading"] == 87.0
    assert past["point_count"] == 4 and past["geometry_error"] is None
    line = shapely.from_wkb(past["geometry"])
    assert line.geom_type == "LineString" and len(line.coords) == 4
    split = shapely.from_wkb(past["geometry_split"])
    assert split.geom_type == "MultiLineString" and len(split.geoms) == 2
    assert split.geoms[0].coords[-1][0] == 180.0 and split.geoms[1].coords[0][0] == -180.0
    assert split.geoms[0].coords[-1][1] == pytest.approx(36.0)  # halfway between 35 and 37
    assert partial["geometry_split"] == partial["geometry"]


def test_bad_geometry_is_kept_with_a_reason_and_bad_values_go_to_extra():
    table = feature_collections_to_table([("c1", fc(
        feature(None, feature_type="port", ports_sequence="two"),
        feature({"type": "LineString", "coordinates": [[1, 2]]}, feature_type="estimated_full_legs"),
        feature({"type": "LineString", "coordinates": [[1, 2], ["x", 3]]}, feature_type="estimated_full_legs"),
        feature({"type": "Point", "coordinates": [10, 95]}, feature_type="port"),
        feature({"type": "Point"}, feature_type="port"),
        feature({"type": "Polygon", "coordinates": "nope"}, feature_type="port"),
        "not a feature",
        PAST,
    ))])
    out = rows(table)
    assert len(out) == 8
    assert [r["geometry"] is None for r in out] == [True] * 7 + [False]
    assert all(r["geometry_error"] for r in out[:7]) and out[7]["geometry_error"] is None
    assert "missing" in out[0]["geometry_error"] and "at least 2" in out[1]["geometry_error"]
    assert "latitude" in out[3]["geometry_error"]
    assert out[0]["ports_sequence"] is None and json.loads(out[0]["extra_properties"]) == {"ports_sequence": "two"}
    assert out[6]["feature_type"] is None


def test_degenerate_lines_are_loaded_as_sent_or_refused_with_a_reason():
    """What reaches the maps (`pipelines.geo.frame` decides what it means there): a line of two identical
    points is the service's own (a vessel that stayed put) and is kept; a line ending on the antimeridian
    keeps a zero-length part in its split; no position or an unknown one is refused with a reason."""
    def line(coordinates):
        return feature({"type": "LineString", "coordinates": coordinates}, feature_type="past_vessel_locations")

    table = feature_collections_to_table([("c", fc(
        line([[-0.32, 39.44], [-0.32, 39.44]]),
        line([[170, 1], [-180, 2]]),
        line([]),
        line([[0, 0], [float("nan"), 1]]),
    ))])  # fmt: skip

    stay, to_the_antimeridian, empty, unknown = rows(table)
    assert shapely.from_wkb(stay["geometry"]).equals_exact(shapely.LineString([(-0.32, 39.44)] * 2), 0)
    assert stay["geometry_error"] is None and stay["geometry_split"] == stay["geometry"]
    split = shapely.from_wkb(to_the_antimeridian["geometry_split"])
    assert [list(part.coords) for part in split.geoms] == [[(170, 1), (180, 2)], [(-180, 2), (-180, 2)]]
    assert empty["geometry"] is None and "positions" in empty["geometry_error"]
    assert unknown["geometry"] is None and "NaN" in unknown["geometry_error"]


def test_not_a_feature_collection_is_malformed():
    with pytest.raises(MalformedResponseError, match="container c9"):
        feature_collections_to_table([("c9", {"type": "Feature"})])
    with pytest.raises(MalformedResponseError):
        feature_collections_to_table([("c9", {"type": "FeatureCollection", "features": {}})])
    assert feature_collections_to_table([("c9", {"type": "FeatureCollection", "features": None})]).num_rows == 0


def test_longitudes_beyond_180_are_wrapped_in_the_split_variant():
    table = feature_collections_to_table([("c", fc(feature(
        {"type": "LineString", "coordinates": [[170, 0], [185, 1], [190, 2]]}, feature_type="estimated_full_legs")))])
    (row,) = rows(table)
    assert shapely.from_wkb(row["geometry"]).coords[1] == (185, 1)  # raw kept as received
    split = shapely.from_wkb(row["geometry_split"])
    assert split.geom_type == "MultiLineString"
    assert split.geoms[1].coords[-1] == (-170, 2)


# ---- property tests of the split ----------------------------------------------------------------

lon = st.floats(-180, 180, allow_nan=False)
lat = st.floats(-85, 85, allow_nan=False)
lines = st.lists(st.lists(st.tuples(lon, lat), min_size=2, max_size=12), min_size=1, max_size=6)


def _crossings(coords):
    return int(sum(abs(b[0] - a[0]) > 180 for a, b in itertools.pairwise(coords)))


def _is_subsequence(small, big):
    it = iter(big)
    return all(any(p == q for q in it) for p in small)


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(lines)
def test_split_keeps_every_vertex_in_order(line_list):
    for coords in line_list:
        assume(all(a != b for a, b in itertools.pairwise(coords)))
    flat = np.array([p for coords in line_list for p in coords], dtype=float)
    lengths = np.array([len(c) for c in line_list])
    geoms = split_antimeridian(flat, lengths)
    assert len(geoms) == len(line_list)
    for coords, geom in zip(line_list, geoms, strict=True):
        k = _crossings(coords)
        parts = list(geom.geoms) if geom.geom_type == "MultiLineString" else [geom]
        assert len(parts) == k + 1  # one more line per crossing
        out = [p for part in parts for p in part.coords]
        assert len(out) == len(coords) + 2 * k  # nothing lost; two antimeridian points per crossing
        assert _is_subsequence([tuple(p) for p in coords], out)  # original order kept
        for part in parts:
            assert len(part.coords) >= 2
            xs = np.array(part.coords)[:, 0]
            assert (np.abs(np.diff(xs)) <= 180).all()  # no part jumps across the map any more
        for a, b in itertools.pairwise(parts):
            assert abs(a.coords[-1][0]) == 180 and a.coords[-1][0] == -b.coords[0][0]
            assert a.coords[-1][1] == b.coords[0][1]


@settings(max_examples=100, deadline=None)
@given(st.lists(st.tuples(lon, lat), min_size=1, max_size=30))
def test_points_round_trip(points):
    collection = fc(*[feature({"type": "Point", "coordinates": list(p)}, feature_type="port") for p in points])
    table = feature_collections_to_table([("c", collection)])
    got = [shapely.from_wkb(g).coords[0] for g in table.column("geometry").to_pylist()]
    assert got == [tuple(p) for p in points]
