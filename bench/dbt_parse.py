"""What a build's dbt parse costs in a process of its own: with no saved parse, and re-using the one the
previous build saved (`pipelines.warehouse.models.invoke_dbt`).

    uv run python bench/dbt_parse.py [--repeat 5]

Each repeat starts two fresh interpreters on one empty temp folder (`TMPDIR`, where the runner keeps saved
parses): the first parses the whole project and saves its parse, the second re-uses it; each times its
`invoke_dbt` of `dbt parse` (the lake target, the vars a sync passes), not the interpreter's start. Prints the
medians and their ratio. A parse is the first step of every build a sync or a Dagster run makes.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
CHILD = """
import json, sys, time
from pathlib import Path
from pipelines.api.config import DEFAULT_APP_URL
from pipelines.warehouse import default_lake_in
from pipelines.warehouse.models import dbt_args, dbt_vars, invoke_dbt
store = default_lake_in(Path(sys.argv[1]))
args = dbt_args("parse", target="ducklake", variables=dbt_vars(store, app_url=DEFAULT_APP_URL))
started = time.monotonic()
outcome = invoke_dbt(args)
print(json.dumps({"seconds": time.monotonic() - started, "ok": bool(outcome.success)}))
"""


def parse_seconds(tmp: Path) -> float:
    """One `invoke_dbt` of `dbt parse` in a fresh interpreter whose temp folder is `tmp`; its seconds."""
    env = {**os.environ, "TMPDIR": str(tmp), "PYTHONPATH": str(REPO)}
    done = subprocess.run([sys.executable, "-c", CHILD, str(tmp / "data")], env=env, cwd=REPO,
                          capture_output=True, text=True, check=True)  # fmt: skip
    result = json.loads(done.stdout.strip().splitlines()[-1])
    if not result["ok"]:
        raise RuntimeError(f"dbt parse failed: {done.stderr[-300:]}")
    return result["seconds"]


def main(argv: list[str] | None = None) -> int:
    """Time the parse without and with a saved one, `--repeat` times each, and print the medians."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--repeat", type=int, default=5, help="pairs of fresh processes")
    args = parser.parse_args(argv)
    cold, warm = [], []
    for _ in range(args.repeat):
        with tempfile.TemporaryDirectory(prefix="bench-dbt-parse-") as tmp:
            cold.append(parse_seconds(Path(tmp)))
            warm.append(parse_seconds(Path(tmp)))
    first, again = statistics.median(cold), statistics.median(warm)
    print(f"dbt parse in a fresh process, median of {args.repeat}: {first:.2f} s with no saved parse, "
          f"{again:.2f} s re-using the saved one ({first / again:.1f}x)")  # fmt: skip
    return 0


if __name__ == "__main__":
    sys.exit(main())
