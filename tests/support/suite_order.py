"""The order the parallel phase hands the test modules out in: longest first, by the seconds each took in a
whole run (`tests/module_seconds.json`, written by `scripts/slowest_tests.py --module-seconds`)."""

from __future__ import annotations

from pathlib import Path

import pytest

# The seconds each test module took in a whole run (`python scripts/slowest_tests.py --module-seconds`), to hand
# the longest modules to the xdist workers first (`longest_modules_first`).
MODULE_SECONDS = Path(__file__).parents[1] / "module_seconds.json"


def longest_modules_first(items: list[pytest.Item], module_seconds: dict[str, float]) -> list[pytest.Item]:
    """The items with their modules in descending order of the seconds they last took (a module not timed yet
    first, as if the longest), each module's tests in their own order. scripts/test runs one module per xdist
    worker at a time (`--dist loadfile`) in this order (`--no-loadscope-reorder`): longest-first list
    scheduling, which pytest-xdist does not offer (its own order is by number of tests). A 4-worker run's report
    replayed (`scripts/slowest_tests.py --replay 4`): 1,284 s in xdist's order, 1,248 s longest first, the
    floor of its 4,991 worker-seconds (the run itself took 1,277 s). The same order on every worker, as xdist
    requires: the file's seconds, then the collection's."""
    modules: dict[str, list[pytest.Item]] = {}
    for item in items:
        modules.setdefault(item.nodeid.split("::", 1)[0], []).append(item)
    ordered = sorted(modules, key=lambda module: -module_seconds.get(module, float("inf")))
    return [item for module in ordered for item in modules[module]]
