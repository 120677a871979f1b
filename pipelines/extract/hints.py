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
# empty item lacks. There a table appears with its first row (the models read a missing one as empty).
EMPTY_TABLE_DESTINATIONS = frozenset({"duckdb", "ducklake"})


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
