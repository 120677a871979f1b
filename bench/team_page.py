"""The team page's weight and render time at each scale: the file's bytes, the seconds to write it, and the
seconds Debian's Chromium (headless, through the browser test's own `visit_page`) takes from opening the file
to every chart drawn.

    python bench/team_page.py [--shipments 200,10000] [--repeat 3] [--workdir DIR]

Per scale, a sandbox world of that many shipments (frozen clock, seed 7) synced once with maps and models by
`python -m pipelines sync` into `DIR/<shipments>/data` (kept: a later run with the same DIR reuses the lake),
then `--repeat` times: the page written afresh, then opened. Prints each scale's medians; asserts nothing.
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from bench.bench_table import render  # noqa: E402
from pipelines.page.render import write_team_page  # noqa: E402
from pipelines.warehouse import default_lake_in  # noqa: E402
from sandbox.launcher import start_sandbox  # noqa: E402
from tests.support.browser import visit_page  # noqa: E402
from tests.support.syncs import cli_env  # noqa: E402

START = "2026-11-01T00:00:00+00:00"


def synced_lake(shipments: int, folder: Path, window: float) -> Path:
    """The data folder of a lake holding `shipments` shipments with every model built (synced now unless
    `folder` already holds one)."""
    data = folder / "data"
    if (data / "ducklake" / "catalog.sqlite").exists():
        return data
    folder.mkdir(parents=True, exist_ok=True)
    sandbox = start_sandbox("--shipments", str(shipments), "--seed", "7", "--speed", "0", "--start", START,
                            "--rate-window", str(window), "--api-key", "sbx_bench_page")  # fmt: skip
    try:
        env = {**cli_env(sandbox.base_url, folder, window=window), "SOURCES__OCEAN_TRACKING__API_KEY": "sbx_bench_page",
               "SOURCES__OCEAN_TRACKING__APP_URL": sandbox.app_url}  # fmt: skip
        started = time.monotonic()
        subprocess.run([sys.executable, "-m", "pipelines", "sync", "--no-progress"], cwd=REPO, env=env, check=True,
                       stdout=subprocess.DEVNULL)  # fmt: skip
        print(f"{shipments:,} shipments synced in {time.monotonic() - started:.0f} s", file=sys.stderr)
    finally:
        sandbox.stop()
    return data


def measure(data: Path, repeat: int) -> dict[str, float]:
    """Medians over `repeat` rounds of writing the page afresh and opening it in Chromium."""
    store = default_lake_in(data)
    rounds = []
    with tempfile.TemporaryDirectory() as folder:
        for index in range(repeat):
            out = Path(folder) / f"page-{index}.html"
            started = time.monotonic()
            page = write_team_page(store, out)
            written = time.monotonic() - started
            visit = visit_page(out)
            if visit.errors:
                raise SystemExit(f"the page reported errors: {visit.errors[:3]}")
            rounds.append({"bytes": page.bytes, "write_s": written, "render_s": visit.render_seconds,
                           "marks": sum(visit.report.values())})  # fmt: skip
    return {key: statistics.median(run[key] for run in rounds) for key in rounds[0]}


def main(argv: list[str] | None = None) -> None:
    """Measure each scale (see the module docstring) and print one table."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shipments", default="200,10000", help="world sizes, comma-separated")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--window", type=float, default=1.0, help="the sandbox's rate window for the sync, seconds")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the lakes here (default: a temp dir)")
    args = parser.parse_args(argv)
    workdir = args.workdir or Path(tempfile.mkdtemp(prefix="team-page-"))
    rows = []
    for shipments in (int(value) for value in args.shipments.split(",")):
        figures = measure(synced_lake(shipments, workdir / str(shipments), args.window), args.repeat)
        rows.append((f"{shipments:,}", f"{figures['bytes'] / 1e6:.2f}", f"{figures['write_s']:.2f}",
                     f"{figures['render_s']:.2f}", f"{figures['marks']:,.0f}"))  # fmt: skip
    print(render(["shipments", "page MB", "write s", "open to drawn s", "marks drawn"], rows))
    print(f"medians of {args.repeat} rounds; lakes in {workdir}")


if __name__ == "__main__":
    main()
