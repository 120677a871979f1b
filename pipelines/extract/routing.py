"""Rows a resource yields into a table of their own (dlt table variants): the `sync_issues` and
`fetch_log` rows ride along with whichever resource recorded them, so they land in the same load package
as the data they describe."""

from __future__ import annotations

from typing import Any

import dlt


def routed_rows(rows: list[dict[str, Any]], table: str, primary_key: tuple[str, ...],
                columns: dict[str, dict[str, Any]]) -> Any:
    """`rows` as one item for `table`, merged on `primary_key`, with the given column hints."""
    hints = dlt.mark.make_hints(
        table_name=table,
        write_disposition="merge",
        primary_key=primary_key,
        merge_key="",  # a variant starts from its resource's hints: map_features merges on container_id
        columns={name: dict(hint) for name, hint in columns.items()},  # dlt writes into the hints it gets
    )
    return dlt.mark.with_hints(rows, hints, create_table_variant=True)
