"""README.md as a new user meets it. Every line of its ```bash blocks runs as written against the sandbox, in a
working directory laid out like the project's (`.venv`, `data/`), except the lines named in `NOT_RUN_HERE`
(the real service's key, and commands another test runs) and its Dagster block, which
tests/assets/test_daemon_run.py runs against a real daemon. Lines that need a synced lake share one sync:
the README's own `sync` line. Its TOML example names only settings the product reads, and its settings
table is the one `pipelines/settings.py` renders. The analyst lines of docs/warehouse.md run on the same lake."""

from __future__ import annotations

import re
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest
import requests

from demo.__main__ import DEMO_API_KEY, sandbox_arguments
from pipelines.api.config import KNOWN_SETTINGS
from pipelines.settings import API_KEY_ENV, DATASET_NAME
from sandbox.launcher import start_sandbox
from tests.support.lakes import lake_in
from tests.support.readme import README, REPO, block_with, fenced_lines
from tests.support.syncs import cli_env

WAREHOUSE_DOC = REPO / "docs" / "warehouse.md"
NOT_RUN_HERE = {
    f"export {API_KEY_ENV}=...": "the real service's key: here the sandbox's is set instead",
    "bash scripts/test": "the test suite itself",
    "bash scripts/demo": "bootstrap.sh, then `python -m demo`, minutes long: its sandbox and its failure path run below",
    "bash scripts/dagster-dev": "tests/assets/test_webserver.py starts it and stops it",
}
SYNC_LINE = ".venv/bin/python -m pipelines sync"
DAGSTER_BLOCK = block_with(".venv/bin/dagster job launch")  # tests/assets/test_daemon_run.py runs it
SYNC_BLOCK = block_with(SYNC_LINE)
ON_THE_LAKE = [line for line in fenced_lines() if line not in (*NOT_RUN_HERE, *DAGSTER_BLOCK, *SYNC_BLOCK)]
ANALYST_QUERY = "select count(*) > 0 as loaded from ocean_tracking.containers;\n"  # typed into a shell a line opens


def run(line: str, workdir: Path, env: dict[str, str]) -> subprocess.CompletedProcess:
    """`line` run by bash in `workdir`, as a user types it; an interactive shell it opens reads ANALYST_QUERY."""
    return subprocess.run(["bash", "-c", line], cwd=workdir, env=env, input=ANALYST_QUERY, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


@pytest.fixture(scope="module")
def readme_lake(sandbox, tmp_path_factory) -> tuple[Path, dict[str, str]]:
    """A working directory laid out like the project's, with a `data/` as the demo leaves one, after the
    README's real-account block ran in it against the session's sandbox (the key and base URL set as the
    README's `export` line would set the real ones)."""
    workdir = tmp_path_factory.mktemp("readme")
    (workdir / ".venv").symlink_to(Path(sys.executable).parents[1], target_is_directory=True)
    (workdir / "data").mkdir()
    env = cli_env(sandbox.base_url, workdir)
    for line in SYNC_BLOCK:
        if line not in NOT_RUN_HERE:
            done = run(line, workdir, env)
            assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    return workdir, env


@pytest.mark.slow
def test_the_real_account_block_moves_the_demo_aside_and_syncs(readme_lake):
    workdir, _ = readme_lake
    assert (workdir / "data-demo").is_dir()
    assert (workdir / "data" / "ducklake" / "catalog.sqlite").is_file()


@pytest.mark.slow
@pytest.mark.parametrize("line", ON_THE_LAKE)
def test_each_readme_line_runs_as_written(readme_lake, line):
    done = run(line, *readme_lake)
    assert done.returncode == 0, f"{line}\n{done.stderr[-3000:]}"
    assert done.stdout.strip() and "Traceback" not in done.stderr


def test_every_line_not_run_here_is_still_in_the_readme():
    lines = fenced_lines()
    assert set(NOT_RUN_HERE) <= set(lines), set(NOT_RUN_HERE) - set(lines)
    assert SYNC_LINE in SYNC_BLOCK and ON_THE_LAKE


def test_the_toml_example_names_only_settings_the_product_reads():
    (example,) = re.findall(r"```toml\n(.*?)```", README.read_text(), re.S)
    uncommented = re.sub(r"(?m)^# ", "", example)  # the commented settings are settings too
    section = tomllib.loads(uncommented)["sources"]["ocean_tracking"]
    assert set(section) <= KNOWN_SETTINGS, set(section) - KNOWN_SETTINGS


def test_the_settings_table_is_the_one_settings_py_renders():
    done = subprocess.run([sys.executable, "scripts/settings_table.py", "--check"], cwd=REPO, capture_output=True,
                          text=True)  # fmt: skip
    assert done.returncode == 0, done.stdout


def test_every_environment_variable_in_settings_py_is_in_the_table():
    import pipelines.settings as settings

    named = {value for name, value in vars(settings).items() if name.endswith("_ENV") and isinstance(value, str)}
    documented = {entry.name for entry in settings.SETTINGS}
    assert named <= documented, f"declare these with setting(...): {sorted(named - documented)}"


@pytest.mark.slow
def test_the_analyst_lines_of_the_warehouse_doc(readme_lake):
    workdir, env = readme_lake
    # the lines with another tool than the README's (its `lake session` lines run above)
    lines = [line for line in block_with(".venv/bin/duckdb", WAREHOUSE_DOC) if "pipelines lake session" not in line]
    assert len(lines) == 2, lines
    for line in lines:
        done = run(line, workdir, env)
        assert done.returncode == 0 and done.stdout.strip(), f"{line}\n{done.stderr[-3000:]}"


@pytest.mark.slow
def test_the_time_travel_example_of_the_warehouse_doc(readme_lake):
    workdir, _ = readme_lake
    sql = re.search(r"```sql\n(select .+?;)", WAREHOUSE_DOC.read_text(), re.S)[1]
    sql = re.sub(r"timestamptz '[^']+'", "now()", sql)  # the doc's date is an example; now() is after the sync
    with lake_in(workdir / "data").connect(read_only=True) as con:
        assert con.execute(sql).fetchall() == con.execute(
            "select id, current_status, pod_discharged_at from ocean_tracking.containers"
        ).fetchall()


@pytest.mark.slow
def test_the_demos_sandbox_answers_to_one_key_with_one_world_every_run():
    """What lets the demo run again: its lake answers to the key it was loaded with, and the same seed
    makes the same world."""
    worlds = []
    for _ in range(2):
        with start_sandbox(*sandbox_arguments(shipments=50, seed=7, rate_window=3.0)) as sandbox:
            assert sandbox.api_key == DEMO_API_KEY
            page = requests.get(f"{sandbox.base_url}/shipments", params={"page[size]": 5}, timeout=30,
                                headers={"Authorization": f"Token {sandbox.api_key}"})  # fmt: skip
            page.raise_for_status()
            worlds.append([shipment["id"] for shipment in page.json()["data"]])
    assert worlds[0] and worlds[0] == worlds[1]


def lake_state(data: Path) -> tuple:
    """What a write would change: the lake's snapshots and the rows of its containers."""
    with lake_in(data).connect(read_only=True) as con:
        snapshots = con.execute("select max(snapshot_id) from lake.snapshots()").fetchone()
        return snapshots, con.execute(f"select count(*) from {DATASET_NAME}.containers").fetchone()


@pytest.mark.slow
def test_the_demo_over_another_accounts_lake_fails_in_one_line_and_keeps_it(readme_lake, tmp_path):
    """The README's lake was loaded with another key than the demo's (as a real account's would be): the
    demo says so in one line, without Dagster's traceback, and leaves the lake as it is."""
    workdir, env = readme_lake
    before = lake_state(workdir / "data")
    shutil.copy(REPO / "dagster.yaml", tmp_path / "dagster.yaml")  # the project's instance, its state under workdir
    done = subprocess.run([sys.executable, "-m", "demo", "--shipments", "50"], cwd=workdir,
                          env={**env, "DAGSTER_HOME": str(tmp_path)}, capture_output=True, text=True, timeout=600)  # fmt: skip
    assert done.returncode == 1, done.stdout + done.stderr
    (line,) = done.stderr.strip().splitlines()
    assert line.startswith("error: the demo failed:") and "another API key" in line, line
    assert "Traceback" not in done.stdout and "0/0" not in done.stdout
    assert lake_state(workdir / "data") == before
