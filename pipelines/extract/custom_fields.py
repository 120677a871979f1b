"""The account's custom fields: their definitions and their values on shipments, containers and tracking
requests, as two tables (`custom_field_definitions`, `custom_fields`) the models join to what they describe.

Read as two paged lists a sync (`/custom_field_definitions`, `/custom_fields`: two requests for most
accounts), never per entity: the per-entity routes would cost a request per shipment. Each list is read to
its end before any row is used, so a failure midway leaves nothing half-read. The live `GET /custom_fields`
answered 500 in a capture (API-NOTES §12.13), so a list that fails after its retries is a per-item failure
(`pipelines.extract.item_issues`: recorded in `sync_issues`, everything else loads, the next sync asks
again), and an account refused the feature (403) gets one warning and no custom fields. A value, any JSON by the
spec, is loaded as its JSON text.

Rows whose content did not change since they were loaded are not loaded again (`fetch_log` kinds
`custom_field_definition`, `custom_field`); a value or definition the user deleted is deleted from its
table once a complete listing no longer shows it (`pipelines.extract.roster`).
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from typing import Any

import dlt
import orjson
from dlt.sources import DltResource

from pipelines.api import rows_by_type
from pipelines.api.client import OceanTrackingClient
from pipelines.errors import AuthorizationError
from pipelines.extract.columns import HARD_DELETE_COLUMN
from pipelines.extract.fetch_log import SyncFetchLog
from pipelines.extract.hints import create_if_new, create_if_still_new, declared, keep_routed_tables_apart
from pipelines.extract.item_issues import ItemIssues
from pipelines.extract.pages import every_page
from pipelines.extract.roster import deleted_rows

logger = logging.getLogger(__name__)

#: table → the JSON:API type of its rows
LISTS = {"custom_field_definitions": "custom_field_definition", "custom_fields": "custom_field"}


def custom_field_resources(client: OceanTrackingClient, issues: ItemIssues, log: SyncFetchLog) -> list[DltResource]:
    """The two custom-field resources of one source run, sharing its client, sync issues and fetch log."""
    refused: list[str] = []

    def listed_rows(table: str) -> list[dict[str, Any]] | None:
        """Every row of the list, or None when it failed (a sync issue) or the account is refused it."""
        if refused:
            return None
        issues.cover_count(table, 1)
        try:
            documents = issues.fetch(table, f"/{table}", every_page, client, f"/{table}")
        except AuthorizationError as error:
            refused.append(table)
            logger.warning("Custom fields skipped (%s): the account is not allowed to read them; every other "
                           "table still loads.", str(error).splitlines()[0])
            return None
        if documents is None:
            return None
        rows = [row for document in documents for row in rows_by_type(document).get(LISTS[table], [])]
        return [_value_as_json_text(row) for row in rows] if table == "custom_fields" else rows

    def load(table: str) -> Iterator[Any]:
        keep_routed_tables_apart()
        yield from create_if_new(table)
        rows = listed_rows(table)
        if rows is not None:
            yield list(log.get().changed_rows(LISTS[table], rows))
            yield deleted_rows(table, (row["id"] for row in rows), table.replace("_", " "))
        yield from log.pending()
        yield from issues.pending()
        if rows == []:  # the account has none (yet)
            yield from create_if_still_new(table)

    hints = {name: {**declared(name), "columns": {**declared(name)["columns"], **HARD_DELETE_COLUMN}} for name in LISTS}

    @dlt.resource(primary_key="id", write_disposition="merge", **hints["custom_field_definitions"])
    def custom_field_definitions() -> Iterator[Any]:
        yield from load("custom_field_definitions")

    @dlt.resource(primary_key="id", write_disposition="merge", **hints["custom_fields"])
    def custom_fields() -> Iterator[Any]:
        yield from load("custom_fields")

    return [custom_field_definitions, custom_fields]


def _value_as_json_text(row: dict[str, Any]) -> dict[str, Any]:
    """A value is any JSON (string, number, boolean, list, object): it is loaded as its JSON text, one
    column whatever the type, which the models read back as JSON (`stg_custom_fields`)."""
    if row.get("value") is not None:
        row["value"] = orjson.dumps(row["value"]).decode()
    return row
