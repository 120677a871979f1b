"""Issue 31, tried as a new user would: a number is created on the service once, whatever later batches say
about it (a duplicate row, a rerun on another host, a changed or invalid row); rows are numbered as the user
sees them in the file; the commands' --help lists their columns and exit codes."""

from __future__ import annotations

import csv
import subprocess
import sys
import uuid
from pathlib import Path

import pytest

from pipelines.cli import main
from pipelines.journals.writes import WritebackStore
from pipelines.writeback import (
    MANIFEST_COLUMNS,
    REF_NUMBER_COLUMNS,
    TRACKING_REQUEST_COLUMNS,
    read_rows,
)
from pipelines.writeback.tracking_requests import create_tracking_requests, parse_tracking_rows
from tests.support.sandboxes import FULL_KEY, tracking_count
from tests.support.syncs import cli_env, make_client

HEADER = ["request_number", "request_type", "scac", "ref_numbers"]


def write_csv(path: Path, *rows: list[str]) -> Path:
    with path.open("w", newline="") as handle:
        csv.writer(handle).writerows([HEADER, *rows])
    return path


def run_batch(path: Path, client, journal: Path | str):
    """One batch from a CSV file, with a journal opened for it alone (a host of its own)."""
    store = WritebackStore(journal)
    try:
        return create_tracking_requests(read_rows(path), client, store), store.rows(
            "select row_index, status, tracking_request_id from tracking_request_outcomes")
    finally:
        store.close()


def test_a_number_once_created_is_never_created_again(own_sandbox, tmp_path, journal_location):
    number = f"WBONCE{uuid.uuid4().hex[:8].upper()}"
    spelled_otherwise = f"{number[:4].lower()} {number[4:].lower()}"  # the service ignores case and spaces
    with make_client(own_sandbox, tmp_path) as client:
        first, journal = run_batch(write_csv(tmp_path / "first.csv", [number, "bill_of_lading", "MAEU", ""],
                                             [spelled_otherwise, "bill_of_lading", "MAEU", ""]), client, journal_location)
        assert [(r.row_index, r.status) for r in first.results] == [(1, "accepted"), (2, "invalid")]
        assert [e["detail"] for e in first.results[1].errors] == [
            "duplicate of row 1 (" + str(tmp_path / "first.csv") + " line 2) in this batch"]
        created = first.results[0].tracking_request_id
        assert journal == [(1, "accepted", created)]  # the duplicate row replaced nothing

        # the user deletes the duplicate row and reruns; then asks again with other ref_numbers, then
        # with a row that is wrong: each batch on a journal opened afresh, as another host would
        for rows, status in (([number, "bill_of_lading", "MAEU", ""], "skipped"),
                             ([spelled_otherwise, "bill_of_lading", "", "PO-7"], "skipped"),
                             ([number, "bill_of_lading", "ZZZZ", ""], "invalid")):
            again, journal = run_batch(write_csv(tmp_path / "again.csv", rows), client, journal_location)
            assert [(r.row_index, r.status) for r in again.results] == [(1, status)]
            assert journal == [(1, "accepted", created)]  # still the row that created it

    assert tracking_count(own_sandbox, number) == 1
    store = WritebackStore(journal_location)
    audit = store.rows("select outcome, http_status from audit_log where target = :target",
                       {"target": f"tracking_request:bill_of_lading:{number}"})
    store.close()
    assert audit == [("accepted", 201)]


def test_a_number_journaled_under_an_older_key_is_not_created_again(own_sandbox, tmp_path):
    """A journal written before a row's key was its number (the key was a hash of the whole row) still
    stops the number being created again; and an accepted outcome is final whatever is recorded after it."""
    number = f"WBOLD{uuid.uuid4().hex[:8].upper()}"
    store = WritebackStore(tmp_path / "journal.sqlite")
    old = {"row_key": "hash-of-the-whole-row", "row_index": 0, "request_number": number,
           "request_type": "bill_of_lading", "scac": "MAEU"}
    store.record_tracking_outcome(old, "accepted", tracking_request_id="tr-old", http_status=201)
    store.record_tracking_outcome(old, "invalid", errors=[{"detail": "late"}])
    assert store.tracking_outcome(old["row_key"])["status"] == "accepted"
    with make_client(own_sandbox, tmp_path) as client:
        report = create_tracking_requests([{"request_number": number, "request_type": "bill_of_lading",
                                            "scac": "MAEU", "ref_numbers": "PO-1"}], client, store)
    store.close()
    assert [(r.status, r.tracking_request_id) for r in report.results] == [("skipped", "tr-old")]
    assert tracking_count(own_sandbox, number) == 0


@pytest.mark.parametrize(("command", "columns", "not_done"), [
    ("create-tracking-requests", TRACKING_REQUEST_COLUMNS, "1 some rows not done (failed, invalid, rejected, unknown)"),
    ("patch-ref-numbers", REF_NUMBER_COLUMNS, "1 some rows not done (failed, invalid)"),
    ("upload-documents", MANIFEST_COLUMNS, "1 some files not done (failed)"),
])
def test_help_lists_the_columns_the_row_numbering_and_the_exit_codes(command, columns, not_done, capsys):
    with pytest.raises(SystemExit) as done:
        main([command, "--help"])
    assert done.value.code == 0
    shown = " ".join(capsys.readouterr().out.split())  # argparse wraps the options' help at the terminal's width
    required = [group[0] if len(group) == 1 else "one or more of " + "|".join(group) for group in columns.required]
    assert f"required: {', '.join(required)}" in shown
    optional = [n for n in columns.optional if not any(n in group for group in columns.required)]
    assert f"optional: {', '.join(optional)}" in shown if optional else "optional:" not in shown
    numbered = "rows are numbered from 1: row 1 is the first row below the header (line 2 of a CSV file)"
    assert (numbered in shown) == (command != "upload-documents")  # its results are files, not rows
    codes = shown.split("exit codes")[1]
    assert "0 all" in codes and not_done in codes and "2 bad input or usage" in codes


def test_rows_are_numbered_as_the_file_shows_them(own_sandbox, tmp_path, capsys):
    batch = tmp_path / "batch.csv"
    batch.write_text("request_number,request_type,scac\nWBLINE0001,bill_of_lading,MAEU\n\n"
                     "wbline 0001,bill_of_lading,MAEU\n")  # after a blank line: row 2 is on line 4
    common = ["--base-url", own_sandbox.base_url, "--api-key", FULL_KEY, "--rate-window", "0.05"]
    assert main(["create-tracking-requests", str(batch), "--dry-run", *common]) == 1
    table = [line.split("│")[1:4] for line in capsys.readouterr().out.splitlines() if "WBLINE0001" in line]
    assert [[cell.strip() for cell in row] for row in table] == [["1", "WBLINE0001", "would_send"],
                                                                  ["2", "WBLINE0001", "invalid"]]
    rows = read_rows(batch)
    assert [p["detail"] for p in parse_tracking_rows(rows, None)[1].problems] == [
        f"duplicate of row 1 ({batch} line 2) in this batch"]


def test_a_narrow_terminal_folds_the_results_and_cuts_no_id(own_sandbox, tmp_path):
    # printed into a pipe or a narrow terminal, the table used to cut the created id short ("781599d0-b87d-…")
    number = f"WBNARROW{uuid.uuid4().hex[:8].upper()}"
    batch = write_csv(tmp_path / "narrow.csv", [number, "bill_of_lading", "MAEU", ""])
    done = subprocess.run(
        [sys.executable, "-m", "pipelines", "create-tracking-requests", str(batch)],
        env={**cli_env(own_sandbox.base_url, tmp_path), "COLUMNS": "50"}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    store = WritebackStore(tmp_path / "data" / "writeback_journal.sqlite")
    ((created,),) = store.rows("select tracking_request_id from tracking_request_outcomes")
    store.close()
    assert "…" not in done.stdout
    lines = done.stdout.splitlines()
    header = next(line.split("┃")[1:-1] for line in lines if line.startswith("┃"))
    body = [line.split("│")[1:-1] for line in lines if line.startswith("│")]
    id_column = [cell.strip() for cell in header].index("id")
    assert "".join(cells[id_column].strip() for cells in body) == created


def test_a_batch_reads_only_its_own_numbers_from_the_journal(journal_location):
    store = WritebackStore(journal_location)
    try:
        for n, number in enumerate(("WBHELD1", "WBHELD2")):
            record = {"row_key": f"bill_of_lading:{number}", "row_index": n + 1, "request_number": number,
                      "request_type": "bill_of_lading", "scac": "MAEU"}
            store.record_tracking_outcome(record, "accepted", tracking_request_id=f"tr-{n}", http_status=201)
        held = store.held_numbers([("bill_of_lading", "WBHELD2"), ("booking_number", "WBHELD1")])
    finally:
        store.close()
    assert {number: record["tracking_request_id"] for number, record in held.items()} == {
        ("bill_of_lading", "WBHELD2"): "tr-1"}  # another type's number is another number
