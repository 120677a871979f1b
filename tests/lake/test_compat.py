"""The lake attached once per sync (`pipelines.compat.lake_connections_kept`): dlt's ducklake destination would
open and attach a connection for every borrow (each table's load job, each merge, the state, every read of the
warehouse during the extraction); inside a sync it attaches once and every connection is detached and closed
when the sync ends. Every in-memory DuckDB, ours and dlt's, spills into a folder of its own
(`compat.own_spill_directory`). The other private calls into dlt and requests `compat` holds are pinned here too:
an upgrade that changes what they rely on fails these tests first."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import duckdb
import pytest

from pipelines import compat
from tests.support import REPO
from tests.support.syncs import ENTITY_TABLES, sync_once


@pytest.mark.slow
def test_a_sync_attaches_the_lake_once_and_leaves_no_connection_open(own_sandbox, synced_copy, synced):
    before = compat.lake_connections_opened()

    second = sync_once(own_sandbox, synced_copy.workdir)

    assert compat.lake_connections_opened() - before == 1
    assert second.scalar("select count(*) from _dlt_loads") > synced.scalar("select count(*) from _dlt_loads")
    assert not any(compat._idle.values()), "a kept connection outlived its sync"
    # the sync loaded as a sync does: the copy holds the same rows as the lake it was copied from
    for table in ENTITY_TABLES:
        assert second.scalar(f"select count(*) from {table}") == synced.scalar(f"select count(*) from {table}"), table


def test_outside_a_sync_dlt_opens_and_closes_its_connections_as_its_own_code_does(tmp_path):
    # the overrides change nothing outside `lake_connections_kept`: a dlt client attaches, then detaches and closes
    from pipelines.warehouse.destinations import ducklake_target, make_pipeline
    from tests.support.lakes import lake_in

    target = ducklake_target(lake_in(tmp_path / "data"))
    pipeline = make_pipeline(target, tmp_path / "dlt")
    before = compat.lake_connections_opened()
    with pipeline.sql_client() as client:
        con = client.native_connection
        assert con.execute("select current_database()").fetchone()[0] == "lake"
    assert compat.lake_connections_opened() == before, "counted only inside a sync"
    with pytest.raises(duckdb.ConnectionException):
        con.execute("select 1")  # closed at once, as dlt closes it


def test_in_memory_duckdbs_spilling_at_once_each_spill_into_a_folder_of_their_own(tmp_path):
    # two processes started in one folder (as Dagster's run workers at the project root), each with one of our
    # connections and one of dlt's spilling at once: in DuckDB's default folder (.tmp there) every one crashed
    workdir = tmp_path / "workdir"
    workdir.mkdir()
    probes = [
        subprocess.Popen(
            [sys.executable, "-m", "tests.support.spill_probe", str(tmp_path / f"data{n}")],
            cwd=workdir, env={**os.environ, "PYTHONPATH": str(REPO)}, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
            text=True,
        )
        for n in range(2)
    ]
    outputs = [probe.communicate(timeout=300) for probe in probes]

    assert [probe.returncode for probe in probes] == [0, 0], [err[-2000:] for _, err in outputs]
    probed = [json.loads(out) for out, _ in outputs]
    assert all(probe.pop("sort_needs_disk") for probe in probed), "the sort fits in memory: nothing spilled"
    spilled = [result for probe in probed for result in probe.values()]
    assert len({result["sum"] for result in spilled}) == 1, "every database sorted the same rows"
    folders = [Path(result["spilled_into"]) for result in spilled]
    assert len(set(folders)) == 4, folders
    assert all(folder.parent == Path(tempfile.gettempdir()) for folder in folders), folders
    assert not any(folder.exists() for folder in folders), "DuckDB removes its spill folder on close"
    assert list(workdir.iterdir()) == [], "nothing spilled into the working directory"


def test_the_models_in_memory_database_spills_into_a_folder_of_its_own_and_a_file_beside_itself():
    from types import SimpleNamespace

    from pipelines.warehouse.dbt_plugin import Plugin

    plugin = Plugin("offline", {})
    in_memory, in_a_file = {}, {}
    plugin.update_connection_config(SimpleNamespace(path=":memory:"), in_memory)
    plugin.update_connection_config(SimpleNamespace(path="warehouse.duckdb"), in_a_file)

    assert Path(in_memory["temp_directory"]).parent == Path(tempfile.gettempdir())
    assert "temp_directory" not in in_a_file  # DuckDB's default for a file: warehouse.duckdb.tmp beside it
    assert in_memory["autoinstall_known_extensions"] is in_a_file["autoinstall_known_extensions"] is False


def test_our_spill_folders_leave_dlt_unimported():
    # a lake session, the Dagster sensors and checks open DuckDB without dlt: the spill folder must not bring it
    probe = "import sys; from pipelines.warehouse.connections import in_memory_config; in_memory_config(); print('dlt' in sys.modules)"
    done = subprocess.run([sys.executable, "-c", probe], cwd=REPO, capture_output=True, text=True, timeout=60, check=True)
    assert done.stdout.strip() == "False"


def test_a_killed_normalize_commit_is_finished_through_the_extracted_packages(tmp_path):
    """`compat.extracted_packages` reaches dlt's extracted packages (private API): deleting one there removes
    it from the pipeline's public listing, which is what `sync.finish_normalize_commit` relies on."""
    import dlt

    pipeline = dlt.pipeline("compat_probe", pipelines_dir=str(tmp_path), destination="duckdb",
                            dataset_name="probe")  # fmt: skip
    pipeline.extract([{"id": 1}], table_name="rows")
    [load_id] = pipeline.list_extracted_load_packages()

    compat.extracted_packages(pipeline).delete_package(load_id)

    assert pipeline.list_extracted_load_packages() == []


def test_a_retried_upload_sends_its_whole_file_again(tmp_path):
    """requests keeps a file body's start in `PreparedRequest._body_position` (private); `rewind_body_if_read`
    puts the file back there before a retry, and leaves a bytes body alone."""
    import requests

    path = tmp_path / "bill_of_lading.pdf"
    path.write_bytes(b"%PDF-1.4 the whole document")
    with path.open("rb") as body:
        body.read(9)  # a caller may hand over a file already partly read: the upload starts from there
        request = requests.Request("POST", "http://127.0.0.1:9/v2/documents", data=body).prepare()
        assert request.body.read() == b"the whole document"  # the first attempt consumed it

        compat.rewind_body_if_read(request)

        assert request.body.read() == b"the whole document"
    sent_as_bytes = requests.Request("POST", "http://127.0.0.1:9/v2/documents", data=b"{}").prepare()
    compat.rewind_body_if_read(sent_as_bytes)
    assert sent_as_bytes.body == b"{}"
