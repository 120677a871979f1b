"""Local validation and input readers (no HTTP)."""

from __future__ import annotations

import duckdb

from pipelines.writeback.inputs import iso6346_valid, parse_tracking_rows, read_rows, split_list

CARRIERS = {
    "MAEU": {"bill_of_lading_tracking_support": True, "container_number_tracking_support": True},
    "HDMU": {"bill_of_lading_tracking_support": True, "container_number_tracking_support": False},
    "CLAM": {"bill_of_lading_tracking_support": False, "container_number_tracking_support": False},
}


def codes(row) -> list[str]:
    return [p["code"] for p in row.problems]


def test_iso6346_check_digit():
    assert iso6346_valid("MSCU1234566")
    assert iso6346_valid("CSQU3054383")  # the standard's own example
    assert not iso6346_valid("MSCU1234565")
    assert not iso6346_valid("MSCU123456")


def test_every_local_rule_and_duplicates():
    rows = [
        {"request_number": " mae 123 ", "request_type": "bill_of_lading", "scac": "maeu"},
        {"request_number": "", "request_type": "bill_of_lading", "scac": "MAEU"},
        {"request_number": "X1", "request_type": "airway_bill", "scac": "MAEU"},
        {"request_number": "X2", "request_type": "bill_of_lading", "scac": "M4EU"},
        {"request_number": "X3", "request_type": "bill_of_lading", "scac": "ZZZZ"},
        {"request_number": "X4", "request_type": "bill_of_lading", "scac": "CLAM"},
        {"request_number": "MSCU1234566", "request_type": "container", "scac": "HDMU"},
        {"request_number": "MSCU 123456-5", "request_type": "container", "scac": ""},
        {"request_number": "MAE123", "request_type": "bill_of_lading", "scac": "MAEU"},
        {"request_number": "X5", "request_type": "booking_number", "scac": "", "customer_id": "nope"},
    ]
    parsed = parse_tracking_rows(rows, CARRIERS)
    assert parsed[0].request_number == "MAE123" and parsed[0].scac == "MAEU" and not parsed[0].problems
    assert codes(parsed[1]) == ["blank"]
    assert codes(parsed[2]) == ["inclusion"]
    assert codes(parsed[3]) == ["invalid"]
    assert codes(parsed[4]) == ["not_recognized"]
    assert codes(parsed[5]) == ["not_supported"]
    assert codes(parsed[6]) == ["not_supported"]  # HDMU: no container-number tracking
    assert codes(parsed[7]) == ["check_digit"]
    assert codes(parsed[8]) == ["duplicate"] and "row 0" in parsed[8].problems[0]["detail"]
    assert parsed[9].problems[0]["pointer"] == "/data/relationships/customer"
    assert parsed[0].attributes()["scac"] == "MAEU"
    assert parsed[9].attributes()["auto_detect_vocc_scac"] is True


def test_row_key_is_stable_over_formatting_and_changes_with_content():
    a, b, c = parse_tracking_rows([
        {"request_number": "abc 1", "request_type": "bill_of_lading", "scac": "maeu", "ref_numbers": "R1; R2"},
        {"request_number": "ABC1", "request_type": "BILL_OF_LADING", "scac": "MAEU", "ref_numbers": "R1;R2;"},
        {"request_number": "ABC1", "request_type": "bill_of_lading", "scac": "MAEU", "ref_numbers": "R1"},
    ], None)
    assert a.row_key == b.row_key != c.row_key


def test_readers_csv_and_table(tmp_path):
    csv_file = tmp_path / "rows.csv"
    csv_file.write_text("request_number,request_type,scac,ref_numbers\nA1,bill_of_lading,MAEU,R1;R2\n")
    assert read_rows(csv_file) == [{"request_number": "A1", "request_type": "bill_of_lading", "scac": "MAEU",
                                    "ref_numbers": "R1;R2"}]
    con = duckdb.connect()
    con.execute("create table batch as select 'A1' as request_number, ['R1', 'R2'] as ref_numbers")
    rows = read_rows("batch", con)
    assert rows[0]["request_number"] == "A1" and split_list(rows[0]["ref_numbers"]) == ["R1", "R2"]
    assert split_list('["x", " y "]') == ["x", "y"]
