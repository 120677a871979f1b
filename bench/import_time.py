"""How long loading the Dagster code location takes, against Dagster's own import.

Every run step and the daemon import `assets.definitions`; this prints the median wall time of each
import in fresh interpreters, and what the definitions add on top of Dagster's.

    python bench/import_time.py --repeat 7
"""

from __future__ import annotations

import argparse
import statistics
import subprocess
import sys
import time
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
PROBES = {
    "dagster": "import dagster",
    "dagster + dlt": "import dagster, dlt",
    "dagster + dagster_dbt": "import dagster, dagster_dbt",
    "assets.definitions": "import assets.definitions",
}


def time_import(statement: str) -> float:
    """Wall seconds of `python -c <statement>` in a fresh interpreter (process start included)."""
    started = time.perf_counter()
    subprocess.run([sys.executable, "-c", statement], cwd=REPO_ROOT, check=True)
    return time.perf_counter() - started


def main() -> None:
    """Print one line per probe: median and spread over `--repeat` fresh processes."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=7)
    args = parser.parse_args()
    time_import("pass")  # warm the file cache
    baseline = statistics.median(time_import("pass") for _ in range(args.repeat))
    medians = {}
    for name, statement in PROBES.items():
        runs = [time_import(statement) for _ in range(args.repeat)]
        medians[name] = statistics.median(runs)
        print(f"{name:<20} median {medians[name]:.2f} s  (min {min(runs):.2f}, max {max(runs):.2f}; "
              f"python start-up {baseline:.2f} s included)")
    extra = medians["assets.definitions"] - medians["dagster + dagster_dbt"]
    print(f"the definitions add {extra:.2f} s to Dagster's and dagster-dbt's own imports")


if __name__ == "__main__":
    main()
