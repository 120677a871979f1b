"""ref_numbers write-back over HTTP: targets by id or number (resolved in the synced warehouse),
idempotent reruns, the new values after the next sync, and the web app's deep link."""

from __future__ import annotations

import duckdb
import requests

from pipelines.writeback.inputs import read_rows
from pipelines.writeback.ref_numbers import patch_ref_numbers
from pipelines.writeback.store import WritebackStore
from tests.conftest import FULL_KEY
from tests.e2e.conftest import make_client, sync_once
from tests.writeback.conftest import routes


def test_patch_by_number_then_sync_and_deep_link(server, tmp_path):
    first = sync_once(server, tmp_path, include_maps=False)
    bol, shipment_id = first.query("select bill_of_lading_number, id from shipments "
                                   "where bill_of_lading_number is not null order by id limit 1")[0]
    number, container_id = first.query("select number, id from containers order by id limit 1")[0]
    other_shipment = first.query(f"select id from shipments where id <> '{shipment_id}' order by id limit 1")[0][0]
    batch = tmp_path / "refs.csv"
    batch.write_text(
        "bill_of_lading_number,container_number,shipment_id,ref_numbers\n"
        f"{bol.lower()},,,WB-SHIP-1;WB-SHIP-2\n"
        f",{number},,WB-CONT-9\n"
        f",,{other_shipment},WB-ID-7\n"
        ",NOPE1234567,,X\n"
        ",,,Y\n"
    )
    db = first.duckdb_path
    with make_client(server, tmp_path) as client:
        con = duckdb.connect(str(db))
        try:
            report = patch_ref_numbers(read_rows(batch), client, WritebackStore(con), con)
            assert [r.status for r in report.results] == ["patched", "patched", "patched", "invalid", "invalid"]
            assert report.results[0].target_id == shipment_id and report.results[1].target_id == container_id
            assert "not in the warehouse" in report.results[3].errors[0]
            patches = {k: v for k, v in routes(server).items() if k.startswith("PATCH")}
            assert patches == {"PATCH /v2/shipments/{id}": 2, "PATCH /v2/containers/{id}": 1}

            # rerun before any sync: the warehouse is stale, a GET shows the list is already set → no PATCH
            rerun = patch_ref_numbers(read_rows(batch), client, WritebackStore(con), con)
            assert [r.status for r in rerun.results][:3] == ["unchanged"] * 3
            assert {k: v for k, v in routes(server).items() if k.startswith("PATCH")} == patches
            audited = con.execute("select action, outcome, http_status from writeback.audit_log "
                                  "order by logged_at").fetchall()
            assert audited == [("patch_shipment_ref_numbers", "patched", 200),
                               ("patch_container_ref_numbers", "patched", 200),
                               ("patch_shipment_ref_numbers", "patched", 200)]
        finally:
            con.close()

    second = sync_once(server, tmp_path, include_maps=False)
    assert second.scalar(f"select cast(ref_numbers as varchar) from shipments where id = '{shipment_id}'") \
        == '["WB-SHIP-1","WB-SHIP-2"]'
    assert second.scalar(f"select cast(ref_numbers as varchar) from containers where id = '{container_id}'") \
        == '["WB-CONT-9"]'

    # after the sync, the warehouse alone shows the lists: a third run sends no request at all
    before = routes(server)
    with make_client(server, tmp_path) as client, duckdb.connect(str(db)) as con:
        third = patch_ref_numbers(read_rows(batch), client, WritebackStore(con), con)
    assert [r.status for r in third.results][:3] == ["unchanged"] * 3
    assert routes(server) == before

    headers = {"Authorization": f"Token {FULL_KEY}"}
    found = requests.get(f"{server.app_url}/shipments/find", params={"q": "wb-ship-2"}, headers=headers,
                         allow_redirects=False, timeout=10)
    assert found.status_code == 302 and found.headers["location"].endswith(f"/app/shipments/{shipment_id}")
    by_container_ref = requests.get(f"{server.app_url}/shipments/find", params={"q": "WB-CONT-9"},
                                    headers=headers, allow_redirects=False, timeout=10)
    assert by_container_ref.status_code == 302
    assert "/app/shipments/" in by_container_ref.headers["location"]
