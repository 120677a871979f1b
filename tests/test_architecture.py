"""The house rules of docs/architecture.md, kept true by the suite: who may import whom, no import cycles,
modules of a readable size, and a Dagster code location whose import touches nothing."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import grimp
import pytest

from tests.support.import_probe import IMPORT_PROBE

REPO_ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ("pipelines", "assets", "sandbox", "demo")
MAX_MODULE_LINES = 500
LONG_MODULE_REASON = "# longer than 500 lines because"
# The pipeline's rooms hold few modules, none past this many lines, and no fragment only one module uses.
MAX_PIPELINE_MODULES = 40  # 36th: pipelines/warehouse/retype.py (`lake migrate --retype`); 37th: warehouse/session.py (the analysts' session, apart from the models' runner); 38th: warehouse/dbt_plugin.py (so no command imports dbt until it builds); 39th-40th: pipelines/page (the team page: what it shows, read from the marts; drawn and written)
MAX_PIPELINE_MODULE_LINES = 600
MIN_SHARED_MODULE_LINES = 60


def test_import_contracts_hold():
    """`lint-imports` checks the contracts in pyproject's [tool.importlinter]: the pipeline imports neither
    the Dagster code location nor the sandbox, the sandbox imports nothing of ours, and the pipeline's rooms
    import only the rooms below them."""
    result = subprocess.run(
        [str(Path(sys.executable).with_name("lint-imports")), "--no-cache"],
        cwd=REPO_ROOT, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stdout + result.stderr


def strongly_connected(graph: dict[str, set[str]]) -> list[set[str]]:
    """Tarjan's strongly connected components of more than one module (the import cycles)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on_stack: set[str] = set()
    found: list[set[str]] = []

    def visit(node: str) -> None:
        index[node] = low[node] = len(index)
        stack.append(node)
        on_stack.add(node)
        for nxt in graph.get(node, ()):
            if nxt not in index:
                visit(nxt)
                low[node] = min(low[node], low[nxt])
            elif nxt in on_stack:
                low[node] = min(low[node], index[nxt])
        if low[node] == index[node]:
            component = set()
            while True:
                member = stack.pop()
                on_stack.discard(member)
                component.add(member)
                if member == node:
                    break
            if len(component) > 1:
                found.append(component)

    sys.setrecursionlimit(max(sys.getrecursionlimit(), 10_000))
    for node in sorted(graph):
        if node not in index:
            visit(node)
    return found


def test_strongly_connected_finds_a_cycle_and_only_cycles():
    graph = {"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}
    assert strongly_connected(graph) == [{"a", "b", "c"}]
    assert strongly_connected({"a": {"b"}, "b": set()}) == []


def test_no_module_imports_one_that_imports_it_back():
    """Every import counts, also those under `if TYPE_CHECKING:` and inside functions; a package's
    `__init__` counts as a module of its own."""
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    edges = {
        module: {imported for imported in graph.find_modules_directly_imported_by(module)
                 if imported.split(".")[0] in PACKAGES}
        for module in graph.modules
    }  # fmt: skip
    assert strongly_connected(edges) == []


def test_the_pipeline_is_a_few_rooms_of_whole_modules():
    """At most `MAX_PIPELINE_MODULES` modules under `pipelines/` (package `__init__`s included), none longer than
    `MAX_PIPELINE_MODULE_LINES`, and none shorter than `MIN_SHARED_MODULE_LINES` that a single module imports:
    such a fragment belongs in its caller."""
    paths = sorted((REPO_ROOT / "pipelines").rglob("*.py"))
    assert len(paths) <= MAX_PIPELINE_MODULES, [str(path.relative_to(REPO_ROOT)) for path in paths]
    lines = {path: len(path.read_text().splitlines()) for path in paths}
    assert [str(path) for path, count in lines.items() if count > MAX_PIPELINE_MODULE_LINES] == []
    graph = grimp.build_graph(*PACKAGES, cache_dir=None)
    fragments = []
    for path, count in lines.items():
        module = ".".join(path.relative_to(REPO_ROOT).with_suffix("").parts).removesuffix(".__init__")
        callers = graph.find_modules_that_directly_import(module) - {module}
        if count < MIN_SHARED_MODULE_LINES and len(callers) == 1:
            fragments.append(f"{module} ({count} lines, imported by {next(iter(callers))} only)")
    assert fragments == []


def test_modules_stay_readable_or_say_why_not():
    too_long = []
    for package in PACKAGES:
        for path in sorted((REPO_ROOT / package).rglob("*.py")):
            lines = path.read_text().splitlines()
            if len(lines) > MAX_MODULE_LINES and not any(LONG_MODULE_REASON in line for line in lines[:5]):
                too_long.append(f"{path.relative_to(REPO_ROOT)} ({len(lines)} lines)")
    assert not too_long, f"split these, or say why at their top with '{LONG_MODULE_REASON} ...': {too_long}"


@pytest.fixture
def empty_workdir(tmp_path: Path) -> Path:
    """An empty working directory, with every place the definitions could write pointed into it."""
    (tmp_path / "work").mkdir()
    return tmp_path / "work"


@pytest.mark.slow
def test_loading_the_definitions_touches_nothing(empty_workdir: Path):
    """Every run step and the daemon import the code location: the import opens no database, writes no
    file, connects to nothing, and leaves dlt, geopandas and matplotlib to the runs that need them."""
    env = {
        "PATH": str(Path(sys.executable).parent),
        "PYTHONPATH": str(REPO_ROOT),
        "DAGSTER_HOME": str(empty_workdir),
        "OCEAN_TRACKING_DATA_DIR": str(empty_workdir / "data"),
        "HOME": str(empty_workdir),
        "PYTHONDONTWRITEBYTECODE": "1",  # Python's own .pyc cache is not the definitions writing
    }
    result = subprocess.run(
        [sys.executable, "-c", IMPORT_PROBE],
        cwd=empty_workdir, env=env, capture_output=True, text=True, timeout=120, check=False,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    probe = json.loads(result.stdout.strip().splitlines()[-1])
    assert probe["events"] == []
    assert probe["heavy"] == []
    assert list(empty_workdir.iterdir()) == []
