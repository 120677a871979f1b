"""Resource hints every table of the source shares: its declared columns, an empty item that creates it
while it is new, and the routed tables (`fetch_log`, `sync_issues`) kept apart from its hints."""

from __future__ import annotations

from typing import Any

import dlt
from dlt.common.schema.utils import has_table_seen_data

from pipelines.extract.columns import column_hints, nested_tables
from pipelines.extract.fetch_log import TABLE as FETCH_LOG_TABLE
from pipelines.extract.item_issues import TABLE as SYNC_ISSUES_TABLE


def declared(table: str) -> dict[str, Any]:
    """The columns (and nested tables' columns) the API documents for `table`, as resource hints, so dlt
    types every column, null or not, before any data arrives (`pipelines.extract.columns`)."""
    nested = {
        path: dlt.mark.make_nested_hints(columns=column_hints(name)) for path, name in nested_tables(table).items()
    }
    return {"columns": column_hints(table), "nested_hints": nested or None}


def is_new(table: str) -> bool:
    """No load has created `table` yet (dlt marks a table once data, or an empty item, reached it)."""
    existing = dlt.current.source_schema().tables.get(table)
    return existing is None or not has_table_seen_data(existing)


# Destinations that create a table from an empty item. Elsewhere the empty load job fails: PostgreSQL's
# ADBC ingest needs at least one record batch, and a Delta merge hashes each row's primary key, which the
# empty item lacks. There a table appears with its first row (the models read a missing one as empty),
# unless `create_if_still_new` can make it.
EMPTY_TABLE_DESTINATIONS = frozenset({"duckdb", "ducklake"})
# Destinations that create a table from an empty item loaded as `insert_values` instead of parquet.
# PostgreSQL types a json column by the file format (json for parquet, which its ADBC ingest can copy into,
# jsonb otherwise, which it cannot), so only a table without a json column is made this way.
INSERT_VALUES_EMPTY_DESTINATIONS = frozenset({"postgres"})


def create_if_new(table: str) -> list[Any]:
    """An empty item that has dlt create `table` with its declared columns even when no row arrives, while
    the table is new (then nothing: an empty load job a sync per table would cost a merge each), on the
    destinations that can (`EMPTY_TABLE_DESTINATIONS`)."""
    destination = dlt.current.pipeline().destination
    if destination is None or destination.destination_name not in EMPTY_TABLE_DESTINATIONS:
        return []
    return [dlt.mark.materialize_table_schema()] if is_new(table) else []


def keep_routed_tables_apart() -> None:
    """The tables the running resource routes rows into (`fetch_log`, `sync_issues`: dlt table variants)
    start from its hints; without this they would get its declared columns and nested tables. Done as the
    resource runs, so the variants also start from hints applied after the source was built (a Delta
    lake's `table_format`)."""
    resource = dlt.current.resource()
    for table in (FETCH_LOG_TABLE, SYNC_ISSUES_TABLE):
        resource.apply_hints(table_name=table, columns={}, nested_hints={}, create_table_variant=True)


def create_if_still_new(table: str) -> list[Any]:
    """At the end of a resource's run that yielded no row for `table`: an empty item, loaded as `insert_values`,
    that has dlt create the table on the destinations that cannot load an empty parquet item but can this
    (`INSERT_VALUES_EMPTY_DESTINATIONS`), while it is new and has no json column. Called last, with no row of
    the table in this sync, so no row is ever loaded that way; `create_if_new` has made it elsewhere."""
    destination = dlt.current.pipeline().destination
    if destination is None or destination.destination_name not in INSERT_VALUES_EMPTY_DESTINATIONS or not is_new(table):
        return []
    columns = dlt.current.resource().compute_table_schema()["columns"]
    if any(column.get("data_type") == "json" for column in columns.values()):
        return []
    return [dlt.mark.with_hints(dlt.mark.materialize_table_schema(), dlt.mark.make_hints(file_format="insert_values"))]
