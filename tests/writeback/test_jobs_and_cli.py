"""The Dagster jobs (dry run and real, via execute_in_process), the CLI subcommands, and the audit log
never holding the API key. Both publish into the default DuckLake of `tmp_path/data`."""

from __future__ import annotations

import pytest

from assets.resources import OceanTrackingApi
from assets.writeback import create_tracking_requests_job, patch_ref_numbers_job, upload_documents_job
from pipelines.cli import main
from pipelines.journals.writes import PUBLISHED_TABLES
from pipelines.settings import WRITEBACK_SCHEMA
from tests.support.dagster import warehouse_resource
from tests.support.sandboxes import FULL_KEY, api_get, routes, tracking_count


def resources(server, data_dir) -> dict:
    return {"ocean_tracking_api": OceanTrackingApi(api_key=FULL_KEY, base_url=server.base_url,
                                                   app_url=server.app_url, rate_window_seconds=0.05),
            "warehouse": warehouse_resource(data_dir)}


def op_config(op: str, **config) -> dict:
    return {"ops": {op: {"config": config}}}


def counts(result, op: str) -> dict:
    """The op's row counts: its output when it succeeded, else the metadata of the failure it raised."""
    if result.success:
        return result.output_for_node(op)["counts"]
    (failure,) = [e for e in result.all_events if e.event_type_value == "STEP_FAILURE"]
    error = failure.step_failure_data
    assert "rows not done" in error.user_failure_data.description
    assert "Traceback" not in error.user_failure_data.description
    return error.user_failure_data.metadata["counts"].data


def test_dagster_jobs_dry_run_then_real(server, tmp_path, lake):
    batch = tmp_path / "tr.csv"
    batch.write_text("request_number,request_type,scac,ref_numbers\nWBDAG001,bill_of_lading,MAEU,R1;R2\n"
                     "WBDAG002,container,MSCU,\n")
    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "a.txt").write_bytes(b"hello")
    shipment = api_get(server, "/shipments", **{"page[size]": 1})["data"][0]["id"]
    refs = tmp_path / "refs.csv"
    refs.write_text(f"shipment_id,ref_numbers\n{shipment},DAG-REF\n")
    runs = [
        (create_tracking_requests_job, "create_tracking_requests_op", str(batch)),
        (upload_documents_job, "upload_documents_op", str(folder)),
        (patch_ref_numbers_job, "patch_ref_numbers_op", str(refs)),
    ]
    for job, op, source in runs:
        result = job.execute_in_process(run_config=op_config(op, source_path=source, dry_run=True),
                                        resources=resources(server, tmp_path / "data"), raise_on_error=False)
        assert result.success == (op != "create_tracking_requests_op")  # its invalid row fails the op
    assert not [k for k in routes(server) if k.startswith(("POST", "PATCH"))]  # dry runs send no write
    outputs = {}
    for job, op, source in runs:
        result = job.execute_in_process(run_config=op_config(op, source_path=source, dry_run=False),
                                        resources=resources(server, tmp_path / "data"), raise_on_error=False)
        outputs[op] = counts(result, op)
    assert outputs == {"create_tracking_requests_op": {"accepted": 1, "invalid": 1},
                       "upload_documents_op": {"created": 1}, "patch_ref_numbers_op": {"patched": 1}}
    assert tracking_count(server, "WBDAG001") == 1
    with lake.connect(read_only=True) as con:
        actions = dict(con.execute("select action, count(*) from writeback.audit_log group by 1").fetchall())
    assert actions == {"create_tracking_request": 1, "request_blob": 1, "put_bytes": 1, "create_document": 1,
                       "patch_shipment_ref_numbers": 1}


@pytest.mark.slow
def test_cli_subcommands_and_no_key_in_the_warehouse(server, tmp_path, capsys, lake):
    common = ["--base-url", server.base_url, "--api-key", FULL_KEY, "--rate-window", "0.05"]
    batch = tmp_path / "tr.csv"
    batch.write_text("request_number,request_type,scac,customer_name\nWBCLI001,bill_of_lading,MAEU,CLI Co\n"
                     "WBCLI002,bill_of_lading,ZZZZ,\n")
    assert main(["create-tracking-requests", str(batch), "--dry-run", *common]) == 1  # one invalid row
    assert "would_send" in capsys.readouterr().out
    assert tracking_count(server, "WBCLI001") == 0
    assert main(["create-tracking-requests", str(batch), *common]) == 1
    assert tracking_count(server, "WBCLI001") == 1
    assert main(["create-tracking-requests", str(batch), *common]) == 1  # rerun: skipped, not duplicated
    assert tracking_count(server, "WBCLI001") == 1

    folder = tmp_path / "docs"
    folder.mkdir()
    (folder / "x.pdf").write_bytes(b"%PDF-1.4 test")
    assert main(["upload-documents", str(folder), *common]) == 0
    assert main(["upload-documents", str(folder), *common]) == 0
    assert api_get(server, "/documents")["meta"]["total"] == 1

    first = api_get(server, "/shipments", **{"page[size]": 1})["data"][0]
    shipment, had = first["id"], first["attributes"]["ref_numbers"]
    refs = tmp_path / "refs.csv"
    refs.write_text(f"shipment_id,ref_numbers\n{shipment},CLI-1;CLI-2\n")
    assert main(["patch-ref-numbers", str(refs), *common]) == 0  # added to what the shipment had
    assert api_get(server, f"/shipments/{shipment}")["data"]["attributes"]["ref_numbers"] == [*had, "CLI-1", "CLI-2"]
    assert main(["patch-ref-numbers", str(refs), "--replace", *common]) == 0
    assert api_get(server, f"/shipments/{shipment}")["data"]["attributes"]["ref_numbers"] == ["CLI-1", "CLI-2"]

    with lake.connect(read_only=True) as con:
        assert con.execute("select count(*) from writeback.audit_log").fetchone()[0] >= 6
        published = [con.execute(f"select cast(t as varchar) from {WRITEBACK_SCHEMA}.{name} t").fetchall()
                     for name in PUBLISHED_TABLES]
    assert FULL_KEY not in repr(published)
    # every file the commands wrote: the lake's catalog (small tables are inlined there) and data files, the journal
    written = [p for p in (tmp_path / "data").rglob("*") if p.is_file()]
    assert {"catalog.sqlite", "writeback_journal.sqlite"} <= {p.name for p in written}
    blobs = b"".join(p.read_bytes() for p in written)
    assert FULL_KEY.encode() not in blobs
    assert FULL_KEY.encode("utf-16-le") not in blobs
