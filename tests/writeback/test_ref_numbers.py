"""ref_numbers write-back over HTTP: targets by id or number (resolved in the synced warehouse), adding to
the live list by default (never the warehouse copy), `replace`, clearing only when confirmed, wrong columns
refused before any request, dry runs that show before → after, idempotent reruns, the new values after the
next sync, and the web app's deep link."""

from __future__ import annotations

import json

import duckdb
import pytest
import requests

from pipelines.cli import commands as cli_commands
from pipelines.cli import main
from pipelines.errors import InputError
from pipelines.writeback import REF_NUMBER_COLUMNS, read_rows
from pipelines.writeback.ref_numbers import merge_refs, patch_ref_numbers
from tests.support.sandboxes import FULL_KEY, api_get, routes
from tests.support.syncs import make_client, sync_once

PATCH_SHIPMENT, PATCH_CONTAINER, GET_SHIPMENT = (
    "PATCH /v2/shipments/{id}", "PATCH /v2/containers/{id}", "GET /v2/shipments/{id}")


class AuditLog:
    """Stands in for the journal: records what `WritebackStore.audit` would be told."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, str, int | None]] = []

    def audit(self, action: str, target: str, outcome: str, *, http_status: int | None = None,
              error: str | None = None) -> None:
        self.calls.append((action, outcome, http_status))


def patches(server) -> dict[str, int]:
    return {k: v for k, v in routes(server).items() if k.startswith("PATCH")}


def live_refs(server, kind: str, id_: str) -> list[str]:
    return api_get(server, f"/{kind}s/{id_}")["data"]["attributes"]["ref_numbers"]


def shipment_with_refs(server) -> tuple[str, list[str]]:
    """A shipment that already has ref_numbers (the ones an add must keep)."""
    for shipment in api_get(server, "/shipments", **{"page[size]": 30})["data"]:
        if len(shipment["attributes"]["ref_numbers"]) >= 2:
            return shipment["id"], shipment["attributes"]["ref_numbers"]
    raise AssertionError("the sandbox world has no shipment with two ref_numbers")


def cli_args(server) -> list[str]:
    """The CLI's options for `server`; the warehouse is the default one, the DuckLake of the test's data folder."""
    return ["--base-url", server.base_url, "--api-key", FULL_KEY, "--rate-window", "0.05"]


def test_merge_keeps_order_and_adds_no_duplicate():
    assert merge_refs(["A", "B"], ["C", "A", "C", "D"]) == ["A", "B", "C", "D"]
    assert merge_refs(["A", "B"], ["C"], replace=True) == ["C"]
    assert merge_refs([], []) == []


def test_add_by_default_merges_with_the_live_list_never_the_warehouse_copy(server, client):
    shipment, live = shipment_with_refs(server)
    warehouse = duckdb.connect()  # a stale warehouse copy: it may resolve the number, never be the base
    warehouse.execute("create schema ocean_tracking")
    warehouse.execute("create table ocean_tracking.shipments as select ? as id, 'WBSTALE1' as "
                      "bill_of_lading_number, ['STALE-ONLY'] as ref_numbers", [shipment])
    rows = [{"shipment_id": "", "bill_of_lading_number": "wbstale1", "ref_numbers": f"NEW-1;{live[0]};NEW-1"},
            {"shipment_id": shipment, "bill_of_lading_number": "", "ref_numbers": "NEW-2"},
            {"shipment_id": shipment, "bill_of_lading_number": "", "ref_numbers": live[1]}]
    audit = AuditLog()
    report = patch_ref_numbers(rows, client, audit, warehouse)
    assert [r.status for r in report.results] == ["patched", "patched", "unchanged"]
    assert report.results[0].target_id == shipment
    assert report.results[0].before == live and report.results[0].ref_numbers == [*live, "NEW-1"]
    # the second row's base is a fresh GET, so it builds on the first row's PATCH
    assert report.results[1].before == [*live, "NEW-1"] and report.results[1].ref_numbers == [*live, "NEW-1", "NEW-2"]
    assert live_refs(server, "shipment", shipment) == [*live, "NEW-1", "NEW-2"]
    assert patches(server) == {PATCH_SHIPMENT: 2}
    assert audit.calls == [("patch_shipment_ref_numbers", "patched", 200)] * 2

    rerun = patch_ref_numbers(rows, client, audit, warehouse)
    assert rerun.counts == {"unchanged": 3} and patches(server) == {PATCH_SHIPMENT: 2}
    assert len(audit.calls) == 2  # nothing written, nothing audited


def test_replace_sets_exactly_and_clearing_needs_replace_and_confirm_clear(server, client):
    shipment, _ = shipment_with_refs(server)
    replaced = patch_ref_numbers([{"shipment_id": shipment, "ref_numbers": "R-2;R-1"}], client, None, None,
                                 replace=True)
    assert replaced.counts == {"patched": 1}
    assert live_refs(server, "shipment", shipment) == ["R-2", "R-1"]

    before = routes(server)
    empty = [{"shipment_id": shipment, "ref_numbers": " ; "}]
    refused = [patch_ref_numbers(empty, client, None, None, **flags).results[0]
               for flags in ({}, {"replace": True}, {"confirm_clear": True})]
    assert [r.status for r in refused] == ["invalid"] * 3
    assert "nothing to add; to clear the list give --replace --confirm-clear" in refused[0].errors[0]
    assert "add --confirm-clear to clear it" in refused[1].errors[0]
    assert "--replace --confirm-clear" in refused[2].errors[0]
    assert routes(server) == before  # an invalid row costs no request at all

    cleared = patch_ref_numbers(empty, client, None, None, replace=True, confirm_clear=True).results[0]
    assert (cleared.status, cleared.before, cleared.ref_numbers) == ("patched", ["R-2", "R-1"], [])
    assert live_refs(server, "shipment", shipment) == []
    again = patch_ref_numbers(empty, client, None, None, replace=True, confirm_clear=True)
    assert again.counts == {"unchanged": 1} and patches(server) == {PATCH_SHIPMENT: 2}


def test_missing_ref_numbers_column_is_refused_before_any_request(server, client, tmp_path, capsys):
    shipment, live = shipment_with_refs(server)
    batch = tmp_path / "refs.csv"
    batch.write_text(f"shipment_id,refnumbers\n{shipment},X\n")
    before = routes(server)
    with pytest.raises(InputError, match=r"refs\.csv line 1: unexpected column refnumbers \(did you mean "
                                         r"ref_numbers\?\); missing column ref_numbers; expected header"):
        patch_ref_numbers(read_rows(batch), client, None, None)  # read without columns: checked all the same
    with pytest.raises(InputError, match=r"^input rows: missing column ref_numbers"):
        patch_ref_numbers([{"shipment_id": shipment}], client, None, None)
    assert main(["patch-ref-numbers", str(batch), *cli_args(server)]) == 2
    assert "missing column ref_numbers" in capsys.readouterr().err
    assert routes(server) == before
    assert live_refs(server, "shipment", shipment) == live


def test_dry_run_prints_before_and_after_and_sends_no_patch(server, tmp_path, capsys, monkeypatch):
    # one table row per line: the console's width is fixed when it is made if COLUMNS was set then (a pytest
    # worker sets it), so the width is set on the console itself
    monkeypatch.setattr(cli_commands.console, "_width", 300)
    shipment, live = shipment_with_refs(server)
    batch = tmp_path / "refs.csv"
    batch.write_text(f"shipment_id,ref_numbers\n{shipment},DRY-1;{live[0]}\n")
    args = cli_args(server)

    assert main(["patch-ref-numbers", str(batch), "--dry-run", *args]) == 0
    out = capsys.readouterr().out
    assert "before → after" in out and "dry run" in out
    assert f"{';'.join(live)} → {';'.join([*live, 'DRY-1'])}" in out and "would_patch" in out
    assert main(["patch-ref-numbers", str(batch), "--dry-run", "--replace", *args]) == 0
    assert f"{';'.join(live)} → DRY-1;{live[0]}" in capsys.readouterr().out
    assert patches(server) == {} and routes(server)[GET_SHIPMENT] == 2  # read, never written
    assert live_refs(server, "shipment", shipment) == live

    assert main(["patch-ref-numbers", str(batch), *args]) == 0
    assert "patched" in capsys.readouterr().out
    assert live_refs(server, "shipment", shipment) == [*live, "DRY-1"] and patches(server) == {PATCH_SHIPMENT: 1}


@pytest.mark.slow
def test_patch_by_number_then_sync_and_deep_link(server, synced_copy, tmp_path):
    first = synced_copy  # the first sync: a copy of the shared one, of the world `server` serves
    bol, shipment_id = first.query("select bill_of_lading_number, id from shipments "
                                   "where bill_of_lading_number is not null order by id limit 1")[0]
    number, container_id = first.query("select number, id from containers order by id limit 1")[0]
    other_shipment = first.query(f"select id from shipments where id <> '{shipment_id}' order by id limit 1")[0][0]
    had = {id_: live_refs(server, kind, id_) for kind, id_ in
           (("shipment", shipment_id), ("container", container_id), ("shipment", other_shipment))}
    batch = tmp_path / "refs.csv"
    batch.write_text(
        "bill_of_lading_number,container_number,shipment_id,ref_numbers\n"
        f"{bol.lower()},,,WB-SHIP-1;WB-SHIP-2\n"
        f",{number},,WB-CONT-9\n"
        f",,{other_shipment},WB-ID-7\n"
        ",NOPE1234567,,X\n"
        ",,,Y\n"
    )
    audit = AuditLog()
    with make_client(server, tmp_path) as client, first.store.connect(read_only=True) as con:
        report = patch_ref_numbers(read_rows(batch, columns=REF_NUMBER_COLUMNS), client, audit, con)
        assert [r.status for r in report.results] == ["patched", "patched", "patched", "invalid", "invalid"]
        assert report.results[0].target_id == shipment_id and report.results[1].target_id == container_id
        assert report.results[0].ref_numbers == [*had[shipment_id], "WB-SHIP-1", "WB-SHIP-2"]
        assert "not in the warehouse" in report.results[3].errors[0]
        assert patches(server) == {PATCH_SHIPMENT: 2, PATCH_CONTAINER: 1}

        # rerun before any sync: a GET shows every number is already there → no PATCH
        rerun = patch_ref_numbers(read_rows(batch), client, audit, con)
        assert [r.status for r in rerun.results][:3] == ["unchanged"] * 3
        assert patches(server) == {PATCH_SHIPMENT: 2, PATCH_CONTAINER: 1}
        assert audit.calls == [("patch_shipment_ref_numbers", "patched", 200),
                               ("patch_container_ref_numbers", "patched", 200),
                               ("patch_shipment_ref_numbers", "patched", 200)]

    second = sync_once(server, tmp_path, include_maps=False)
    assert second.scalar(f"select cast(ref_numbers as varchar) from shipments where id = '{shipment_id}'") \
        == json.dumps([*had[shipment_id], "WB-SHIP-1", "WB-SHIP-2"], separators=(",", ":"))
    assert second.scalar(f"select cast(ref_numbers as varchar) from containers where id = '{container_id}'") \
        == json.dumps([*had[container_id], "WB-CONT-9"], separators=(",", ":"))

    # after the sync, a third run still reads each target afresh (never the warehouse copy), writes nothing
    with make_client(server, tmp_path) as client, second.store.connect(read_only=True) as con:
        third = patch_ref_numbers(read_rows(batch), client, audit, con)
    assert [r.status for r in third.results][:3] == ["unchanged"] * 3
    assert patches(server) == {PATCH_SHIPMENT: 2, PATCH_CONTAINER: 1} and len(audit.calls) == 3

    headers = {"Authorization": f"Token {FULL_KEY}"}
    found = requests.get(f"{server.app_url}/shipments/find", params={"q": "wb-ship-2"}, headers=headers,
                         allow_redirects=False, timeout=10)
    assert found.status_code == 302 and found.headers["location"].endswith(f"/app/shipments/{shipment_id}")
    by_container_ref = requests.get(f"{server.app_url}/shipments/find", params={"q": "WB-CONT-9"},
                                    headers=headers, allow_redirects=False, timeout=10)
    assert by_container_ref.status_code == 302
    assert "/app/shipments/" in by_container_ref.headers["location"]
