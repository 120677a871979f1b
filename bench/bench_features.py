"""Map features per second of local processing: the pipeline's Arrow path vs dlt's default JSON path."""

from __future__ import annotations

import statistics
import tempfile
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dlt

from pipelines.geo.features import feature_collections_to_table

Collections = list[tuple[str, dict[str, Any]]]


@dataclass
class FeatureRates:
    """Median seconds per path over the repeats, for `features` features in `collections` maps."""

    collections: int
    features: int
    coordinates: int
    arrow_table_s: float
    arrow_load_s: float
    json_extract_normalize_s: float
    json_full_s: float

    def rate(self, seconds: float) -> float:
        """Features per second for a median duration."""
        return self.features / seconds if seconds > 0 else float("inf")


def raw_features(collections: Collections) -> Iterator[dict[str, Any]]:
    """Each feature as dlt would get it without the Arrow path: properties plus the raw geometry."""
    for container_id, collection in collections:
        for index, feature in enumerate(collection.get("features") or []):
            yield {
                "container_id": container_id,
                "feature_index": index,
                **(feature.get("properties") or {}),
                "geometry": feature.get("geometry"),
            }


def _dlt_run(data: Callable[[], Any], workdir: Path, name: str, **run_args: Any) -> tuple[float, float]:
    """(extract+normalize seconds, extract+normalize+load seconds) of one fresh pipeline run."""
    pipeline = dlt.pipeline(
        pipeline_name=name,
        destination=dlt.destinations.duckdb(str(workdir / f"{name}.duckdb")),
        dataset_name="bench",
        pipelines_dir=str(workdir / "dlt"),
    )
    started = time.perf_counter()
    pipeline.extract(data(), **run_args)
    pipeline.normalize()
    normalized = time.perf_counter() - started
    pipeline.load()
    return normalized, time.perf_counter() - started


def measure(collections: Collections, repeat: int = 3) -> FeatureRates:
    """Time `feature_collections_to_table`, the Arrow table loaded by dlt, and dlt's JSON path (medians)."""
    features = list(raw_features(collections))
    coordinates = sum(_count_positions((f.get("geometry") or {}).get("coordinates")) for f in features)

    @dlt.resource(name="map_features_json", write_disposition="append")
    def json_features() -> Iterator[dict[str, Any]]:
        yield from raw_features(collections)

    arrow_s, arrow_load_s, json_norm_s, json_full_s = [], [], [], []
    for i in range(repeat):
        started = time.perf_counter()
        table = feature_collections_to_table(collections)
        arrow_s.append(time.perf_counter() - started)
        with tempfile.TemporaryDirectory(prefix="bench-features-") as tmp:
            _, full = _dlt_run(lambda t=table: dlt.resource(t, name="map_features"), Path(tmp), f"arrow_{i}",
                               loader_file_format="parquet")
            arrow_load_s.append(arrow_s[-1] + full)
            norm, full = _dlt_run(json_features, Path(tmp), f"json_{i}")
            json_norm_s.append(norm)
            json_full_s.append(full)
    median = statistics.median
    return FeatureRates(len(collections), len(features), coordinates, median(arrow_s), median(arrow_load_s),
                        median(json_norm_s), median(json_full_s))


def _count_positions(coords: Any) -> int:
    if not isinstance(coords, list) or not coords:
        return 0
    if isinstance(coords[0], int | float):
        return 1
    return sum(_count_positions(c) for c in coords)
