"""Print the slowest tests of one or more JUnit XML reports (pytest's `--junitxml`), slowest first: what
scripts/test shows after its parallel and serial phases, as one list. With `--module-seconds FILE`, also writes
each test module's seconds there (`tests/module_seconds.json`: the order the parallel phase hands modules out,
longest first, `tests/conftest.py`); scripts/test keeps a run's reports in `.test-reports/`:

    python scripts/slowest_tests.py [--top 25] [--module-seconds tests/module_seconds.json] REPORT.xml [...]
"""

from __future__ import annotations

import argparse
import json
import sys
import xml.etree.ElementTree as ET
from collections import defaultdict


def test_cases(reports: list[str]) -> list[tuple[float, str]]:
    """Every test case of the reports: its seconds (setup, call and teardown) and its id."""
    cases = []
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            node_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            cases.append((float(case.get("time") or 0.0), node_id))
    return cases


def module_seconds(cases: list[tuple[float, str]]) -> dict[str, float]:
    """The seconds of each test module (its file's path), longest first."""
    seconds: dict[str, float] = defaultdict(float)
    for case_seconds, node_id in cases:
        seconds[node_id.split("::", 1)[0]] += case_seconds
    return {module: round(total, 1) for module, total in sorted(seconds.items(), key=lambda item: -item[1])}


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--module-seconds", help="write each test module's seconds to this JSON file")
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    cases = test_cases(args.reports)
    if args.module_seconds:
        with open(args.module_seconds, "w") as out:
            json.dump(module_seconds(cases), out, indent=1)
            out.write("\n")
    rows = sorted(cases, reverse=True)[: args.top]
    print(f"{len(rows)} slowest tests:")
    for seconds, node_id in rows:
        print(f"{seconds:8.1f}s  {node_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
