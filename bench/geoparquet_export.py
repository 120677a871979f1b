"""Wall time and peak memory of the GeoParquet export of a lake's map features, each run in a fresh process.

    python bench/geoparquet_export.py --data-dir DIR [--repeat 3]

DIR is a data folder holding a DuckLake (`DIR/ducklake`, as `OCEAN_TRACKING_DATA_DIR` would). Per repeat:
one export into a new file (written) and one more onto it (the table unchanged: skipped). Prints each run
and the medians; asserts nothing. Also counts the lines of the written file whose consecutive vertices
jump more than 180 degrees of longitude, in its primary geometry column and in the others.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_memory import RESULT_PREFIX, Meter, report  # noqa: E402


def _child(data_dir: Path, out: Path) -> None:
    from pipelines.geo import export_map_features_geoparquet
    from pipelines.warehouse import default_lake_in

    meter = Meter()
    start = time.perf_counter()
    export = export_map_features_geoparquet(default_lake_in(data_dir), out)
    seconds = time.perf_counter() - start
    report({"seconds": seconds, "rows": export.rows if export else 0,
            "written": bool(export and export.written), **meter.figures()})  # fmt: skip


def _run(data_dir: Path, out: Path) -> dict:
    done = subprocess.run(
        [sys.executable, __file__, "--child", "--data-dir", str(data_dir), "--out", str(out)],
        capture_output=True, text=True, check=True, cwd=REPO,
    )  # fmt: skip
    line = next(x for x in done.stdout.splitlines() if x.startswith(RESULT_PREFIX))
    return json.loads(line[len(RESULT_PREFIX) :])


def jumping_lines(path: Path) -> dict[str, tuple[int, int]]:
    """Per geometry column of a GeoParquet file (the primary first): (lines with two consecutive vertices
    of one part more than 180° of longitude apart, lines)."""
    import numpy as np
    import pyarrow.parquet as pq
    import shapely

    geo = json.loads(pq.read_metadata(path).metadata[b"geo"])
    names = [geo["primary_column"], *(c for c in geo["columns"] if c != geo["primary_column"])]
    counts = {}
    for name in names:
        geoms = shapely.from_wkb(pq.read_table(path, columns=[name])[name].to_pylist())
        lines = geoms[np.isin(shapely.get_type_id(geoms), (1, 5))]
        parts, line_of = shapely.get_parts(lines, return_index=True)
        coords, part_of = shapely.get_coordinates(parts, return_index=True)
        jump = (part_of[:-1] == part_of[1:]) & (np.abs(np.diff(coords[:, 0])) > 180)
        counts[name] = (len(np.unique(line_of[part_of[:-1][jump]])), len(lines))
    return counts


def main(argv: list[str] | None = None) -> None:
    """Measure the export of `--data-dir`'s lake (see the module docstring)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, required=True)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--out", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        _child(args.data_dir, args.out)
        return
    runs: dict[str, list[dict]] = {"written": [], "skipped": []}
    with tempfile.TemporaryDirectory(prefix="geoparquet-bench-") as folder:
        for index in range(args.repeat):
            out = Path(folder) / f"map_features-{index}.parquet"
            for kind in ("written", "skipped"):
                figures = _run(args.data_dir, out)
                assert figures["written"] == (kind == "written"), figures
                runs[kind].append(figures)
                print(f"{kind:8} {figures['rows']:>9,} rows  {figures['seconds']:6.2f} s  "
                      f"peak {figures['peak_mib']:6.0f} MiB (after imports {figures['baseline_mib']:.0f})")  # fmt: skip
        for name, (jumping, lines) in jumping_lines(out).items():
            print(f"{name}: {jumping} of {lines} lines jump more than 180° between consecutive vertices")
    for kind, figures in runs.items():
        seconds = statistics.median(f["seconds"] for f in figures)
        peak = statistics.median(f["peak_mib"] for f in figures)
        print(f"median {kind}: {seconds:.2f} s, peak {peak:.0f} MiB")


if __name__ == "__main__":
    main()
