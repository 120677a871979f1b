"""Models that cost what changed, on a lake real syncs wrote: an unchanged sync builds no model and commits
no model snapshot; a sync that changed the world rebuilds what reads the changed raw tables, to the rows a
full build gives; the lake's commits name the sync they belong to."""

from __future__ import annotations

import subprocess
from collections import Counter
from datetime import timedelta
from pathlib import Path

import pytest

from pipelines.settings import EVERY_TEST_HOURS_ENV, LAKE_NAME
from pipelines.sync import sync_account
from pipelines.warehouse import WarehouseStore
from pipelines.warehouse.destinations import ducklake_target
from pipelines.warehouse.maintenance import maintain_lake
from pipelines.warehouse.models import (
    LakeChanges,
    build_models,
    dbt_vars,
    mart_names,
    plan_build,
    tables_changed_since,
)
from tests.support.dagster import APP_URL, BuiltWarehouse, materialize_models
from tests.support.lakes import copy_lake
from tests.support.sandboxes import advance_clock
from tests.support.syncs import cli_env, make_client, sync_command

MODEL_SCHEMAS = ("analytics", "_analytics_staging")


@pytest.fixture
def built_copy(built: BuiltWarehouse, tmp_path: Path) -> BuiltWarehouse:
    """A writable copy of the `built` lake (every model built by the Dagster assets, which recorded the build)
    as the test's default lake, `tmp_path/data`."""
    copy_lake(built.folder / "data", tmp_path / "data")
    (tmp_path / BuiltWarehouse.OUTCOME).write_text((built.folder / BuiltWarehouse.OUTCOME).read_text())
    return BuiltWarehouse(tmp_path)


def _newest_snapshot(lake: BuiltWarehouse) -> int:
    return lake.query(f"select max(snapshot_id) from {LAKE_NAME}.snapshots()")[0][0]


def _snapshots_after(lake: BuiltWarehouse, snapshot: int) -> list[dict]:
    return lake.dicts(f"select snapshot_id, changes, commit_message from {LAKE_NAME}.snapshots() "
                      f"where snapshot_id > {snapshot} order by snapshot_id")  # fmt: skip


# Views that count days up to today in each container's time zone: read a minute apart, they differ whenever a
# terminal's local midnight falls between the reads (a clean-clone CI met New York's at 05:00 UTC)
TODAY_DEPENDENT = frozenset({"demurrage_exposure", "container_free_time"})


def _marts(lake: BuiltWarehouse) -> dict[str, list[tuple]]:
    return {name: lake.query(f"select * from analytics.{name} order by all") for name in mart_names()
            if name not in TODAY_DEPENDENT}  # fmt: skip


def test_an_unchanged_sync_builds_no_model_and_commits_no_model_snapshot(own_sandbox, built_copy, tmp_path):
    before, marts = _newest_snapshot(built_copy), _marts(built_copy)

    environment = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=APP_URL)  # the build's
    done = subprocess.run(sync_command(), env=environment, capture_output=True, text=True, timeout=600, check=False)

    assert done.returncode == 0, done.stdout + done.stderr
    assert "Models: no raw table the models read changed: nothing to build." in done.stdout
    snapshots = _snapshots_after(built_copy, before)
    assert len(snapshots) <= 10, snapshots
    touched = [s for s in snapshots if any(str(item).startswith(MODEL_SCHEMAS) for items in s["changes"].values()
                                           for item in items)]  # fmt: skip
    assert touched == [] and not any("dbt build" in (s["commit_message"] or "") for s in snapshots)
    assert _marts(built_copy) == marts


def test_a_changed_world_rebuilds_what_reads_it_as_a_full_build_would(own_sandbox, built_copy, tmp_path):
    def sync_after(days: float):
        advance_clock(own_sandbox, days * 86400)  # vessels move on: events, ETAs and statuses change
        with make_client(own_sandbox, tmp_path, app_url=APP_URL) as client:
            return sync_account(client, ducklake_target(built_copy.store), include_maps=False,
                                pipelines_dir=tmp_path / "dlt")  # fmt: skip

    before = _newest_snapshot(built_copy)

    result = sync_after(1)

    assert result.models_reason.startswith("changed since the last build: rows of ")
    assert "containers" in result.models_reason.split("rows of ", 1)[1].split("; ")[0].split(", ")
    assert result.models_reason.endswith("; the key tests of the raw tables and marts rebuilt"), "every test ran within the day"
    load_ids = list(result.loaded.load_info.loads_ids)
    messages = [s["commit_message"] for s in _snapshots_after(built_copy, before)]
    load, build = f"sync {', '.join(load_ids)}: dlt load", f"sync {', '.join(load_ids)}: dbt build"
    assert load in messages and any(message.startswith(build) for message in messages), messages
    assert all(message == load or message.startswith(build) for message in messages), "every commit names the sync"
    # each raw table's rows change in one commit: a merge's deletes and inserts (a history table's closed and new
    # versions) commit together, so no reader and no snapshot sees a changed row gone and its new version not yet in
    raw_tables = dict(built_copy.query(
        f"select t.table_id::varchar, t.table_name from __ducklake_metadata_{LAKE_NAME}.main.ducklake_table t join "
        f"__ducklake_metadata_{LAKE_NAME}.main.ducklake_schema s using (schema_id) where s.schema_name = 'ocean_tracking'"))
    commits_per_table = Counter(raw_tables[table] for s in _snapshots_after(built_copy, before) if s["commit_message"] == load
                                for table in {t for items in s["changes"].values() for t in items} if table in raw_tables)
    assert commits_per_table["shipment_eta_history"] == 1 and set(commits_per_table.values()) == {1}, commits_per_table
    commits = {s["commit_message"].rsplit(": ", 1)[1]: s["changes"] for s in _snapshots_after(built_copy, before)
               if (s["commit_message"] or "").count(": ") >= 2}  # fmt: skip
    # the incremental marts replaced the changed containers' rows in place, the aggregates are views of them, and the
    # build's record was rewritten in place: the build created no table (each one would stay in the catalog for good)
    assert "container_status" in commits and "transit_dwell_percentiles" not in commits
    assert not any("tables_created" in s["changes"] for s in _snapshots_after(built_copy, before)
                   if s["commit_message"].startswith(build))
    assert "stg_containers" not in commits, "a staging view is made again only when its raw table's layout changed"
    incremental = _marts(built_copy)

    full = build_models(built_copy.store, app_url=APP_URL, select=["fqn:*"])

    assert {name: rows for name, rows in full.rows.items() if name not in TODAY_DEPENDENT} == {
        name: len(rows) for name, rows in incremental.items()}
    assert _marts(built_copy) == incremental, "the models built for what changed differ from a full build"


def test_maintenance_between_a_load_and_its_build_leaves_the_build_what_changed(own_sandbox, built_copy, tmp_path,
                                                                               monkeypatch):
    advance_clock(own_sandbox, 86400)
    with make_client(own_sandbox, tmp_path, app_url=APP_URL) as client:
        sync_account(client, ducklake_target(built_copy.store), include_maps=False, models=False,
                     pipelines_dir=tmp_path / "dlt")  # fmt: skip

    maintain_lake(built_copy.store, grace=timedelta(0))  # thins every snapshot it may, up to the newest

    def plan():
        return plan_build(built_copy.store, dbt_vars(built_copy.store, app_url=APP_URL), raw_schema="ocean_tracking",
                          analytics_schema="analytics")  # fmt: skip

    within_the_day = plan()
    assert within_the_day.reason.startswith("changed since the last build: rows of ") and "containers" in within_the_day.reason
    assert "resource_type:test" not in within_the_day.select and within_the_day.every_test_at is not None
    assert within_the_day.dbt_arguments()[-4:] == ["--exclude", "test_name:accepted_values", "test_name:between",
                                                   "test_name:not_empty_when"], "the domain tests wait for the day's run"
    monkeypatch.setenv(EVERY_TEST_HOURS_ENV, "0")  # as when a day has passed since a build ran every test
    due = plan()
    assert due.reason.endswith("; every test") and "resource_type:test" in due.select and due.every_test_at is None
    assert "--exclude" not in due.dbt_arguments()


def test_the_dagster_models_build_nothing_when_nothing_changed(built_copy):
    before = _newest_snapshot(built_copy)

    result = materialize_models(built_copy.folder / "data")

    assert result.success
    assert result.get_asset_materialization_events() == []
    assert _snapshots_after(built_copy, before) == []


def test_another_app_url_release_or_layout_builds_every_model(built_copy):
    store = built_copy.store

    def plan(app_url: str = APP_URL):
        return plan_build(store, dbt_vars(store, app_url=app_url), raw_schema="ocean_tracking",
                          analytics_schema="analytics")

    same, moved = plan(), plan("https://elsewhere.example")
    assert same.skip and same.snapshot == _newest_snapshot(built_copy)
    assert not moved.skip and moved.select is None and "changed" in moved.reason

    with store.connect() as con:  # a new column, as dlt adds one when the service sends a new attribute
        con.execute("alter table ocean_tracking.containers add column newly_sent varchar")
    widened = plan()
    assert widened.select is None and widened.reason == "the layout of containers changed: every model"


@pytest.mark.parametrize("catalog", ["sqlite", "postgresql"])
def test_every_kind_of_row_change_counts_and_compaction_does_not(catalog, request, tmp_path):
    url = f"sqlite:///{tmp_path}/c.sqlite" if catalog == "sqlite" else request.getfixturevalue("postgres_database").dsn
    store = WarehouseStore(catalog=url, data_path=str(tmp_path / "files"))
    tables = store.catalog_tables_schema
    with store.connect() as con:
        con.execute(f"call {LAKE_NAME}.set_option('data_inlining_row_limit', 0)")  # files, as dlt's loads write
        con.execute("create schema raw; create table raw.kept as select range as id from range(10)")
        con.execute("create table raw.deleted_from as select range as id from range(10)")
        con.execute("create table raw.updated as select range as id from range(10)")
        start = con.execute(f"select max(snapshot_id) from {LAKE_NAME}.snapshots()").fetchone()[0]

        con.execute("delete from raw.deleted_from where id < 3")
        con.execute("update raw.updated set id = id + 100 where id = 5")
        con.execute("create table raw.created as select 1 as id")
        con.execute("alter table raw.kept add column note varchar")
        changes = tables_changed_since(con, start, "raw", metadata_schema=tables)
        assert changes.rows == {"deleted_from", "updated", "created"} and changes.layout == {"created", "kept"}
        after_changes = con.execute(f"select max(snapshot_id) from {LAKE_NAME}.snapshots()").fetchone()[0]

        con.execute(f"call ducklake_rewrite_data_files('{LAKE_NAME}', delete_threshold => 0)")
        assert tables_changed_since(con, after_changes, "raw", metadata_schema=tables) == LakeChanges(
            frozenset(), frozenset())

        con.execute(f"call ducklake_expire_snapshots('{LAKE_NAME}', older_than => now())")
        assert tables_changed_since(con, start, "raw", metadata_schema=tables) is None, (
            "changes since an expired snapshot are unknown")
