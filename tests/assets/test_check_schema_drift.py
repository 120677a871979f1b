"""The schema-drift check on tables a real dlt load wrote: quiet for the declared columns, a warning when
the API sends a new attribute or a value that does not fit its column."""

from __future__ import annotations

from collections.abc import Callable

import dagster as dg
import dlt
import duckdb
import pytest

from assets.checks import check_schema_drift
from pipelines.source import column_hints

DATASET = "ocean_tracking"


@pytest.fixture
def load_shipments(tmp_path, monkeypatch) -> Callable[[list[dict]], duckdb.DuckDBPyConnection]:
    """Load shipment rows (declared columns as the source declares them) into a DuckDB file; returns a
    connection to it."""
    monkeypatch.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")
    path = tmp_path / "warehouse.duckdb"
    pipeline = dlt.pipeline("drift", destination=dlt.destinations.duckdb(str(path)),
                            pipelines_dir=str(tmp_path / "dlt"), dataset_name=DATASET)  # fmt: skip

    def load(rows: list[dict]) -> duckdb.DuckDBPyConnection:
        resource = dlt.resource(rows, name="shipments", primary_key="id", write_disposition="merge",
                                columns=column_hints("shipments"))  # fmt: skip
        pipeline.run(resource, loader_file_format="parquet").raise_on_failed_jobs()
        return duckdb.connect(str(path), read_only=True)

    return load


SHIPMENT = {"id": "s1", "bill_of_lading_number": "MAEU1", "created_at": "2026-11-01T00:00:00Z"}


def test_declared_columns_pass(load_shipments):
    with load_shipments([SHIPMENT]) as con:
        result = check_schema_drift(con, DATASET, "shipments")
    assert result.passed
    assert result.metadata["new_columns"].data == [] and result.metadata["variant_columns"].data == []


def test_a_new_attribute_warns_and_names_it(load_shipments):
    with load_shipments([{**SHIPMENT, "carbon_footprint_kg": 12.5}]) as con:
        result = check_schema_drift(con, DATASET, "shipments")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["new_columns"].data == ["shipments.carbon_footprint_kg (DOUBLE)"]
    assert "1 undeclared column" in result.description


def test_a_value_that_does_not_fit_its_column_warns(load_shipments):
    with load_shipments([{**SHIPMENT, "pod_eta_at": "next tuesday"}]) as con:
        result = check_schema_drift(con, DATASET, "shipments")
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["variant_columns"].data == ["shipments.pod_eta_at__v_text"]


def test_a_table_not_loaded_yet_warns():
    con = duckdb.connect()
    con.execute(f"create schema {DATASET}")
    assert not check_schema_drift(con, DATASET, "shipments").passed
