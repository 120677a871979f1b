"""Lake maintenance (compaction, snapshot expiry, cleanup) on a lake real syncs wrote, and time travel
after it: the containers as of an earlier sync are still there within the retention, gone past it."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import duckdb
import pytest

from assets.maintenance import lake_maintenance
from pipelines.settings import CLEANUP_GRACE_ENV, LAKE_NAME
from pipelines.warehouse import default_lake_in
from pipelines.warehouse.maintenance import maintain_lake
from tests.support.dagster import warehouse_resource
from tests.support.lakes import fingerprint
from tests.support.sandboxes import advance_clock
from tests.support.syncs import sync_once

CONTAINERS = "select id, current_status, pod_discharged_at from ocean_tracking.containers{at} order by id"


def _snapshot(store) -> tuple[int, object]:
    with store.connect(read_only=True) as con:
        return con.execute(
            f"select snapshot_id, snapshot_time from {LAKE_NAME}.snapshots() order by snapshot_id desc limit 1"
        ).fetchone()


def _rows(store, at: str = "") -> list[tuple]:
    with store.connect(read_only=True) as con:
        return con.execute(CONTAINERS.format(at=at)).fetchall()


@pytest.fixture
def two_syncs(own_sandbox, synced_copy, tmp_path):
    """A lake after one sync (a copy of the shared one), the world moved on 20 days, and a second sync; with
    the first sync's snapshot and its containers."""
    first = synced_copy
    version, taken_at = _snapshot(first.store)
    as_first = _rows(first.store)
    advance_clock(own_sandbox, 20 * 86400)
    sync_once(own_sandbox, tmp_path, include_maps=False)
    return first.store, version, taken_at, as_first


def test_maintenance_compacts_thins_each_sync_to_its_state_and_time_travel_reaches_back(two_syncs):
    store, version, taken_at, as_first = two_syncs
    assert _rows(store) != as_first, "the second sync changed containers (else time travel proves nothing)"

    report = maintain_lake(store)  # default retention: 30 days, so nothing written today expires

    assert report.files_rewritten + report.files_merged > 0
    assert report.after.data_files < report.before.data_files
    assert report.snapshots_expired == 0 and report.after.snapshots >= report.before.snapshots
    assert _rows(store, f" at (version => {version})") == as_first
    assert _rows(store, f" at (timestamp => '{taken_at.isoformat()}'::timestamptz)") == as_first

    thinned = maintain_lake(store, grace=timedelta(0))  # no grace: the sync just made may be thinned too

    with store.connect(read_only=True) as con:
        kept = con.execute(f"select snapshot_id, changes, commit_message from {LAKE_NAME}.snapshots()").fetchall()
        loads = {str(t) for (t,) in con.execute(f"select table_id from __ducklake_metadata_{LAKE_NAME}.main."
                                                "ducklake_table where table_name = '_dlt_loads'").fetchall()}  # fmt: skip
    assert thinned.snapshots_expired > 0 and thinned.after.snapshots < report.after.snapshots
    steps = [s for s in kept[1:-1] if (s[2] or ": dlt load").endswith(": dlt load") and not loads & {t for k in ("tables_inserted_into", "inlined_insert")
                                                                   for t in s[1].get(k) or []}]  # fmt: skip
    assert steps == [], "only each load's completion, named commits, the first and the newest stay"
    assert _rows(store, f" at (timestamp => '{taken_at.isoformat()}'::timestamptz)") == as_first
    assert _rows(store) != as_first and _rows(store, f" at (version => {kept[-1][0]})") == _rows(store)


def _scheduled_files(store) -> list[Path]:
    with closing(sqlite3.connect(store.catalog_file)) as catalog:
        paths = catalog.execute("select path from ducklake_files_scheduled_for_deletion").fetchall()
    return [Path(store.data_path) / path for (path,) in paths]


def test_a_sync_deletes_the_files_let_go_past_their_grace_before_it_loads(two_syncs, own_sandbox, tmp_path,
                                                                          monkeypatch):
    store, *_ = two_syncs
    maintain_lake(store, retention_days=0)  # expires the first sync's snapshots; an hour's grace
    let_go = _scheduled_files(store)
    assert let_go and all(path.exists() for path in let_go), "the maintenance kept them within its grace"

    monkeypatch.setenv(CLEANUP_GRACE_ENV, "0")  # as an hour later
    sync_once(own_sandbox, tmp_path, include_maps=False)

    assert not any(path.exists() for path in let_go), "not a night later, at the next load"
    assert not set(let_go) & set(_scheduled_files(store))


@pytest.mark.slow
def test_expired_snapshots_are_gone_and_their_files_deleted(two_syncs):
    store, version, _taken_at, _as_first = two_syncs
    current = _rows(store)

    report = maintain_lake(store, retention_days=0, grace=timedelta(0))

    assert report.snapshots_expired > 0 and report.after.snapshots == 1
    assert report.files_deleted > 0
    assert report.after.files_on_disk < report.before.files_on_disk
    assert _rows(store) == current, "maintenance never changes what the current snapshot holds"
    with pytest.raises(duckdb.Error, match=r"(?i)snapshot"):
        _rows(store, f" at (version => {version})")


@pytest.mark.slow
def test_the_dagster_asset_records_the_figures(two_syncs, tmp_path):
    store, *_ = two_syncs
    with dg.instance_for_test() as instance:
        result = dg.materialize([lake_maintenance], resources={"warehouse": warehouse_resource(tmp_path / "data")},
                                instance=instance)  # fmt: skip
    assert result.success
    (materialization,) = result.asset_materializations_for_node("ocean_tracking__lake_maintenance")
    metadata = {key: value.value for key, value in materialization.metadata.items()}
    assert metadata["data_files_after"] < metadata["data_files_before"]
    assert metadata["retention_days"] == 30
    with store.connect(read_only=True) as con:
        assert con.execute("select count(*) from ocean_tracking.containers").fetchone()[0] > 0


def test_a_copy_of_the_shared_lake_is_written_and_cleaned_up_on_its_own(synced, synced_copy):
    # a copied catalog would still name the shared lake's files: what a test does to its copy (a write, snapshot
    # expiry, cleanup of old files, deletion of an orphan) must reach none of them
    shared = fingerprint(synced.workdir / "data")
    copy_files = Path(synced_copy.store.data_path)
    stray = copy_files / "ocean_tracking" / "stray-from-a-killed-writer.parquet"  # an orphan, in the copy only
    stray.write_bytes(b"PAR1")
    with synced_copy.store.writing(), synced_copy.store.connect() as con:
        deleted = con.execute("delete from ocean_tracking.shipping_lines").fetchone()[0]  # its files: unneeded

    report = maintain_lake(synced_copy.store, retention_days=0, grace=timedelta(0))

    assert deleted == synced.scalar("select count(*) from ocean_tracking.shipping_lines") > 0
    assert report.snapshots_expired and report.files_deleted and report.orphans_deleted >= 1, report
    assert not stray.exists()
    assert synced_copy.scalar("select count(*) from ocean_tracking.shipping_lines") == 0
    assert fingerprint(synced.workdir / "data") == shared, "the copy's maintenance reached the shared lake"


def test_expiry_and_cleanup_are_to_the_instant(tmp_path):
    # DuckLake's own `older_than` compares by day on a SQLite catalog: given an instant between two snapshots
    # of one day it expired both
    store = default_lake_in(tmp_path / "data")
    with store.writing(), store.connect() as con:
        con.execute("create table numbers as select range as n from range(1000)")
        con.execute("delete from numbers where n < 100")
        between = con.execute(f"select max(snapshot_time) from {LAKE_NAME}.snapshots()").fetchone()[0]
        con.execute("delete from numbers where n < 200")
        kept = con.execute(f"select min(snapshot_id) from {LAKE_NAME}.snapshots() where snapshot_time > ?",
                           [between]).fetchone()[0]  # fmt: skip

    cutoff = between + timedelta(microseconds=1)
    report = maintain_lake(store, retention_days=1, now=cutoff + timedelta(days=1))

    with store.connect(read_only=True) as con:
        remaining = [row[0] for row in con.execute(f"select snapshot_id from {LAKE_NAME}.snapshots()").fetchall()]  # fmt: skip
        assert con.execute(f"select count(*) from numbers at (version => {kept})").fetchone()[0] == 800
    assert report.snapshots_expired > 0 and min(remaining) == kept, remaining
    assert report.files_deleted == 0, "files scheduled for deletion today wait out the hour's grace"

    # and its cleanup deleted a day's files or none: ours goes by the exact schedule times
    with closing(sqlite3.connect(store.catalog_file)) as catalog, catalog:
        (aged,) = catalog.execute("select data_file_id, path from ducklake_files_scheduled_for_deletion").fetchall()
        catalog.execute("update ducklake_files_scheduled_for_deletion set schedule_start = ? where data_file_id = ?",
                        [(datetime.now(UTC) - timedelta(minutes=61)).isoformat(" "), aged[0]])  # fmt: skip
    files = Path(store.data_path)
    assert (files / aged[1]).exists()
    with store.writing(), store.connect() as con:
        con.execute("delete from numbers where n < 300")

    past_grace = maintain_lake(store, retention_days=0)  # schedules the files of the snapshots it expires

    with closing(sqlite3.connect(store.catalog_file)) as catalog:
        young = catalog.execute("select path from ducklake_files_scheduled_for_deletion").fetchall()
    assert past_grace.files_deleted == 1 and not (files / aged[1]).exists()
    assert young and all((files / path).exists() for (path,) in young), "files within the grace stay, scheduled"

    again = maintain_lake(store, retention_days=0, grace=timedelta(0))
    assert again.files_deleted == len(young), "with no grace, every file scheduled so far goes"
