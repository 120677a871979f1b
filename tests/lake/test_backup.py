"""`lake backup` and `lake restore`, as a user runs them: a synced lake with a published write-back outcome
is backed up, the original deleted, the backup restored into an empty data dir; the restored lake holds the
same tables and rows, the journal its outcome, and the next sync carries on from the lake's dlt state."""

from __future__ import annotations

import shutil
import subprocess
import sys

import pytest

from pipelines.errors import ConfigurationError, InputError
from pipelines.journals.writes import WritebackStore
from pipelines.settings import WRITEBACK_JOURNAL_FILE_NAME, WRITEBACK_SCHEMA
from pipelines.warehouse import WarehouseStore
from pipelines.warehouse.maintenance import backup_lake, restore_lake
from tests.support.lakes import lake_in
from tests.support.syncs import cli_env, sync_once

ROW = {"row_key": "backup-test-row", "row_index": 1, "request_number": "MEDU1234567", "request_type": "bill_of_lading",
       "scac": "MSCU"}  # fmt: skip


def _lake(*args: str, env: dict[str, str]) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "pipelines", "lake", *args], env=env, capture_output=True,
                          text=True, timeout=300)  # fmt: skip


def _tables(store: WarehouseStore) -> dict[str, int]:
    with store.connect(read_only=True) as con:
        names = con.execute(
            "select table_schema, table_name from information_schema.tables where table_catalog = current_database() "
            "order by all"
        ).fetchall()
        return {f"{schema}.{table}": con.execute(f'select count(*) from {schema}."{table}"').fetchone()[0]
                for schema, table in names}  # fmt: skip


@pytest.mark.slow
def test_backup_then_restore_into_an_empty_dir_keeps_everything_and_syncs_on(own_sandbox, synced_copy, tmp_path):
    first = synced_copy  # the first sync: a copy of the shared one, of the world own_sandbox serves
    original = first.workdir
    journal = WritebackStore(original / "data" / WRITEBACK_JOURNAL_FILE_NAME)
    try:
        journal.record_tracking_outcome(ROW, "created", tracking_request_id="tr-1", http_status=201)
        journal.audit("create_tracking_request", ROW["request_number"], "created", http_status=201)
        journal.publish(first.store)
    finally:
        journal.close()
    before = _tables(first.store)
    assert before[f"{WRITEBACK_SCHEMA}.tracking_request_outcomes"] == 1
    assert before["ocean_tracking.containers"] > 0 and "ocean_tracking.map_features_geo" in before

    env = cli_env(own_sandbox.base_url, original)
    backup = _lake("backup", str(tmp_path / "backup"), env=env)
    assert backup.returncode == 0, backup.stderr
    shutil.rmtree(original / "data")  # the restored lake must need nothing of the original

    restored_dir = tmp_path / "restored"
    restore = _lake("restore", str(tmp_path / "backup"), "--data-dir", str(restored_dir / "data"), env=env)
    assert restore.returncode == 0, restore.stderr

    restored = lake_in(restored_dir / "data")
    assert _tables(restored) == before
    with restored.connect(read_only=True) as con:
        assert (
            con.execute("select data_path from ducklake_settings('lake')").fetchone()[0] == restored.data_path
        )
    journal = WritebackStore(restored_dir / "data" / WRITEBACK_JOURNAL_FILE_NAME)
    try:
        assert journal.tracking_outcome(ROW["row_key"])["tracking_request_id"] == "tr-1"
    finally:
        journal.close()

    again = _lake("restore", str(tmp_path / "backup"), "--data-dir", str(restored_dir / "data"), env=env)
    assert again.returncode == 2
    assert "A lake exists" in again.stderr and len(again.stderr.strip().splitlines()) == 1

    second = sync_once(own_sandbox, restored_dir)  # a new dlt folder: its state comes from the lake
    assert second.requests < first.requests, "ids fetched once and the map schedule came back with the lake"
    after = _tables(restored)
    assert after["ocean_tracking.containers"] == before["ocean_tracking.containers"]
    assert after["ocean_tracking._dlt_loads"] == before["ocean_tracking._dlt_loads"] + 1


def test_only_a_sqlite_catalog_with_local_files_is_covered(tmp_path):
    postgres = WarehouseStore(catalog="postgres:dbname=lake host=db", data_path="s3://bucket/lake/")
    with pytest.raises(ConfigurationError, match="pg_dump"):
        backup_lake(postgres, tmp_path / "b", journal=tmp_path / "j.sqlite")
    s3_files = WarehouseStore(catalog=f"sqlite:///{tmp_path}/catalog.sqlite", data_path="s3://bucket/lake/")
    with pytest.raises(ConfigurationError, match="versioning"):
        restore_lake(tmp_path / "b", s3_files, journal=tmp_path / "j.sqlite")


def test_no_backup_without_a_lake_nor_into_a_full_folder(tmp_path):
    store = lake_in(tmp_path / "data")
    with pytest.raises(ConfigurationError, match="run a sync first"):
        backup_lake(store, tmp_path / "backup", journal=tmp_path / "j.sqlite")
    assert not (tmp_path / "backup").exists()

    with store.writing(), store.connect() as con:  # a lake of one table
        con.execute("create table numbers as select range as n from range(3)")
    (tmp_path / "full").mkdir()
    (tmp_path / "full" / "notes.txt").write_text("mine")
    with pytest.raises(InputError, match="not an empty folder"):
        backup_lake(store, tmp_path / "full", journal=tmp_path / "j.sqlite")
    report = backup_lake(store, tmp_path / "backup", journal=tmp_path / "j.sqlite")
    assert (report.files, report.journal) == (0, False)  # three rows are inlined in the catalog
    assert sorted(path.name for path in (tmp_path / "backup").iterdir()) == [
        "backup.json",
        "catalog.sqlite",
        "files",
    ]

    restored = lake_in(tmp_path / "restored")
    restore_lake(tmp_path / "backup", restored, journal=tmp_path / "restored" / "j.sqlite")
    with restored.connect(read_only=True) as con:
        assert con.execute("select sum(n) from numbers").fetchone()[0] == 3
