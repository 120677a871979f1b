"""Local validation and input readers (no HTTP): RFC 4180 parsing, the expected columns, the list
separator, formula-like values."""

from __future__ import annotations

import duckdb
import pytest

from pipelines.errors import InputError
from pipelines.writeback import (
    MANIFEST_COLUMNS,
    REF_NUMBER_COLUMNS,
    TRACKING_REQUEST_COLUMNS,
    check_header,
    looks_like_formula,
    read_rows,
    split_list,
)
from pipelines.writeback.tracking_requests import iso6346_valid, parse_tracking_rows

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
    assert codes(parsed[8]) == ["duplicate"] and parsed[8].problems[0]["detail"] == "duplicate of row 1 in this batch"
    assert [row.row_index for row in parsed] == list(range(1, 11))  # row 1: the first below the header
    assert parsed[9].problems[0]["pointer"] == "/data/relationships/customer"
    assert parsed[0].attributes()["scac"] == "MAEU"
    assert parsed[9].attributes()["auto_detect_vocc_scac"] is True


def test_row_key_is_the_number_whatever_else_the_row_says():
    a, b, c, d = parse_tracking_rows([
        {"request_number": "abc 1", "request_type": "bill_of_lading", "scac": "maeu", "ref_numbers": "R1; R2"},
        {"request_number": "ABC1", "request_type": "BILL_OF_LADING", "scac": "", "customer_name": "Someone"},
        {"request_number": "ABC2", "request_type": "bill_of_lading", "scac": "MAEU", "ref_numbers": "R1"},
        {"request_number": "ABC1", "request_type": "booking_number", "scac": "MAEU", "ref_numbers": "R1"},
    ], None)
    assert a.row_key == b.row_key and len({a.row_key, c.row_key, d.row_key}) == 3
    assert (b.duplicate_of, c.duplicate_of, d.duplicate_of) == (1, None, None)


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


def test_rfc4180_quoting_lists_and_where_each_row_came_from(tmp_path):
    batch = tmp_path / "rows.csv"
    batch.write_bytes(
        b'\xef\xbb\xbfrequest_number,request_type,ref_numbers,customer_company_name\r\n'
        b'A1,bill_of_lading,"PO-1, rev 2;PO-3","Acme, ""the"" importer"\r\n'
        b"\r\n"
        b'A2,bill_of_lading,"[""X;1"", ""Y""]","two\r\nlines"\r\n'
        b",,,\r\n"
        b"A3,container,,\r\n"
    )
    rows = read_rows(batch, columns=TRACKING_REQUEST_COLUMNS)
    assert [r["request_number"] for r in rows] == ["A1", "A2", "A3"]
    assert split_list(rows[0]["ref_numbers"]) == ["PO-1, rev 2", "PO-3"]  # `;` is the one list separator
    assert rows[0]["customer_company_name"] == 'Acme, "the" importer'
    assert split_list(rows[1]["ref_numbers"]) == ["X;1", "Y"]  # a JSON list keeps a `;` inside an item
    assert rows.places == [f"{batch} line 2", f"{batch} line 4", f"{batch} line 7"]
    parsed = parse_tracking_rows(rows, None)
    assert parsed[0].customer_name == 'Acme, "the" importer'  # the alternative column name still counts


def test_alternative_column_names_stay_accepted_and_others_are_named():
    check_header(["bill_of_lading", "ref_numbers"], REF_NUMBER_COLUMNS, "x")
    check_header(["container_number", "shipment_id", "ref_numbers"], REF_NUMBER_COLUMNS, "x")
    check_header(["path"], MANIFEST_COLUMNS, "x")
    check_header(["file", "name", "shipment_id", "bill_of_lading_number", "container_id", "container_number"],
                 MANIFEST_COLUMNS, "x")
    check_header(["request_number", "request_type", "customer", "customer_id", "customer_name", "scac",
                  "shipment_tags"], TRACKING_REQUEST_COLUMNS, "x")
    with pytest.raises(InputError) as caught:
        check_header(["filename", "name", "", "Name"], MANIFEST_COLUMNS, "m.csv line 1")
    message = str(caught.value)
    assert message.startswith("m.csv line 1: column 3 has no name; unexpected column filename (did you mean file?), "
                              "Name (did you mean name?); missing column file|path; expected header: one or more of file|path "
                              "(required), name, shipment_id")
    with pytest.raises(InputError, match="input rows: missing column request_type"):
        parse_tracking_rows([{"request_number": "A1"}], None)


def test_a_table_goes_through_the_same_checks():
    con = duckdb.connect()
    con.execute("create table refs as select '00000000-0000-4000-8000-000000000001' as shipment_id, "
                "['R1', '@cmd'] as ref_numbers, 1 as extra")
    with pytest.raises(InputError, match=r"^table refs: unexpected column extra; expected header"):
        read_rows("refs", con, columns=REF_NUMBER_COLUMNS)
    con.execute("alter table refs drop column extra")
    with pytest.raises(InputError, match=r"^table refs row 1 column ref_numbers: '@cmd' would run as a formula"):
        read_rows("refs", con, columns=REF_NUMBER_COLUMNS)
    assert read_rows("refs", con, columns=REF_NUMBER_COLUMNS, allow_formulas=True)[0]["ref_numbers"] == ["R1", "@cmd"]
    with pytest.raises(InputError, match=r"^refs\.csv: no such file, nor a table"):
        read_rows("refs.csv", con)  # never DuckDB's scan of a Python variable named `csv`


@pytest.mark.parametrize(("value", "formula"), [
    ("=1+1", True), ("@SUM(A1)", True), ("\tR1", True), ("\rR1", True), ("  =cmd", True), ("+A1", True),
    ("-cmd", True), ("-", True), ("+", True),
    ("-5", False), ("+1-555", False), ("PO-1", False), ("2024-01", False), ("R=1", False), ("", False),
    ("a@b.com", False),
])
def test_what_counts_as_a_formula(value, formula):
    assert looks_like_formula(value) is formula


def test_formulas_are_refused_with_line_and_column_unless_allowed(tmp_path):
    batch = tmp_path / "refs.csv"
    batch.write_text("shipment_id,ref_numbers\n00000000-0000-4000-8000-000000000001,R1;+1-555\n"
                     "00000000-0000-4000-8000-000000000002,R2;=HYPERLINK(1)\n,-cmd\n")
    with pytest.raises(InputError) as caught:
        read_rows(batch, columns=REF_NUMBER_COLUMNS)
    assert str(caught.value) == (
        f"{batch} line 3 column ref_numbers: '=HYPERLINK(1)' would run as a formula in a spreadsheet (also "
        f"{batch} line 4 column ref_numbers); remove the leading = + - @ (or tab), or pass --allow-formulas to "
        "send such values as they are")
    assert len(read_rows(batch, columns=REF_NUMBER_COLUMNS, allow_formulas=True)) == 3
