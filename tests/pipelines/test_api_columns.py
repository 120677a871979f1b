"""The declared columns (`pipelines/source/api_columns.json`): generated from the vendor's spec, and what
`schema_drift` makes of a warehouse that holds more."""

from __future__ import annotations

import json

import pytest

from pipelines.source import COLUMNS_FILE, api_columns, column_hints, nested_tables, schema_drift
from tests.support import load_script
from tests.support.sandboxes import shared_dir


def test_the_vendored_file_is_what_the_spec_generates():
    openapi = shared_dir() / "reference" / "terminal49" / "openapi.json"
    if not openapi.is_file():
        pytest.skip(f"the vendor's spec is not at {openapi}")

    text = load_script("columns_from_spec").render(json.loads(openapi.read_text()))

    assert COLUMNS_FILE.read_text() == text, "run: python scripts/columns_from_spec.py"


def test_columns_are_named_as_the_rows_are_flattened():
    tables = api_columns()
    # attributes, to-one and to-many relationships, the polymorphic type, the link, a flattened object
    assert {"bill_of_lading_number", "pod_eta_at", "port_of_lading_id", "containers_ids", "self_link"} <= set(
        tables["shipments"]
    )
    assert tables["tracking_requests"]["tracked_object_type"] == "text"
    assert tables["containers"]["import_deadlines__pickup_lfd_rail"] == "timestamp"
    # arrays of objects are nested tables, not columns
    assert nested_tables("containers") == {
        "holds_at_pod_terminal": "containers__holds_at_pod_terminal",
        "fees_at_pod_terminal": "containers__fees_at_pod_terminal",
    }
    assert "holds_at_pod_terminal" not in tables["containers"]
    assert tables["containers__fees_at_pod_terminal"]["amount"] == "double"
    # the spec's types, and live-only attributes (API-NOTES §12) with theirs
    assert tables["containers"]["weight_in_lbs"] == "double"
    assert tables["containers"]["equipment_length"] == "bigint"
    assert tables["shipments"]["ref_numbers"] == "json"
    assert tables["containers"]["ssl_lfd"] == "timestamp"
    assert tables["transport_events"]["value"] == "text"


def test_hints_are_fresh_dicts():
    first = column_hints("ports")
    first["latitude"]["name"] = "written by dlt"
    assert column_hints("ports")["latitude"] == {"data_type": "double"}


DECLARED = {"shipments": {"id": "text", "pod_eta_at": "timestamp"}, "shipments__legs": {"name": "text"}}


def test_declared_columns_and_dlt_columns_are_no_drift():
    loaded = {
        "shipments": {"id": "VARCHAR", "pod_eta_at": "TIMESTAMP WITH TIME ZONE", "_dlt_id": "VARCHAR"},
        "shipments__legs": {"name": "VARCHAR", "_dlt_parent_id": "VARCHAR"},
        "fetch_log": {"kind": "VARCHAR"},  # no API table: not ours to judge
    }
    drift = schema_drift(loaded, DECLARED)
    assert not drift.drifted and drift.retyped == []


def test_new_attributes_new_nested_tables_and_variants_are_drift():
    loaded = {
        "shipments": {"id": "VARCHAR", "pod_eta_at": "TIMESTAMP WITH TIME ZONE", "carbon_kg": "DOUBLE",
                      "pod_eta_at__v_text": "VARCHAR"},
        "shipments__stops": {"locode": "VARCHAR", "_dlt_id": "VARCHAR"},
        "fetch_log": {"digest__v_text": "VARCHAR"},
    }  # fmt: skip
    drift = schema_drift(loaded, DECLARED)
    assert drift.drifted
    assert drift.new_columns == [("shipments", "carbon_kg", "DOUBLE"), ("shipments__stops", "locode", "VARCHAR")]
    assert drift.variant_columns == [("fetch_log", "digest__v_text"), ("shipments", "pod_eta_at__v_text")]


def test_a_type_an_older_warehouse_inferred_is_listed_but_no_drift():
    drift = schema_drift({"shipments": {"id": "VARCHAR", "pod_eta_at": "VARCHAR"}}, DECLARED)
    assert not drift.drifted
    assert drift.retyped == [("shipments", "pod_eta_at", "timestamp", "VARCHAR")]
