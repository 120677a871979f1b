"""Analysts on the lake. `lake session`: DuckDB's own command line on the lake, ready at once and offline. Run as a
user runs it (`python -m pipelines lake session`), with a DuckDB home of its own, so the extensions it finds are
the ones it installed from the wheels (auto-install is off: nothing is downloaded). And analysts beside the
schedule: sessions open while syncs write."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.settings import ACCOUNTS_ENV, LAKE_NAME
from pipelines.warehouse.connections import BUNDLED, bundled_extension_path, offline_connection
from tests.support.lakes import copy_lake, lake_in
from tests.support.sandboxes import advance_clock
from tests.support.syncs import cli_env

OFFLINE = {
    "http_proxy": "http://127.0.0.1:9",
    "https_proxy": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
}


def _lake(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", "lake", *args], env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip


@pytest.fixture(scope="module")
def lake_env(synced, tmp_path_factory) -> dict[str, str]:
    """The environment of a process pointed at the shared `synced` lake (its sessions are read-only), with an
    empty DuckDB home of its own."""
    workdir = tmp_path_factory.mktemp("session")
    (workdir / "home").mkdir()
    return cli_env("http://127.0.0.1:9/v2", workdir, HOME=str(workdir / "home"),
                   OCEAN_TRACKING_DATA_DIR=str(synced.workdir / "data"), **OFFLINE)


@pytest.mark.slow
def test_a_query_through_the_duckdb_command_line_matches_the_store(synced, lake_env):
    result, env = synced, lake_env
    expected = result.scalar("select count(*) from containers")
    assert expected > 0

    run = _lake(
        "session", "--sql", "select count(*) as n from ocean_tracking.containers", "--mode", "csv", env=env
    )

    assert run.returncode == 0, run.stderr
    assert run.stdout.split() == ["n", str(expected)]
    installed = Path(env["HOME"]) / ".duckdb" / "extensions"
    for name in BUNDLED:
        (copy,) = installed.rglob(f"{name}.duckdb_extension")  # the wheel's binary, installed offline
        assert copy.read_bytes() == bundled_extension_path(name).read_bytes()


@pytest.mark.slow
def test_spatial_is_loaded_and_the_session_is_read_only(lake_env):
    env = lake_env
    geometry = _lake("session", "--sql", "select st_astext(st_point(1, 2)) as p", "--mode", "csv", env=env)
    assert geometry.stdout.splitlines() == ["p", "POINT (1 2)"], geometry.stderr

    write = _lake("session", "--sql", "create table ocean_tracking.scratch as select 1", env=env)
    assert write.returncode != 0
    assert "read-only" in (write.stdout + write.stderr).lower()


@pytest.mark.slow
def test_print_sql_gives_statements_another_duckdb_can_run(synced, lake_env):
    result, env = synced, lake_env
    run = _lake("session", "--print-sql", env=env)
    assert run.returncode == 0, run.stderr
    statements = [line for line in run.stdout.splitlines() if line.strip()]
    assert any(line.startswith("ATTACH 'ducklake:sqlite:") and "READ_ONLY" in line for line in statements)
    assert statements[-1] == f"USE {LAKE_NAME};"

    con = offline_connection()
    try:
        for statement in statements:
            con.execute(statement)
        count = con.execute("select count(*) from ocean_tracking.containers").fetchone()[0]
    finally:
        con.close()
    assert count == result.scalar("select count(*) from containers")


@pytest.mark.slow
def test_a_session_opens_in_the_marts_of_its_account(tmp_path):
    """`show tables` lists the marts at once (the lake's default schema is empty); with accounts, those of the
    account named; the raw tables stay a `schema.table` away."""
    store = lake_in(tmp_path / "data")
    with store.writing(), store.connect() as con:
        con.execute("""
            create schema ocean_tracking; create table ocean_tracking.containers as select 1 as id;
            create schema analytics; create table analytics.container_status as select 1 as id;
            create schema analytics_emea; create table analytics_emea.container_free_time as select 1 as id;
        """)  # fmt: skip
    env = cli_env("http://127.0.0.1:9/v2", tmp_path)
    query = [
        "session",
        "--mode",
        "csv",
        "--sql",
        "show tables; select count(*) as n from ocean_tracking.containers",
    ]

    single = _lake(*query, env=env)
    assert single.returncode == 0, single.stderr
    assert single.stdout.split() == ["name", "container_status", "n", "1"]
    emea = _lake(*query, "--account", "emea", env={**env, ACCOUNTS_ENV: "emea,apac"})
    assert emea.returncode == 0, emea.stderr
    assert emea.stdout.split() == ["name", "container_free_time", "n", "1"]


@pytest.mark.slow
def test_a_home_duckdb_cannot_write_is_one_line_saying_so(tmp_path):
    """DuckDB keeps extensions under $HOME; a home that is no folder (or not this user's) stops a sync before
    any request, in one line."""
    (tmp_path / "home").write_text("a file, not a folder")
    env = cli_env("http://127.0.0.1:9/v2", tmp_path, HOME=str(tmp_path / "home"))
    run = subprocess.run([sys.executable, "-m", "pipelines", "sync", "--no-progress"], env=env,
                         capture_output=True, text=True, timeout=120)  # fmt: skip
    assert run.returncode == 2
    (line,) = run.stderr.strip().splitlines()
    assert f"{tmp_path / 'home'}/.duckdb/extensions, which cannot be created" in line and "HOME" in line


def test_no_lake_yet_is_one_line_saying_to_sync(tmp_path):
    env = cli_env("http://127.0.0.1:9/v2", tmp_path)
    run = _lake("session", "--sql", "select 1", env=env)
    assert run.returncode == 2
    assert run.stdout == ""
    (line,) = run.stderr.strip().splitlines()
    assert "run a sync first" in line


# ---- analysts beside the schedule ------------------------------------------------------------------------
# Analysts query while the schedule writes (issue 14's bar): analyst processes hold read-only sessions on the
# lake and query every 0.5 s while three CLI syncs run, the world's clock advanced between them. Every sync
# succeeds, no analyst query fails, the analyst in autocommit sees each sync's load without reconnecting, and
# the one inside a long transaction keeps its snapshot and blocks nobody.


SYNCS = 3


def _analyst(catalog: str, *extra: str) -> subprocess.Popen:
    process = subprocess.Popen(
        [sys.executable, "-m", "tests.support.analyst", catalog, "--every", "0.5", *extra],
        stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
    )  # fmt: skip
    assert json.loads(process.stdout.readline()) == {"ready": True}, process.stderr.read()
    return process


def _stop(process: subprocess.Popen) -> list[dict]:
    out, err = process.communicate(input="", timeout=60)
    assert process.returncode == 0, err
    return [json.loads(line) for line in out.splitlines()]


@pytest.mark.slow
def test_analysts_query_through_three_syncs_without_an_error(own_sandbox, built, tmp_path):
    # the lake an earlier sync and its models left (a copy of the shared one, of the world own_sandbox serves),
    # then three CLI syncs: two loads, then a load and every model built again (both kinds of write meet
    # the analysts; a model build per sync would repeat the same kind three times)
    env = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=own_sandbox.app_url)
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-maps"]
    catalog = copy_lake(built.data_dir, tmp_path / "data").catalog

    autocommit, long_transaction = _analyst(catalog), _analyst(catalog, "--long-transaction")
    try:
        for done in range(1, SYNCS + 1):
            advance_clock(own_sandbox, 2 * 86400)
            models = [] if done == SYNCS else ["--no-models"]
            sync = subprocess.run([*command, *models], env=env, capture_output=True, text=True, timeout=300)
            assert sync.returncode == 0, sync.stderr
    finally:
        seen, held = _stop(autocommit), _stop(long_transaction)

    for lines in (seen, held):
        errors = [line["error"] for line in lines if "error" in line]
        assert errors == [], errors
    loads = sorted({line["load"] for line in seen})
    assert len(loads) == SYNCS + 1, f"the analyst saw loads {loads}: one per sync, the first one included"
    assert seen[-1]["events"] > seen[0]["events"], "new transport events arrived as the clock moved"
    assert len({(line["load"], line["events"]) for line in held}) == 1, "a transaction keeps its snapshot"
    assert len(seen) >= 2 * SYNCS
