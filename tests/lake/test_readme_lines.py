"""The README's analyst lines work as printed, offline: the DuckDB command line and the Python one-liner
attach the lake a sync wrote, read-only, and query it; the time-travel example's syntax runs."""

from __future__ import annotations

import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.warehouse.models import build_models
from tests.conftest import lake_in
from tests.e2e.conftest import sync_once

pytestmark = pytest.mark.slow
README = Path(__file__).resolve().parents[2] / "README.md"


def _readme_line(prefix: str) -> list[str]:
    (line,) = [line for line in README.read_text().splitlines() if line.startswith(prefix)]
    return shlex.split(line.split("  #")[0])


@pytest.fixture(scope="module")
def synced_dir(sandbox, tmp_path_factory) -> Path:
    """A working directory whose `data/ducklake` a sync and the models wrote, as after `bash scripts/demo`."""
    workdir = tmp_path_factory.mktemp("readme")
    store = sync_once(sandbox, workdir, include_maps=False).store
    build_models(store, app_url=sandbox.app_url)
    return workdir


def test_the_duckdb_cli_line(synced_dir):
    command = _readme_line(".venv/bin/duckdb -cmd")
    command[0] = str(Path(sys.executable).with_name("duckdb"))
    done = subprocess.run([*command, "-csv", "-c", "select count(*) > 0 from ocean_tracking.containers"],
                          cwd=synced_dir, capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0 and done.stdout.splitlines()[-1] == "true", done.stderr


def test_the_python_line(synced_dir):
    command = _readme_line('.venv/bin/python -c "import duckdb')
    command[0] = sys.executable
    done = subprocess.run(command, cwd=synced_dir, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    assert "container_status" not in done.stderr and "│" in done.stdout


def test_the_time_travel_example(synced_dir):
    sql = re.search(r"```sql\n(select .+?;)", README.read_text(), re.S)[1]
    sql = re.sub(r"timestamptz '[^']+'", "now()", sql)  # the README's date is an example; now() is after the sync
    with lake_in(synced_dir / "data").connect(read_only=True) as con:
        assert con.execute(sql).fetchall() == con.execute(
            "select id, current_status, pod_discharged_at from ocean_tracking.containers"
        ).fetchall()
