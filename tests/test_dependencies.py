"""The declared dependencies match the imports: deptry over the repo (configured in pyproject's [tool.deptry])."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[1]

# Pass 1, the shipped code: the scope, first-party names and per-package ignores are all in [tool.deptry].
SHIPPED = ["."]
# Pass 2, the dev code that pass 1 excludes (tests/ and bench/). `--exclude` replaces the config's list (which
# excludes these two folders) with one that excludes nothing here. Every rule but two applies: runtime
# dependencies the dev code does not use are fine (DEP002), and so are dev-group packages it imports (DEP004).
DEV = ["tests", "bench", "--exclude", ".*/__pycache__/", "--ignore", "DEP002,DEP004"]


@pytest.mark.parametrize("args", [SHIPPED, DEV], ids=["shipped-code", "dev-code"])
def test_declared_dependencies_match_imports(args: list[str]) -> None:
    """deptry reports a dependency that is declared but never imported (DEP002), a module imported but not
    declared (DEP001) or present only because another package depends on it (DEP003), and a dev-group
    package imported by shipped code (DEP004). Each of those reaches a user only later: an unused package is
    installed for nothing, and an undeclared one breaks the install once nobody else pulls it in (a
    dependency's own requirements change) or when only the runtime dependencies are installed. This test
    catches them in CI instead.

    A package that is needed but never imported (a CLI's web UI, a dependency of a method another package
    calls) belongs in pyproject's `[tool.deptry.per_rule_ignores]` with a comment saying why."""
    result = subprocess.run(
        [sys.executable, "-m", "deptry", *args, "--no-ansi"],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert result.returncode == 0, f"deptry {' '.join(args)} failed:\n{result.stdout}\n{result.stderr}"
