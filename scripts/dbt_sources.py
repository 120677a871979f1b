"""Write dbt's sources file, `sql/models/staging/_sources.yml`, from the raw tables' registry
(`pipelines.source.TABLES`): each raw table and its documented nested tables, its description, a test
of its primary key and one of each checked reference. dagster-dbt turns these source tests into asset checks
on the ingest assets (`enable_source_tests_as_checks`); they run in the models' `dbt build`.

    python scripts/dbt_sources.py            # print the file
    python scripts/dbt_sources.py --write    # write it
    python scripts/dbt_sources.py --check    # exit 1 when the file is not what the registry renders
"""

from __future__ import annotations

import sys
from pathlib import Path
from typing import Any

import yaml

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.source import TABLES, RawTable, Reference, nested_table_names  # noqa: E402  (the script runs from anywhere)
from scripts.generated import generator_main  # noqa: E402

SOURCES_FILE = REPO / "sql" / "models" / "staging" / "_sources.yml"
HEADER = "# Generated from pipelines/source/__init__.py by `python scripts/dbt_sources.py --write`: edit the registry, not this file.\n"
SOURCE_DESCRIPTION = (
    "The raw tables dlt loads from the service (`python -m pipelines sync`, or the Dagster ingest asset "
    "`ocean_tracking`). A dlt child table (`containers__holds_at_pod_terminal`) is loaded by its root resource; "
    "a table or column dlt has not created yet reads as empty through `contract_source`, and its tests pass. "
    "Key tests fail the models' build (dbt skips the models reading a table whose key is broken); reference "
    "tests warn."
)


def key_test_name(table: RawTable) -> str:
    """The name of a table's key test, and of the Dagster check dagster-dbt makes of it."""
    return f"{table.name}_primary_key"


def reference_test_name(table: RawTable, reference: Reference) -> str:
    """The name of a reference's test and check: the table, the column and, for a polymorphic column, the
    entity type its rows must name (`custom_fields_entity_id_container_resolves`)."""
    entity = f"_{reference.where.split(' = ')[1].strip(chr(39))}" if reference.where else ""
    return f"{table.name}_{reference.column}{entity}_resolves"


def table_tests(table: RawTable) -> list[dict[str, Any]]:
    """The dbt tests of one raw table: its primary key, then each reference (severity warn)."""
    key_arguments: dict[str, Any] = {"columns": list(table.primary_key)}
    if table.key_where:
        key_arguments["only_where"] = table.key_where
    tests: list[dict[str, Any]] = [{"raw_primary_key": {"name": key_test_name(table), "arguments": key_arguments}}]
    for reference in table.references:
        arguments: dict[str, Any] = {"column_name": reference.column,
                                     "to_table": reference.parent,
                                     "field": reference.parent_column}  # fmt: skip
        if reference.where:
            arguments["only_where"] = reference.where
        test: dict[str, Any] = {"name": reference_test_name(table, reference), "arguments": arguments,
                                "config": {"severity": "warn"}}  # fmt: skip
        if reference.note:  # dagster-dbt shows a test's `meta.description` on its check
            test["config"]["meta"] = {"description": f"May warn: {reference.note}."}
        tests.append({"raw_reference": test})
    return tests


def render() -> str:
    """The sources file's text."""
    tables: list[dict[str, Any]] = []
    for table in TABLES.values():
        tables.append({"name": table.name, "description": table.description, "data_tests": table_tests(table)})
        tables += [{"name": name, "description": f"dlt child table of {table.name}, loaded with it."}
                   for name in nested_table_names(table.name)]  # fmt: skip
    document = {"version": 2, "sources": [{
        "name": "ocean_tracking",
        "description": SOURCE_DESCRIPTION,
        "schema": "{{ var('raw_schema', 'ocean_tracking') }}",
        "tables": tables,
    }]}  # fmt: skip
    return HEADER + yaml.safe_dump(document, sort_keys=False, width=110, allow_unicode=True)


def main(argv: list[str] | None = None) -> int:
    """Print, write or check the sources file."""
    return generator_main(argv, __doc__, render(), written=SOURCES_FILE.read_text(), what=str(SOURCES_FILE.relative_to(REPO)),
                          write=SOURCES_FILE.write_text, command="python scripts/dbt_sources.py --write")  # fmt: skip

if __name__ == "__main__":
    raise SystemExit(main())
