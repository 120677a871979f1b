"""One item that fails every time never stops the account: it is skipped, listed in `sync_issues`, asked for
again by every sync, and leaves the table once it answers. What means the sync is wrong still fails it."""

from __future__ import annotations

import subprocess
import sys

import pytest

from tests.support.lakes import lake_in
from tests.support.sandboxes import FROZEN_WORLD, FULL_KEY, first_container, sandbox_stats, set_routes
from tests.support.syncs import SyncResult, cli_env, snapshot

pytestmark = pytest.mark.faults


def run_sync(server, workdir) -> tuple[subprocess.CompletedProcess, SyncResult]:
    """One `python -m pipelines sync` into the DuckLake under workdir/data (its dlt folder in workdir). The
    default attempts and deadline, with a short backoff: the sandbox's route faults fail every attempt, so
    waiting longer between them would only slow the test."""
    env = cli_env(
        server.base_url, workdir, OCEAN_TRACKING_PIPELINES_DIR=str(workdir / "dlt"),
        SOURCES__OCEAN_TRACKING__BACKOFF_FACTOR="0.01",
    )  # fmt: skip
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-models",
               "--geoparquet", str(workdir / "features.parquet")]
    done = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    return done, SyncResult({}, lake_in(workdir / "data"))


def loaded_tables(result: SyncResult) -> set[str]:
    """The tables in the warehouse (none when it was never written)."""
    if not result.store.exists():
        return set()
    with result.store.connect(read_only=True) as con:
        return {row[0] for row in con.execute(
            "select table_name from information_schema.tables where table_catalog = current_database()"
        ).fetchall()}


def without_container(tables: dict[str, list[tuple]], container_id: str) -> dict[str, list[tuple]]:
    """The snapshot with one container's map features left out."""
    return {**tables, "map_features": [row for row in tables["map_features"] if row[0] != container_id]}


@pytest.mark.slow
@pytest.mark.parametrize(("status", "body", "failing_syncs"), [(500, "json", 2), (404, "html", 1)])
def test_a_map_failing_every_time_is_skipped_listed_and_leaves_when_it_answers(
    status, body, failing_syncs, make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(**FROZEN_WORLD)
    broken = first_container(server)
    set_routes(server, [{"path": f"/v2/containers/{broken}/map_geojson", "status": status, "body": body}])

    seen = []
    for _ in range(failing_syncs):
        done, result = run_sync(server, tmp_path)
        assert done.returncode == 0, done.stderr
        warnings = [line for line in done.stderr.splitlines() if line.startswith("warning:")]
        assert len(warnings) == 1 and broken in warnings[0] and "sync_issues" in warnings[0], done.stderr
        assert "Traceback" not in done.stderr
        assert without_container(snapshot(result), broken) == without_container(clean_snapshot, broken)
        assert result.scalar(f"select count(*) from map_features where container_id = '{broken}'") == 0
        seen.append(result.query(
            "select resource, item_id, http_status, attempts, first_seen_at, last_seen_at from sync_issues"
        ))

    assert [rows[0][:4] for rows in seen] == [("map_features", broken, status, n) for n in range(1, failing_syncs + 1)]
    assert all(len(rows) == 1 for rows in seen)
    assert len({rows[0][4] for rows in seen}) == 1, "first_seen_at stays the first failure's"
    assert [rows[0][5] for rows in seen] == sorted({rows[0][5] for rows in seen}), "last_seen_at moves with each"

    set_routes(server, [])
    done, result = run_sync(server, tmp_path)

    assert done.returncode == 0, done.stderr
    assert "warning:" not in done.stderr
    assert result.scalar("select count(*) from sync_issues") == 0
    assert snapshot(result) == clean_snapshot


@pytest.mark.slow
def test_a_quarter_of_the_maps_failing_loads_the_rest_then_fails_the_sync_in_one_line(
    make_sandbox, tmp_path, clean_snapshot
):
    server = make_sandbox(**FROZEN_WORLD)
    set_routes(server, [{"path": "/v2/containers/[0-3]*/map_geojson", "status": 503}])

    done, result = run_sync(server, tmp_path)

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("error: map_features:") and "sync_issues" in lines[0], done.stderr
    failing = result.query("select item_id from sync_issues where resource = 'map_features'")
    expected = {row[0] for row in result.query("select id from containers where left(id, 1) in ('0', '1', '2', '3')")}
    assert {row[0] for row in failing} == expected and len(expected) > 10
    assert snapshot(result)["shipments"] == clean_snapshot["shipments"], "what arrived is loaded"


@pytest.mark.slow
def test_every_map_failing_stops_the_sync_early_and_commits_nothing(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    set_routes(server, [{"path": "/v2/containers/*/map_geojson", "status": 503}])

    done, result = run_sync(server, tmp_path)

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1 and "failed in a row" in lines[0] and "looks down" in lines[0], done.stderr
    map_requests = sandbox_stats(server)["faults_served"].get("route", 0)
    assert map_requests <= 5 * 20, "five maps' retries, not every map's"
    assert loaded_tables(result) == set()


@pytest.mark.parametrize(("status", "meaning"), [(401, "API key"), (403, "Forbidden")])
def test_a_refused_item_request_fails_the_sync_and_commits_nothing(status, meaning, make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    set_routes(server, [{"path": "/v2/vessels/*", "status": status}])

    done, result = run_sync(server, tmp_path)

    assert done.returncode == 2
    lines = done.stderr.strip().splitlines()
    assert lines and lines[0].startswith("error:") and "/v2/vessels/" in lines[0] and "Traceback" not in done.stderr
    assert meaning in done.stderr
    assert FULL_KEY not in done.stderr
    assert loaded_tables(result) == set(), "an extraction that failed commits nothing"


@pytest.mark.slow
def test_a_failing_list_page_fails_the_sync_and_leaves_the_previous_load_whole(make_sandbox, tmp_path):
    server = make_sandbox(**FROZEN_WORLD)
    first, before = run_sync(server, tmp_path)
    assert first.returncode == 0, first.stderr
    loads_before = before.query("select load_id, status from _dlt_loads order by load_id")
    rows_before = snapshot(before)
    set_routes(server, [{"path": "/v2/parties", "status": 503}])

    done, after = run_sync(server, tmp_path)

    line = done.stderr.strip().splitlines()
    assert done.returncode == 2 and len(line) == 1 and "/v2/parties" in line[0] and "HTTP 503" in line[0], done.stderr
    assert after.query("select load_id, status from _dlt_loads order by load_id") == loads_before
    assert snapshot(after) == rows_before, "nothing of the failed sync was committed"
    set_routes(server, [])
    again, _ = run_sync(server, tmp_path)
    assert again.returncode == 0 and "Finished the load" not in again.stdout, "no package was left pending"


@pytest.mark.slow
def test_on_a_delta_lake_the_issue_row_is_written_then_deleted(make_sandbox, tmp_path):
    from deltalake import DeltaTable

    server = make_sandbox(**FROZEN_WORLD)
    broken = first_container(server)
    set_routes(server, [{"path": f"/v2/containers/{broken}/map_geojson", "status": 500}])
    env = cli_env(server.base_url, tmp_path, SOURCES__OCEAN_TRACKING__BACKOFF_FACTOR="0.01")
    lake = tmp_path / "lake"
    command = [sys.executable, "-m", "pipelines", "sync", "--destination", "filesystem", "--lake-url", str(lake),
               "--no-progress"]  # fmt: skip

    def issue_rows() -> list[tuple[str, str]]:
        table = DeltaTable(str(lake / "ocean_tracking" / "sync_issues")).to_pyarrow_table()
        return [(row["resource"], row["item_id"]) for row in table.to_pylist()]

    failing = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    rows_while_failing = issue_rows()
    set_routes(server, [])
    lifted = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert failing.returncode == 0 and lifted.returncode == 0, failing.stderr + lifted.stderr
    assert rows_while_failing == [("map_features", broken)]
    assert issue_rows() == [], "dlt's hard_delete removed the row on the Delta lake too"
