"""JSON:API flattening on live-shaped fixtures and on hostile input."""

from __future__ import annotations

import contextlib
import copy

import pytest
from hypothesis import given
from hypothesis import strategies as st

from pipelines.api import flatten_document, flatten_resource, rows_by_type
from pipelines.errors import MalformedResponseError
from tests.support.scripted import load_fixture


def test_single_document_with_included():
    doc = load_fixture("shipments.get.include.json")
    flat = flatten_document(doc)
    (shipment,) = flat.data
    assert flat.data_types == ["shipment"]
    assert shipment["id"] == "shipment-1"
    assert shipment["bill_of_lading_number"] == "HLCUSEL251063ad5"  # attribute as a top-level column
    assert not any(k.startswith("attributes") for k in shipment)
    assert shipment["port_of_lading_id"] == "port-1"
    assert shipment["pod_terminal_id"] == "terminal-1"
    assert shipment["destination_id"] is None  # to-one with data: null
    assert shipment["containers_ids"] == ["container-1"]  # to-many
    assert shipment["self_link"] == "/v2/shipments/a99e23fe-84ca-4dac-ab15-c4996c7fe3d6"
    assert sorted(flat.included) == ["container", "port", "terminal"]
    assert [p["id"] for p in flat.included["port"]] == ["port-1", "port-2"]
    port = flat.included["port"][0]
    assert port["id"] == "port-1" and port["name"] == "Busan"  # attributes.id did not override the id
    assert flat.links["self"].startswith("https://")


def test_list_document_and_rows_by_type():
    doc = load_fixture("containers.list.json")
    tables = rows_by_type(doc)
    (container,) = tables["container"]
    assert container["number"] == "EISU8332dc1"
    assert container["equipment_length"] == 40
    assert container["holds_at_pod_terminal"][0]["name"] == "freight"  # nested values pass through
    assert "shipment_id" in container


def test_tracking_request_polymorphic_relationships_keep_type():
    doc = load_fixture("tracking-requests.list.json")
    (row,) = flatten_document(doc).data
    assert row["tracked_object_id"] == "shipment-1"
    assert row["tracked_object_type"] == "shipment"
    assert row["customer_id"] is None and row["customer_type"] is None
    assert row["user_id"] == "user-1" and "user_type" not in row


def test_included_is_deduplicated_and_not_repeated_from_data():
    doc = load_fixture("shipments.get.include.json")
    doc["included"] = doc["included"] + copy.deepcopy(doc["included"]) + [copy.deepcopy(doc["data"])]
    flat = flatten_document(doc)
    assert [p["id"] for p in flat.included["port"]] == ["port-1", "port-2"]
    assert "shipment" not in flat.included


def test_attribute_id_never_overrides_the_resource_id():
    row = flatten_resource({"id": "p1", "type": "port", "attributes": {"id": "other", "name": "Ö"}})
    assert row == {"id": "p1", "name": "Ö"}


def test_attribute_and_relationship_name_clash_keeps_both():
    row = flatten_resource({
        "id": "x", "type": "t", "attributes": {"vessel_id": "attr"},
        "relationships": {"vessel": {"data": {"id": "rel", "type": "vessel"}}},
    })
    assert row["vessel_id"] == "attr" and row["vessel_id_rel"] == "rel"


def test_tolerates_missing_and_null_members():
    assert flatten_document({"data": None}).data == []
    assert flatten_document({"data": []}).included == {}
    row = flatten_resource({"id": 7, "type": "x", "attributes": None, "relationships": {"a": {"links": {}}}})
    assert row == {"id": "7"}


@pytest.mark.parametrize(
    ("doc", "path"),
    [
        ([], "$"),
        ({"data": "nope"}, "data"),
        ({"data": [{"type": "x"}]}, "data[0].id"),
        ({"data": [{"id": "1"}]}, "data[0].type"),
        ({"data": {"id": "1", "type": "x", "attributes": []}}, "data.attributes"),
        ({"data": {"id": "1", "type": "x", "relationships": {"r": {"data": [{"type": "y"}]}}}},
         "data.relationships.r.data[0].id"),
        ({"data": {"id": "1", "type": "x", "relationships": {"r": "s"}}}, "data.relationships.r"),
        ({"data": [], "included": {}}, "included"),
        ({"data": [], "included": [None]}, "included[0]"),
        ({"errors": [{"status": "500"}]}, "$"),
    ],
)
def test_hostile_shapes_name_the_path(doc, path):
    with pytest.raises(MalformedResponseError) as info:
        flatten_document(doc)
    assert f"{path}:" in str(info.value)


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3),
    max_leaves=10,
)


@pytest.mark.slow
@given(json_values)
def test_arbitrary_json_never_raises_anything_but_malformed(value):
    for doc in (value, {"data": value}, {"data": [value]}, {"data": {"id": "1", "type": "t", "relationships": value}},
                {"data": [], "included": value}):
        with contextlib.suppress(MalformedResponseError):
            flatten_document(doc)
