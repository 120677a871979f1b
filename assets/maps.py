"""Pictures and files from the loaded route maps (group `maps`): a GeoParquet of every map feature, one
PNG route map per container at sea, and one overview PNG of every route.

The assets depend on the raw ingest tables only through `deps=` (no IO manager load): they read the
warehouse themselves through the `warehouse` resource, read-only (on the lake a read never waits for a
writer). They run in the ocean-tracking pool all the same: they write the exported files two runs would
otherwise overwrite at once, and on the plain DuckDB option a reader would wait for the writer's file.

Where the files go: `<data_dir>/map_features.parquet`, `<data_dir>/maps/routes/<container number>.png`,
`<data_dir>/maps/overview.png`. `data_dir` is run config (`MapsConfig.data_dir`), else the environment
variable OCEAN_TRACKING_DATA_DIR, else `data`.

geopandas, pyarrow and matplotlib (through `pipelines.geo`) are imported inside the asset bodies: they
cost about a second, and loading the code location must cost little more than Dagster's own import
(every run and the daemon load it).
"""

import base64
import io
import re
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
from pydantic import Field

from assets.resources import OCEAN_TRACKING_POOL, Warehouse
from pipelines.settings import DATASET_NAME, GEOPARQUET_FILE_NAME, MAPS_DIR_NAME, data_dir
from pipelines.warehouse.tables import table_exists

MAPS_GROUP = "maps"
KEY_PREFIX = ["maps"]
RAW_DEPS = [dg.AssetKey([DATASET_NAME, "map_features"]), dg.AssetKey([DATASET_NAME, "containers"])]
if TYPE_CHECKING:
    import geopandas as gpd

PREVIEW_WIDTH = 480  # px of the inline preview in the asset's metadata


class MapsConfig(dg.Config):
    """Where the map files are written."""

    data_dir: str = Field(
        default="", description="Output base folder; empty: $OCEAN_TRACKING_DATA_DIR, else `data`."
    )

    def base_dir(self) -> Path:
        """The configured folder, else $OCEAN_TRACKING_DATA_DIR, else `data`."""
        return Path(self.data_dir) if self.data_dir else data_dir()


# ---- reading the warehouse ---------------------------------------------------------------------------


def read_map_features(warehouse: Warehouse, in_transit_only: bool = False) -> "gpd.GeoDataFrame | None":
    """The map features (geometry: the antimeridian-split variant) joined to their container's number;
    None when no map was loaded. `in_transit_only`: only containers that have a current_vessel feature."""
    schema = warehouse.dataset_name
    # A plain read-only connection, names qualified: `Warehouse.connect(read_only=True)` sets a search path
    # that includes the analytics schema, which fails on a warehouse whose models have not run yet.
    with warehouse.connect(read_only=True) as con:
        if not table_exists(con, schema, "map_features"):
            return None
        has_containers = table_exists(con, schema, "containers")
        number = "c.number as container_number" if has_containers else "null::varchar as container_number"
        join = f"left join {schema}.containers c on c.id = f.container_id" if has_containers else ""
        where = (
            f"where f.container_id in (select container_id from {schema}.map_features "
            "where feature_type = 'current_vessel')"
            if in_transit_only
            else ""
        )
        table = con.execute(
            f"select f.*, {number} "
            f"from (select columns(x -> not starts_with(x, '_dlt_')) from {schema}.map_features) f {join} {where} "
            "order by f.container_id, f.feature_index"
        ).to_arrow_table()
    from pipelines.geo.render import features_frame  # matplotlib and geopandas: see the module docstring

    return features_frame(table)


# ---- helpers -----------------------------------------------------------------------------------------


def _file_stem(number: Any, container_id: str) -> str:
    """A safe file name for the container: its number, else its id."""
    text = str(number) if number else str(container_id)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or str(container_id)


def route_title(features: "gpd.GeoDataFrame", number: str) -> str:
    """'<number> · <vessel> · <POL> → <POD>' from the container's features (parts that exist)."""
    parts = [number]
    vessels = features.loc[features["feature_type"] == "current_vessel", "vessel_name"].dropna()
    if len(vessels):
        parts.append(str(vessels.iloc[0]))
    ports = features[features["feature_type"] == "port"]
    if "ports_sequence" in ports.columns:
        ports = ports.sort_values("ports_sequence")
    names = [str(n) for n in ports["name"].dropna()] if "name" in ports.columns else []
    if names:
        parts.append(f"{names[0]} → {names[-1]}" if len(names) > 1 else names[0])
    return " · ".join(parts)


def png_preview_md(path: Path, width: int = PREVIEW_WIDTH, alt: str = "map") -> str:
    """Markdown with the PNG inlined as a base64 data URI (downscaled to `width` px to keep the event small)."""
    from PIL import Image

    with Image.open(path) as image:
        image = image.convert("RGB")
        if image.width > width:
            image = image.resize((width, round(image.height * width / image.width)), Image.Resampling.LANCZOS)
        buffer = io.BytesIO()
        image.save(buffer, format="PNG", optimize=True)
    encoded = base64.b64encode(buffer.getvalue()).decode("ascii")
    return f"![{alt}](data:image/png;base64,{encoded})"


# Shared by the three file assets: they read the raw map tables and write files, one run at a time (the pool).
MAPS_ASSET = {"key_prefix": KEY_PREFIX, "group_name": MAPS_GROUP, "deps": RAW_DEPS, "pool": OCEAN_TRACKING_POOL}

# ---- assets ------------------------------------------------------------------------------------------


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "parquet"},
    description="Every loaded map feature as GeoParquet (EPSG:4326) for GIS tools: `<data_dir>/map_features.parquet`.",
)
def map_features_geoparquet(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    import pyarrow.parquet as pq

    from pipelines.geo.geoparquet import export_map_features_geoparquet

    out_path = config.base_dir() / GEOPARQUET_FILE_NAME
    written = export_map_features_geoparquet(warehouse.store(), out_path, dataset_name=warehouse.dataset_name)
    if written is None:
        context.log.info("no map features loaded yet: nothing written")
        return dg.MaterializeResult(
            metadata={"path": dg.MetadataValue.path(str(out_path)), "rows": 0, "bytes": 0}
        )
    rows = pq.read_metadata(written).num_rows
    size = written.stat().st_size
    context.log.info("wrote %s: %d rows, %d bytes", written, rows, size)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(written)),
            "rows": dg.MetadataValue.int(rows),
            "bytes": dg.MetadataValue.int(size),
            "dagster/row_count": dg.MetadataValue.int(rows),
        }
    )


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "matplotlib"},
    description=(
        "One PNG route map per container at sea (a container whose map has a current_vessel feature): "
        "`<data_dir>/maps/routes/<container number>.png`. Maps of containers no longer at sea are removed."
    ),
)
def route_maps(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    from pipelines.geo.land import load_land
    from pipelines.geo.render import render_container_route

    folder = config.base_dir() / MAPS_DIR_NAME / "routes"
    folder.mkdir(parents=True, exist_ok=True)
    features = read_map_features(warehouse, in_transit_only=True)
    for stale in sorted(folder.glob("*.png")):
        stale.unlink()
    written: list[Path] = []
    wide = 0
    if features is not None and len(features):
        land = load_land()
        groups = features.groupby("container_id", sort=True)
        numbers = {cid: rows["container_number"].iloc[0] for cid, rows in groups}
        stems: dict[str, int] = {}
        for stem in (_file_stem(numbers[cid], cid) for cid in numbers):
            stems[stem] = stems.get(stem, 0) + 1
        for container_id, rows in groups:
            number = numbers[container_id]
            stem = _file_stem(number, container_id)
            if stems[stem] > 1:  # the same number on two shipments: keep both maps apart
                stem = f"{stem}_{str(container_id)[:8]}"
            result = render_container_route(
                rows, land, folder / f"{stem}.png", route_title(rows, str(number or container_id))
            )
            wide += result.lon_span > 180
            written.append(result.path)
    context.log.info("wrote %d route maps to %s", len(written), folder)
    metadata: dict[str, Any] = {
        "count": dg.MetadataValue.int(len(written)),
        "folder": dg.MetadataValue.path(str(folder)),
        "maps_wider_than_180_degrees": dg.MetadataValue.int(int(wide)),
    }
    if written:
        first = sorted(written)[0]
        metadata["preview_file"] = dg.MetadataValue.path(str(first))
        metadata["preview"] = dg.MetadataValue.md(png_preview_md(first, alt=first.stem))
    return dg.MaterializeResult(metadata=metadata)


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "matplotlib"},
    description="Every route (thin lines) and every vessel at sea on one map: `<data_dir>/maps/overview.png`.",
)
def routes_overview(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    import geopandas as gpd

    from pipelines.geo.land import load_land
    from pipelines.geo.render import render_overview

    out_path = config.base_dir() / MAPS_DIR_NAME / "overview.png"
    features = read_map_features(warehouse)
    if features is None:
        features = gpd.GeoDataFrame({"feature_type": [], "container_id": []}, geometry=[], crs="EPSG:4326")
    result = render_overview(features, load_land(), out_path)
    containers = int(features["container_id"].nunique()) if len(features) else 0
    context.log.info("wrote %s (%d containers)", out_path, containers)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(result.path)),
            "containers": dg.MetadataValue.int(containers),
            "vessels_at_sea": dg.MetadataValue.int(int((features["feature_type"] == "current_vessel").sum())),
            "central_longitude": dg.MetadataValue.float(round(result.central_longitude, 3)),
            "preview": dg.MetadataValue.md(png_preview_md(result.path, width=720, alt="overview")),
        }
    )


map_assets: list = [map_features_geoparquet, route_maps, routes_overview]
