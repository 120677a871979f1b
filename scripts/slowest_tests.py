"""Print the slowest tests of one or more JUnit XML reports (pytest's `--junitxml`), slowest first: what
scripts/test shows after its parallel and serial phases, as one list. With `--module-seconds FILE`, also writes
each test module's seconds there (`tests/module_seconds.json`: the order the parallel phase hands modules out,
longest first, `tests/support/suite_order.py`); scripts/test keeps a run's reports in `.test-reports/`. With `--replay
WORKERS`, also prints how long the parallel phase would take on that many workers with the modules handed out
in xdist's order (by number of tests) and longest first (`replay_schedule`):

    python scripts/slowest_tests.py [--top 25] [--module-seconds tests/module_seconds.json] [--replay 3] REPORT.xml [...]
"""

from __future__ import annotations

import argparse
import heapq
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


def tests_by_module(cases: list[tuple[float, str]]) -> dict[str, list[float]]:
    """The seconds of each test, by test module (its file's path), in the reports' order."""
    tests: dict[str, list[float]] = defaultdict(list)
    for case_seconds, node_id in cases:
        tests[node_id.split("::", 1)[0]].append(case_seconds)
    return tests


def module_seconds(cases: list[tuple[float, str]]) -> dict[str, float]:
    """The seconds of each test module (its file's path), longest first."""
    seconds = {module: sum(tests) for module, tests in tests_by_module(cases).items()}
    return {module: round(total, 1) for module, total in sorted(seconds.items(), key=lambda item: -item[1])}


def replay_schedule(cases: list[tuple[float, str]], order: list[str], workers: int) -> float:
    """The seconds the parallel phase would take if each test took what it took in `cases`, with the modules
    handed out in `order` by pytest-xdist's `--dist loadfile` rules (3.8, `LoadScopeScheduling`): a module
    to each worker, then another to a worker as soon as it has 2 tests or fewer left (the next module waits
    behind the current one's last tests). An estimate: on a loaded machine a test's seconds depend on what
    runs beside it."""
    tests = tests_by_module(cases)
    queue = list(order)
    left: list[list[float]] = [[] for _ in range(workers)]

    def hand_out(worker: int) -> None:
        if queue:
            left[worker].extend(tests[queue.pop(0)])

    for worker in range(workers):
        hand_out(worker)
    for worker in range(workers):
        if len(left[worker]) <= 2:
            hand_out(worker)
    running = [(left[worker][0], worker) for worker in range(workers) if left[worker]]
    heapq.heapify(running)
    end = 0.0
    while running:
        now, worker = heapq.heappop(running)
        left[worker].pop(0)
        end = max(end, now)
        if len(left[worker]) <= 2:
            hand_out(worker)
        if left[worker]:
            heapq.heappush(running, (now + left[worker][0], worker))
    return end


def main() -> int:
    """Entry point."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--top", type=int, default=25)
    parser.add_argument("--module-seconds", help="write each test module's seconds to this JSON file")
    parser.add_argument("--replay", type=int, metavar="WORKERS", help="replay the parallel phase on WORKERS workers")
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
    if args.replay:
        seconds, tests = module_seconds(cases), tests_by_module(cases)
        # xdist's order: by number of tests, ties in path order (about the collection's)
        by_count = sorted(sorted(tests), key=lambda module: -len(tests[module]))
        total = sum(seconds.values())
        print(f"{args.replay} workers, {total:,.0f} worker-seconds (floor {total / args.replay:,.0f} s): "
              f"xdist's order {replay_schedule(cases, by_count, args.replay):,.0f} s, "
              f"longest first {replay_schedule(cases, list(seconds), args.replay):,.0f} s")
    return 0


if __name__ == "__main__":
    sys.exit(main())
