"""An offline land outline for the route maps: Natural Earth 1:110m land, vendored as a small GeoJSON.

Nothing is downloaded at run time (cartopy and geodatasets fetch their data from the internet, which the
pipeline's machines cannot reach). `pipelines/geo/reference_data/land_110m.geojson` was derived once, with
`python -m pipelines.geo.land`, from the Natural Earth 1:110m "admin 0 countries" layer that pyogrio ships in its
wheel as a test fixture (`pyogrio/tests/fixtures/naturalearth_lowres`, copied there from GeoPandas): the
177 countries dissolved into land polygons, split into single polygons, coordinates rounded to 0.001 degree.

Natural Earth is public domain ("Made with Natural Earth. Free vector and raster map data @
naturalearthdata.com"); see `pipelines/geo/reference_data/LAND_LICENSE.md`. Regenerating needs pyogrio's fixture only; the
runtime reads the vendored file and needs no extra dependency.
"""

from __future__ import annotations

import argparse
from functools import lru_cache
from pathlib import Path

import geopandas as gpd
import shapely

LAND_PATH = Path(__file__).resolve().parent / "reference_data" / "land_110m.geojson"
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


def main(argv: list[str] | None = None) -> None:
    """Regenerate the vendored land file from pyogrio's Natural Earth fixture."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--source", type=Path, default=None, help="a countries layer (default: pyogrio's)")
    parser.add_argument("--out", type=Path, default=LAND_PATH)
    args = parser.parse_args(argv)
    out = build_land(args.source or pyogrio_fixture_path(), args.out)
    print(f"wrote {out} ({out.stat().st_size} bytes, {len(load_land(out))} polygons)")


if __name__ == "__main__":
    main()
