"""Pictures and files from the loaded route maps (group `maps`): a GeoParquet of every map feature, one
PNG route map per container at sea, and one overview PNG of every route.

The assets depend on the raw ingest tables only through `deps=` (no IO manager load): they read the
warehouse themselves through the `warehouse` resource, read-only (on the lake a read never waits for a
writer). They run in the exports pool (`assets.resources.EXPORTS_POOL`): they write the exported files two runs
would otherwise overwrite at once, and no webhook refresh waits for a drawing.

Where the files go: `<data_dir>/map_features.parquet`, `<data_dir>/maps/routes/<container number>.png`,
`<data_dir>/maps/overview.png`. `data_dir` is run config (`MapsConfig.data_dir`), else the environment
variable OCEAN_TRACKING_DATA_DIR, else `data`. With several accounts (`assets.accounts`) the assets are
partitioned by account and each account has its own files: `<data_dir>/map_features_<account>.parquet` and
`<data_dir>/maps_<account>/` (routes and overview), drawn from its own dataset.

Each file is redone only when what it shows changed, so a schedule that syncs often mostly finds nothing
to do: the GeoParquet and the overview record the state of `map_features` they were made from (the
newest load id and the row count), the route maps the load id of each container's map (a refreshed map
is swapped in under a new one) in `maps/routes/manifest.json`. Every file is written beside its place
and renamed into it, so a reader never sees half of one.

geopandas, pyarrow and matplotlib (through `pipelines.geo`) are imported inside the asset bodies: they
cost about a second, and loading the code location must cost little more than Dagster's own import
(every run and the daemon load it).
"""

import base64
import contextlib
import io
import json
import os
import re
from collections import Counter
from collections.abc import Sequence
from concurrent.futures.process import BrokenProcessPool
from pathlib import Path
from typing import TYPE_CHECKING, Any

import dagster as dg
import duckdb
from pydantic import Field

from assets.accounts import account_of, account_partitions
from assets.alerts import describe
from assets.automation import automation_for
from assets.resources import EXPORTS_POOL, Warehouse
from pipelines.geo import export_map_features_geoparquet, map_features_state
from pipelines.settings import DATASET_NAME, MAPS_DIR_NAME, Account, data_dir, geoparquet_path
from pipelines.warehouse import table_exists

MAPS_GROUP = "maps"
KEY_PREFIX = ["maps"]
RAW_DEPS = [dg.AssetKey([DATASET_NAME, "map_features"]), dg.AssetKey([DATASET_NAME, "containers"])]
if TYPE_CHECKING:
    from concurrent.futures import ProcessPoolExecutor

    import geopandas as gpd

    from pipelines.geo.render import RenderResult

PREVIEW_WIDTH = 480  # px of the inline preview in the asset's metadata


class MapsConfig(dg.Config):
    """Where the map files are written."""

    data_dir: str = Field(
        default="", description="Output base folder; empty: $OCEAN_TRACKING_DATA_DIR, else `data`."
    )

    def base_dir(self) -> Path:
        """The configured folder, else $OCEAN_TRACKING_DATA_DIR, else `data`."""
        return Path(self.data_dir) if self.data_dir else data_dir()

    def geoparquet(self, account: Account) -> Path:
        """The account's GeoParquet in the base folder, named as `pipelines.settings.geoparquet_path` names it."""
        return self.base_dir() / geoparquet_path(account).name

    def maps_dir(self, account: Account) -> Path:
        """The account's maps folder in the base folder: `maps`, or `maps_<account>` for a named account."""
        return self.base_dir() / account.suffixed(MAPS_DIR_NAME)


# ---- reading the warehouse ---------------------------------------------------------------------------

# What the overview draws: reading only these keeps every other property column out of memory.
OVERVIEW_COLUMNS = (
    "container_id", "feature_index", "feature_type", "name", "location_id", "vessel_id", "vessel_name",
    "geometry", "geometry_split",
)  # fmt: skip


def read_map_features(
    warehouse: Warehouse, in_transit_only: bool = False, columns: "Sequence[str] | None" = None
) -> "gpd.GeoDataFrame | None":
    """The map features (geometry: the antimeridian-split variant) joined to their container's number;
    None when no map was loaded. `in_transit_only`: only containers that have a current_vessel feature;
    `columns`: only those columns of `map_features` (default every column but dlt's)."""
    with warehouse.connect(read_only=True) as con:
        return map_features_in(con, warehouse.dataset_name, in_transit_only=in_transit_only, columns=columns)


def map_features_in(
    con: duckdb.DuckDBPyConnection,
    schema: str,
    *,
    in_transit_only: bool = False,
    container_ids: "Sequence[str] | None" = None,
    columns: "Sequence[str] | None" = None,
) -> "gpd.GeoDataFrame | None":
    """`read_map_features` on an open session, also for only `container_ids`: a render reads what it
    draws and no more, and a batched render pays the session's first catalog lookup once."""
    if not table_exists(con, schema, "map_features"):
        return None
    has_containers = table_exists(con, schema, "containers")
    number = "c.number as container_number" if has_containers else "null::varchar as container_number"
    join = f"left join {schema}.containers c on c.id = f.container_id" if has_containers else ""
    conditions, parameters = [], []
    if in_transit_only:
        conditions.append(
            f"f.container_id in (select container_id from {schema}.map_features where feature_type = 'current_vessel')"
        )
    if container_ids is not None:
        conditions.append("f.container_id in (select unnest(?::varchar[]))")
        parameters.append(list(container_ids))
    where = f"where {' and '.join(conditions)}" if conditions else ""
    selected = ", ".join(columns) if columns else "columns(x -> not starts_with(x, '_dlt_'))"
    table = con.execute(
        f"select f.*, {number} "
        f"from (select {selected} from {schema}.map_features) f {join} {where} "
        "order by f.container_id, f.feature_index",
        parameters,
    ).to_arrow_table()
    from pipelines.geo.render import features_frame  # matplotlib and geopandas: see the module docstring

    return features_frame(table)


def containers_at_sea(warehouse: Warehouse) -> dict[str, tuple[Any, str]]:
    """Container id -> (its number, the load id of its map) for every container whose map has a
    current_vessel feature: which route maps should exist, and which state of each map they show (a map
    refresh swaps a container's rows under a new load id)."""
    schema = warehouse.dataset_name
    query = (
        "select f.container_id, {number}, max(f._dlt_load_id) from {schema}.map_features f {join} "
        "group by f.container_id having bool_or(f.feature_type = 'current_vessel') order by f.container_id"
    )
    join = f"left join {schema}.containers c on c.id = f.container_id"
    with warehouse.connect(read_only=True) as con:
        try:  # the tables, not the catalog, are asked (see `map_features_state`): this runs on every run
            rows = con.execute(query.format(number="any_value(c.number)", schema=schema, join=join)).fetchall()
        except duckdb.CatalogException:  # a table not loaded yet
            if not table_exists(con, schema, "map_features"):
                return {}
            rows = con.execute(query.format(number="null::varchar", schema=schema, join="")).fetchall()
    return {container_id: (number, load_id) for container_id, number, load_id in rows}


# ---- helpers -----------------------------------------------------------------------------------------


def _file_stem(number: Any, container_id: str) -> str:
    """A safe file name for the container: its number, else its id."""
    text = str(number) if number else str(container_id)
    return re.sub(r"[^A-Za-z0-9._-]+", "_", text).strip("._") or str(container_id)


def route_files(at_sea: dict[str, tuple[Any, str]]) -> dict[str, str]:
    """Container id -> the file name of its route map: its number made safe, and where two containers
    at sea share a number (the same number on two shipments) the id's first 8 characters too, keeping
    both maps apart."""
    stems = {container_id: _file_stem(number, container_id) for container_id, (number, _) in at_sea.items()}
    shared = Counter(stems.values())
    return {
        container_id: f"{stem}_{str(container_id)[:8]}.png" if shared[stem] > 1 else f"{stem}.png"
        for container_id, stem in stems.items()
    }


def read_json(path: Path) -> dict[str, Any]:
    """A small JSON record of what was rendered; empty when missing or unreadable (all is then redrawn)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return {}
    return data if isinstance(data, dict) else {}


def write_json_atomically(path: Path, data: dict[str, Any]) -> None:
    """Write the record whole or not at all (a temporary file renamed over it)."""
    partial = path.with_name(f".{path.name}.partial")
    partial.write_text(json.dumps(data, indent=1, sort_keys=True), encoding="utf-8")
    os.replace(partial, path)


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


# Shared by the three file assets: they read the raw map tables and write files, one run at a time (the pool),
# and follow their upstream as the deployment decides for their group (`assets.automation`).
MAPS_ASSET = {"key_prefix": KEY_PREFIX, "group_name": MAPS_GROUP, "deps": RAW_DEPS, "pool": EXPORTS_POOL,
              "partitions_def": account_partitions, "automation_condition": automation_for(MAPS_GROUP)}

# ---- assets ------------------------------------------------------------------------------------------


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "parquet"},
    description=(
        "Every loaded map feature as GeoParquet (EPSG:4326) for GIS tools: `<data_dir>/map_features.parquet`. "
        "Rewritten only when `map_features` changed since the file was written."
    ),
)
def map_features_geoparquet(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    account = account_of(context)
    warehouse = warehouse.for_account(account)
    out_path = config.geoparquet(account)
    export = export_map_features_geoparquet(warehouse.store(), out_path, dataset_name=warehouse.dataset_name)
    if export is None:
        context.log.info("no map features loaded yet: nothing written")
        return dg.MaterializeResult(
            metadata={"path": dg.MetadataValue.path(str(out_path)), "rows": 0, "bytes": 0}
        )
    size = export.path.stat().st_size
    if export.written:
        context.log.info("wrote %s: %d rows, %d bytes", export.path, export.rows, size)
    else:
        context.log.info("no map changed since %s was written: left as it was", export.path)
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(export.path)),
            "rows": dg.MetadataValue.int(export.rows),
            "bytes": dg.MetadataValue.int(size),
            "skipped_unchanged": dg.MetadataValue.bool(not export.written),
            "dagster/row_count": dg.MetadataValue.int(export.rows),
        }
    )


ROUTES_MANIFEST = "manifest.json"  # in the routes folder: which map state each PNG shows
# Recorded with every drawn map: raise it when the drawing changes (pipelines.geo.render) to redraw them all.
DRAWING_VERSION = 2
RENDER_BATCH = 200  # containers read and drawn at a time: memory follows a batch, not the fleet
MAPS_PER_PROCESS = 16  # below this many maps a worker process costs more than it saves
MAX_DRAWING_PROCESSES = 4


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "matplotlib"},
    description=(
        "One PNG route map per container at sea (a container whose map has a current_vessel feature): "
        "`<data_dir>/maps/routes/<container number>.png`. Only maps whose rows changed since they were drawn "
        "are redrawn (`manifest.json` in the folder records what each shows); maps of containers no longer "
        "at sea are removed. A map that cannot be drawn is reported (`failed`, `failed_maps`, a warning) and "
        "tried again next run; the others are drawn."
    ),
)
def route_maps(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    account = account_of(context)
    warehouse = warehouse.for_account(account)
    folder = config.maps_dir(account) / "routes"
    folder.mkdir(parents=True, exist_ok=True)
    at_sea = containers_at_sea(warehouse)
    files = route_files(at_sea)
    manifest_path = folder / ROUTES_MANIFEST
    manifest = read_json(manifest_path)
    before = manifest.get("containers") if manifest.get("version") == DRAWING_VERSION else None
    before = before if isinstance(before, dict) else {}
    drawn = {
        container_id: entry
        for container_id, entry in before.items()
        if container_id in files
        and isinstance(entry, dict)
        and entry.get("file") == files[container_id]
        and entry.get("load_id") == at_sea[container_id][1]
        and (folder / files[container_id]).is_file()
    }
    removed = 0
    wanted = set(files.values())
    for path in sorted(folder.glob("*.png")):
        if path.name not in wanted:
            path.unlink()
            removed += 1
    kept = len(drawn)
    due = [container_id for container_id in sorted(files) if container_id not in drawn]
    failed = _draw_routes(warehouse, folder, due, at_sea, files, drawn, manifest_path) if due else {}
    for container_id, reason in failed.items():
        context.log.warning("could not draw the route map of %s: %s", files[container_id], reason)
    if drawn != before or manifest.get("version") != DRAWING_VERSION:
        write_json_atomically(manifest_path, {"version": DRAWING_VERSION, "containers": drawn})
    rendered = len(drawn) - kept
    context.log.info("drew %d route maps, kept %d, removed %d, in %s", rendered, kept, removed, folder)
    metadata: dict[str, Any] = {
        "count": dg.MetadataValue.int(len(drawn)),
        "rendered": dg.MetadataValue.int(rendered),
        "unchanged": dg.MetadataValue.int(kept),
        "removed": dg.MetadataValue.int(removed),
        "failed": dg.MetadataValue.int(len(failed)),
        "skipped_unchanged": dg.MetadataValue.bool(not rendered and not removed and not failed),
        "folder": dg.MetadataValue.path(str(folder)),
        "maps_wider_than_180_degrees": dg.MetadataValue.int(sum(bool(e.get("wide")) for e in drawn.values())),
    }
    if failed:
        metadata["failed_maps"] = dg.MetadataValue.json({files[key]: reason for key, reason in failed.items()})
    if drawn:
        first = folder / min(entry["file"] for entry in drawn.values())
        metadata["preview_file"] = dg.MetadataValue.path(str(first))
        metadata["preview"] = dg.MetadataValue.md(png_preview_md(first, alt=first.stem))
    return dg.MaterializeResult(metadata=metadata)


def drawing_pool(maps_due: int) -> "ProcessPoolExecutor | None":
    """Worker processes to draw many route maps at once, one a core; None for a few maps or one core.

    Matplotlib draws in Python, on one core: 94 maps took 10.7 s of a 56 s daemon-launched full sync
    (bench/daemon_run.py). The workers are forked, after the renderer is imported and the land outline
    read here, so they start at once with both. Not `spawn` or `forkserver`: their workers import the
    caller's `__main__` again, and a script without a main guard (one that calls `dg.materialize` at its
    top level) would run itself in every worker. The forked workers only draw and write PNGs: they take
    no lock of the run worker's threads (logging re-creates its locks at a fork, DuckDB is not used)."""
    import multiprocessing
    from concurrent.futures import ProcessPoolExecutor

    from pipelines.geo.frame import load_land

    workers = min(os.cpu_count() or 1, MAX_DRAWING_PROCESSES, maps_due // MAPS_PER_PROCESS)
    if workers < 2:
        return None
    load_land()  # read once here, inherited by every worker
    return ProcessPoolExecutor(max_workers=workers, mp_context=multiprocessing.get_context("fork"))


def _draw_routes(
    warehouse: Warehouse,
    folder: Path,
    due: list[str],
    at_sea: dict[str, tuple[Any, str]],
    files: dict[str, str],
    drawn: dict[str, dict[str, Any]],
    manifest_path: Path,
) -> dict[str, str]:
    """Draw the due containers' maps a batch at a time (each PNG written whole, then renamed into place;
    many maps in worker processes, `drawing_pool`), recording each in `drawn` and the manifest after every
    batch, so a stopped run keeps what it drew. Returns the containers whose map could not be drawn, with
    why (`draw_route`): they are left out of the manifest, so the next run tries them again."""
    failed: dict[str, str] = {}
    pool = drawing_pool(len(due))
    with pool or contextlib.nullcontext(), warehouse.connect(read_only=True) as con:
        for start in range(0, len(due), RENDER_BATCH):
            batch = due[start : start + RENDER_BATCH]
            features = map_features_in(con, warehouse.dataset_name, container_ids=batch)
            if features is None:  # the table went away since the containers were listed
                return failed
            groups = list(features.groupby("container_id", sort=True))
            finals = [folder / files[container_id] for container_id, _ in groups]
            # a leftover partial file is removed by the next run
            partials = [folder / f".{final.stem}.partial.png" for final in finals]
            titles = [route_title(rows, str(at_sea[container_id][0] or container_id)) for container_id, rows in groups]
            work = ([rows for _, rows in groups], partials, finals, titles)
            try:
                results = list(pool.map(draw_route, *work, chunksize=4) if pool else map(draw_route, *work))
            except BrokenProcessPool:  # a worker died (killed, out of memory): draw the batch here
                pool = None
                results = list(map(draw_route, *work))
            for (container_id, _), final, result in zip(groups, finals, results, strict=True):
                if isinstance(result, str):
                    failed[container_id] = result
                    continue
                drawn[container_id] = {"file": final.name, "load_id": at_sea[container_id][1], "wide": result.lon_span > 180}
            write_json_atomically(manifest_path, {"version": DRAWING_VERSION, "containers": drawn})
    return failed


def draw_route(features: "gpd.GeoDataFrame", partial: Path, final: Path, title: str) -> "RenderResult | str":
    """One container's route map (`render_route_with_land`) drawn into `partial` and renamed to `final`,
    or why it could not be, in one line.

    Degenerate geometry is drawn (`pipelines.geo.frame` decides what it means), but whatever else stops
    one container's map (a file that cannot be written, a bug) must not stop the others': the asset
    reports it and goes on. Runs in a drawing process as well, so it returns the reason rather than
    raising it through the pool."""
    from pipelines.geo.render import render_route_with_land

    try:
        result = render_route_with_land(features, partial, title)
        os.replace(partial, final)
    except Exception as error:
        partial.unlink(missing_ok=True)
        return describe(error)
    return result


OVERVIEW_RECORD = "overview.json"  # beside the overview: the map_features state it shows, and its figures


@dg.asset(
    **MAPS_ASSET,
    kinds={"ducklake", "matplotlib"},
    description=(
        "Every route (thin lines), its ports (named where a label fits) and every vessel at sea (one marker "
        "a vessel) on one map: `<data_dir>/maps/overview.png`. "
        "Redrawn only when `map_features` changed since it was drawn."
    ),
)
def routes_overview(
    context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    account = account_of(context)
    warehouse = warehouse.for_account(account)
    out_path = config.maps_dir(account) / "overview.png"
    record_path = out_path.with_name(OVERVIEW_RECORD)
    with warehouse.connect(read_only=True) as con:
        state = map_features_state(con, warehouse.dataset_name) or "no map features"
    record = read_json(record_path)
    skipped = record.get("state") == state and record.get("version") == DRAWING_VERSION and out_path.is_file()
    if skipped:
        context.log.info("no map changed since %s was drawn: left as it was", out_path)
    else:
        record = _draw_overview(out_path, warehouse, state)
        write_json_atomically(record_path, record)
        context.log.info(
            "wrote %s (%d containers, %d at sea on %d vessels)",
            out_path, record["containers"], record["containers_at_sea"], record["vessels_at_sea"],
        )  # fmt: skip
    return dg.MaterializeResult(
        metadata={
            "path": dg.MetadataValue.path(str(out_path)),
            "skipped_unchanged": dg.MetadataValue.bool(skipped),
            "containers": dg.MetadataValue.int(int(record.get("containers", 0))),
            "containers_at_sea": dg.MetadataValue.int(int(record.get("containers_at_sea", 0))),
            "vessels_at_sea": dg.MetadataValue.int(int(record.get("vessels_at_sea", 0))),
            "ports": dg.MetadataValue.int(int(record.get("ports", 0))),
            "ports_labelled": dg.MetadataValue.int(int(record.get("ports_labelled", 0))),
            "central_longitude": dg.MetadataValue.float(float(record.get("central_longitude", 0.0))),
            "preview": dg.MetadataValue.md(png_preview_md(out_path, width=720, alt="overview")),
        }
    )


def _draw_overview(out_path: Path, warehouse: Warehouse, state: str) -> dict[str, Any]:
    """Draw the overview from the columns it shows (written whole, then renamed into place) and return
    its record: the table state drawn and the figures the asset reports (what the map draws: see
    `render_overview`)."""
    import geopandas as gpd

    from pipelines.geo.frame import load_land
    from pipelines.geo.render import render_overview

    features = read_map_features(warehouse, columns=OVERVIEW_COLUMNS)
    if features is None:
        features = gpd.GeoDataFrame({"feature_type": [], "container_id": []}, geometry=[], crs="EPSG:4326")
    partial = out_path.with_name(f".{out_path.name}.partial.png")
    result = render_overview(features, load_land(), partial)
    os.replace(partial, out_path)
    return {
        "version": DRAWING_VERSION,
        "state": state,
        **result.counts,
        "ports_labelled": len(result.labels),
        "central_longitude": round(result.central_longitude, 3),
    }


map_assets: list = [map_features_geoparquet, route_maps, routes_overview]
