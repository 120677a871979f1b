"""The columns the API documents, per table, with their dlt data types: declared before any data arrives.

`api_columns.json` is generated from the vendor's OpenAPI spec by `scripts/columns_from_spec.py` (with the
columns the live service sends beyond the spec); it is vendored, so nothing reads the spec at run time.
A table named `<table>__<attribute>` is the nested table dlt makes of an array of objects (container holds
and fees). The source declares these columns on its resources (`pipelines.extract.source`), and
`schema_drift` tells what a warehouse holds beyond them: new attributes and dlt's variant columns.

No dlt here: the Dagster checks import this module when the code location loads.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import duckdb

COLUMNS_FILE = Path(__file__).with_name("api_columns.json")

#: The marker dlt puts in the name of a column holding values that did not fit the column's type.
VARIANT_MARKER = "__v_"
#: dlt's own columns (load id, row keys, nested-table links, SCD2 validity): never an attribute.
DLT_PREFIX = "_dlt_"
#: The pipeline's own column on tables whose rows a complete listing can retire (`pipelines.extract.roster`):
#: dlt's `hard_delete` marker, never an attribute.
HARD_DELETE_COLUMN = {"deleted": {"data_type": "bool", "nullable": True, "hard_delete": True}}
#: A dlt data type → how DuckDB (and DuckLake) reports it in `information_schema.columns`.
DUCKDB_TYPES = {
    "text": "VARCHAR",
    "timestamp": "TIMESTAMP WITH TIME ZONE",
    "date": "DATE",
    "bigint": "BIGINT",
    "double": "DOUBLE",
    "bool": "BOOLEAN",
    "json": "JSON",
}


@cache
def api_columns() -> dict[str, dict[str, str]]:
    """Table → {column: dlt data type}, nested tables included, as vendored."""
    return json.loads(COLUMNS_FILE.read_text())["tables"]


def column_hints(table: str) -> dict[str, dict[str, Any]]:
    """dlt column hints of a table (`columns=` of a resource or of its nested hints), a fresh dict each
    call: dlt writes into the hints it is given."""
    return {name: {"data_type": data_type} for name, data_type in api_columns()[table].items()}


def nested_tables(table: str) -> dict[str, str]:
    """The nested tables of a root table: attribute (dlt's path) → table name."""
    prefix = f"{table}__"
    return {name.removeprefix(prefix): name for name in api_columns() if name.startswith(prefix)}


@dataclass(frozen=True)
class SchemaDrift:
    """What a warehouse holds beyond the declared columns.

    `new_columns`: (table, column, type) not declared, in a declared table or in a nested table nobody
    declared (a new attribute, usually); `variant_columns`: (table, column) dlt made for values that did not
    fit their column's type; `retyped`: (table, column, declared, loaded) where an older warehouse keeps the
    type it inferred before the column was declared (dlt never changes a column's type)."""

    new_columns: list[tuple[str, str, str]] = field(default_factory=list)
    variant_columns: list[tuple[str, str]] = field(default_factory=list)
    retyped: list[tuple[str, str, str, str]] = field(default_factory=list)

    @property
    def drifted(self) -> bool:
        """True when there is something to look at: a new or a variant column."""
        return bool(self.new_columns or self.variant_columns)


def _same_type(declared: str, loaded: str) -> bool:
    return loaded.lower() == declared or loaded.upper() == DUCKDB_TYPES.get(declared, declared.upper())


def schema_drift(loaded: Mapping[str, Mapping[str, str]],
                 declared: Mapping[str, Mapping[str, str]] | None = None) -> SchemaDrift:
    """Compare loaded tables ({table: {column: type}}, types as dlt or DuckDB name them) with the declared
    columns (`api_columns()` by default). Tables the API does not feed (the fetch log, sync issues, maps,
    dlt's own) are left alone, except that a variant column anywhere is reported."""
    declared = api_columns() if declared is None else declared
    roots = {name for name in declared if "__" not in name}
    drift = SchemaDrift()
    for table in sorted(loaded):
        columns = loaded[table]
        known = declared.get(table)
        ours = known is not None or table.split("__", 1)[0] in roots
        for column in sorted(columns):
            if VARIANT_MARKER in column:
                drift.variant_columns.append((table, column))
            elif not ours or column.startswith(DLT_PREFIX) or column in HARD_DELETE_COLUMN:
                continue
            elif known is None or column not in known:
                drift.new_columns.append((table, column, columns[column]))
            elif not _same_type(known[column], columns[column]):
                drift.retyped.append((table, column, known[column], columns[column]))
    return drift


def loaded_columns(con: duckdb.DuckDBPyConnection, dataset: str) -> dict[str, dict[str, str]]:
    """{table: {column: type}} of a dataset's base tables, read from a DuckDB connection's
    `information_schema` (a DuckLake attached as the current database included)."""
    rows = con.execute(
        "select c.table_name, c.column_name, c.data_type from information_schema.columns c "
        "join information_schema.tables t on t.table_catalog = c.table_catalog "
        "and t.table_schema = c.table_schema and t.table_name = c.table_name "
        "where c.table_catalog = current_database() and c.table_schema = ? and t.table_type = 'BASE TABLE'",
        [dataset],
    ).fetchall()
    tables: dict[str, dict[str, str]] = {}
    for table, column, data_type in rows:
        tables.setdefault(table, {})[column] = data_type
    return tables
