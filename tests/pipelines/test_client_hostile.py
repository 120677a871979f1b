"""Hostile JSON:API documents over real loopback HTTP: whatever a server sends, the client and the
flattening either return rows or raise `MalformedResponseError` naming what was wrong, never a
KeyError/TypeError deep in the pipeline, and never a key in the message."""

from __future__ import annotations

import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from pipelines.api import rows_by_type
from pipelines.errors import MalformedResponseError
from tests.support.scripted import TEST_KEY, Reply

text = st.text(st.characters(codec="utf-8", exclude_categories=("Cs",)), max_size=20)
scalars = st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner, max_size=4), max_leaves=20)
resource_like = st.fixed_dictionaries(
    {"id": st.one_of(text, st.integers(), st.none()), "type": st.one_of(text, st.none(), st.integers())},
    optional={"attributes": json_values, "relationships": json_values, "links": json_values},
)
documents = st.fixed_dictionaries(
    {},
    optional={
        "data": st.one_of(st.none(), resource_like, st.lists(resource_like, max_size=5), json_values),
        "included": st.one_of(st.lists(resource_like, max_size=5), json_values),
        "links": st.one_of(st.fixed_dictionaries({}, optional={"next": st.one_of(st.none(), text, st.integers())}), json_values),
        "meta": json_values,
    },
)
SLOW = settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])


@SLOW
@given(documents)
def test_any_document_yields_rows_or_a_malformed_error(api_server, make_client, document):
    api_server.script("GET", "/shipments", Reply(body=document))
    client = make_client()
    try:
        for page in client.paginate("/shipments", params={"page[size]": 100}):
            rows = rows_by_type(page)
            assert all(isinstance(row.get("id"), str) for group in rows.values() for row in group)
    except MalformedResponseError as error:
        assert TEST_KEY not in str(error)
        assert str(error)


@pytest.mark.slow
@SLOW
@given(st.binary(max_size=200))
def test_any_body_bytes_yield_a_document_or_a_malformed_error(api_server, make_client, body):
    api_server.script("GET", "/parties", Reply(body=body))
    try:
        document = make_client().get("/parties")
        rows_by_type(document)
    except MalformedResponseError as error:
        assert TEST_KEY not in str(error)


def test_a_huge_page_with_unicode_flattens_every_row(api_server, make_client):
    names = ["Ünïcødé 船運 🚢 " + str(i) for i in range(5000)]
    document = {
        "data": [
            {"id": f"p{i}", "type": "party", "attributes": {"company_name": name}} for i, name in enumerate(names)
        ]
    }
    api_server.script("GET", "/parties", Reply(body=document))

    pages = list(make_client().paginate("/parties"))

    rows = rows_by_type(pages[0])["party"]
    assert [row["company_name"] for row in rows] == names
    assert len(json.dumps(document)) > 200_000
