"""Print the slowest tests of one or more JUnit XML reports (pytest's `--junitxml`), slowest first: what
scripts/test shows after its parallel and serial phases, as one list.

    python scripts/slowest_tests.py [--top 25] REPORT.xml [REPORT.xml ...]
"""

from __future__ import annotations

import argparse
import sys
import xml.etree.ElementTree as ET


def slowest(reports: list[str], top: int) -> list[tuple[float, str]]:
    """The `top` test cases of the reports with the most seconds (setup, call and teardown), with their ids."""
    cases = []
    for report in reports:
        for case in ET.parse(report).getroot().iter("testcase"):
            node_id = f"{case.get('classname', '').replace('.', '/')}.py::{case.get('name')}"
            cases.append((float(case.get("time") or 0.0), node_id))
    return sorted(cases, reverse=True)[:top]


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("reports", nargs="+")
    args = parser.parse_args()
    rows = slowest(args.reports, args.top)
    print(f"{len(rows)} slowest tests:")
    for seconds, node_id in rows:
        print(f"{seconds:8.1f}s  {node_id}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
