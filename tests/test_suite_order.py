"""The parallel phase's order (tests/conftest.py `longest_modules_first`) and its replay
(`scripts/slowest_tests.py --replay`): pure units."""

from __future__ import annotations

from types import SimpleNamespace

from tests.support import load_script
from tests.support.suite_order import longest_modules_first


def test_modules_go_out_longest_first_unknown_ones_before_all_each_in_its_own_order():
    items = [SimpleNamespace(nodeid=f"tests/{module}.py::{test}") for module, test in
             [("short", "a"), ("long", "a"), ("new", "a"), ("short", "b"), ("long", "b")]]  # fmt: skip
    ordered = longest_modules_first(items, {"tests/short.py": 3.0, "tests/long.py": 90.0})
    assert [item.nodeid for item in ordered] == [
        "tests/new.py::a", "tests/long.py::a", "tests/long.py::b", "tests/short.py::a", "tests/short.py::b",
    ]


def test_the_replay_queues_the_next_module_behind_a_worker_with_two_tests_or_fewer_left():
    replay = load_script("slowest_tests").replay_schedule
    cases = [(10.0, "tests/one_long.py::a"), (5.0, "tests/one_medium.py::a"),
             *[(1.0, f"tests/many.py::t{n}") for n in range(5)]]  # fmt: skip
    # one worker: everything in a row
    assert replay(cases, ["tests/one_long.py", "tests/many.py", "tests/one_medium.py"], 1) == 20.0
    # two workers: the first takes the long module and, with one test left, the medium one queues behind it
    # (xdist's rule), while the other worker is done with its five short tests at 5 s
    assert replay(cases, ["tests/one_long.py", "tests/many.py", "tests/one_medium.py"], 2) == 15.0
    # and the same when the many short tests go first: the long module's worker takes the next one at once
    assert replay(cases, ["tests/many.py", "tests/one_long.py", "tests/one_medium.py"], 2) == 15.0
    # three workers: a module each, the long one alone sets the end
    assert replay(cases, ["tests/one_long.py", "tests/many.py", "tests/one_medium.py"], 3) == 10.0
