"""The raw tables' registry (`pipelines.source.TABLES`) is their one declaration: the dlt resources'
hints, the Dagster ingest specs and their lineage, the dbt sources file and the raw tables' checks derive
from it."""

from __future__ import annotations

import pytest

from assets.ingest import asset_key, ocean_tracking_assets
from assets.models import analytics_models
from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.source import TABLES, RawTable, Reference
from pipelines.source.resources import ocean_tracking
from tests.support import load_script


def test_the_dbt_sources_file_is_the_one_the_registry_renders():
    script = load_script("dbt_sources")
    assert script.SOURCES_FILE.read_text() == script.render(), "run: python scripts/dbt_sources.py --write"


def test_a_table_added_to_the_registry_changes_the_sources_file(monkeypatch):
    script = load_script("dbt_sources")
    extra = RawTable("bookings", "Bookings.", jsonapi_type="booking", declared=False,
                     references=(Reference("shipment_id", "shipments"),))  # fmt: skip
    monkeypatch.setitem(script.TABLES, "bookings", extra)
    text = script.render()
    assert "- name: bookings" in text and "bookings_primary_key" in text and "bookings_shipment_id_resolves" in text
    assert script.main(["--check"]) == 1


def test_every_lineage_edge_is_a_reference_and_every_reference_an_edge():
    edges = {(spec.key, dep.asset_key) for spec in ocean_tracking_assets.specs for dep in spec.deps}
    references = {(asset_key(table.name), asset_key(reference.parent))
                  for table in TABLES.values() for reference in table.references}  # fmt: skip
    assert edges == references
    assert {spec.key for spec in ocean_tracking_assets.specs} == {asset_key(name) for name in TABLES}
    assert {spec.key: spec.description for spec in ocean_tracking_assets.specs} == {
        asset_key(name): table.description for name, table in TABLES.items()
    }


def test_every_key_and_reference_is_a_check_on_its_table():
    """dagster-dbt turns the sources file's tests into checks on the ingest assets; a raw table no model reads
    (only `sync_issues`) has its key tested by dbt's build but no Dagster check: its own check reads it."""
    script = load_script("dbt_sources")
    checks = {(key.asset_key, key.name) for key in analytics_models.check_keys}
    missing = []
    for table in TABLES.values():
        expected = [script.key_test_name(table), *(script.reference_test_name(table, ref) for ref in table.references)]
        missing += [(table.name, name) for name in expected if (asset_key(table.name), name) not in checks]
    assert missing == [("sync_issues", "sync_issues_primary_key")]
    assert all(spec.blocking for spec in analytics_models.check_specs if spec.name.endswith("_primary_key"))
    assert not any(spec.blocking for spec in analytics_models.check_specs if spec.name.endswith("_resolves"))


@pytest.fixture
def source(tmp_path):
    """The dlt source built around a client (nothing is requested until a resource runs)."""
    client = OceanTrackingClient(load_settings(api_key="registry-test-key", base_url="http://127.0.0.1:9/v2",
                                               limiter_path=tmp_path / "limiter.sqlite"))  # fmt: skip
    yield ocean_tracking(client=client)
    client.close()
    client.limiter.close()


def test_every_resource_carries_its_tables_hints(source):
    resources = {name: resource for name, resource in source.resources.items() if name != "shipment_pages"}
    assert set(resources) == {name for name, table in TABLES.items() if table.resource}
    for name, resource in resources.items():
        table = TABLES[name]
        schema = resource.compute_table_schema()
        columns = schema["columns"]
        assert set(table.declared_columns()) <= set(columns), name
        keys = {column for column, hint in columns.items() if hint.get("primary_key")}
        assert keys == (set() if table.scd2 else set(table.primary_key)), name
        assert schema["write_disposition"] == (table.write_disposition if isinstance(table.write_disposition, str)
                                               else table.write_disposition["disposition"]), name  # fmt: skip
        if table.merge_key:
            assert {column for column, hint in columns.items() if hint.get("merge_key")} == {table.merge_key}
