"""The `ocean_tracking` dlt source's room, laid out as a dlt verified source, and the raw tables it loads.

The room: `resources` (the source and its resources), `bookkeeping` (the fetch log and sync issues the resources
write beside their rows), `pages` (a page of shipments, and what a complete listing no longer holds),
`map_schedule` (which route maps are due, and the refresh budget). Here: the raw tables' registry and the
columns the API documents, without dlt, since the Dagster code location reads them when it loads.

`TABLES` names each raw table the source loads, with its primary key, write disposition, the columns it
declares beyond the API's, its references to other tables and its description. From it come the dlt hints
of the resources (`pipelines.source.resources`), the Dagster ingest specs and their lineage
(`assets.ingest`), the dbt sources file with the key and reference tests dagster-dbt turns into asset checks
(`sql/models/staging/_sources.yml`, written by `scripts/dbt_sources.py`, compared by a test), and the
tests' table lists. Adding a table means an entry here, its resource, and its staging model.

The columns the API documents, per table, with their dlt data types, are declared before any data arrives:
`api_columns.json` is generated from the vendor's OpenAPI spec by `scripts/columns_from_spec.py` (with the
columns the live service sends beyond the spec); it is vendored, so nothing reads the spec at run time. A
table named `<table>__<attribute>` is the nested table dlt makes of an array of objects (container holds and
fees). `schema_drift` tells what a warehouse holds beyond them: new attributes and dlt's variant columns.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path
from typing import Any

COLUMNS_FILE = Path(__file__).with_name("api_columns.json")

#: The marker dlt puts in the name of a column holding values that did not fit the column's type.
VARIANT_MARKER = "__v_"
#: dlt's own columns (load id, row keys, nested-table links, SCD2 validity): never an attribute.
DLT_PREFIX = "_dlt_"
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


#: The pipeline's own column on tables whose rows a complete listing can retire (`pipelines.source.pages`):
#: dlt's `hard_delete` marker, never an attribute.
HARD_DELETE_COLUMN = {"deleted": {"data_type": "bool", "nullable": True, "hard_delete": True}}
#: The dates of a shipment whose every version `shipment_eta_history` keeps.
ETA_HISTORY_COLUMNS = ("pol_etd_at", "pol_atd_at", "pod_eta_at", "pod_ata_at", "destination_eta_at",
                       "destination_ata_at")  # fmt: skip
#: What decides a container's money at the terminal, whose every version `container_charge_history` keeps:
#: the last free days (POD terminal, line, rail, inland facility), availability, and the holds and fees
#: written as one canonical text each (sorted, so the same holds in another order are the same version).
CHARGE_HISTORY_COLUMNS = {"pickup_lfd": "timestamp", "pickup_lfd_terminal": "timestamp", "pickup_lfd_line": "timestamp",
                          "pickup_lfd_rail": "timestamp", "inland_lfd": "timestamp", "available_for_pickup": "bool",
                          "holds": "text", "fees": "text"}  # fmt: skip
#: Why a reference cannot hold for every row: its parent is fetched by id once, and the service may answer
#: 404 for an id it names (the row is then known and never asked again, `pipelines.source.resources`).
FETCHED_BY_ID = "fetched by id once; the service may name one it answers 404 for"


@dataclass(frozen=True)
class Reference:
    """A column naming rows of another raw table (`parent.parent_column`), only on rows matching `where`
    when the column is polymorphic: a lineage edge of the Dagster assets, and a dbt test that every
    non-null value names a row (severity warn: a reference is reported, never blocks the models). `note`
    says why one may legitimately fail."""

    column: str
    parent: str
    parent_column: str = "id"
    where: str | None = None
    note: str | None = None


@dataclass(frozen=True)
class RawTable:
    """One raw table: what dlt, Dagster, dbt and the tests need to know of it.

    `primary_key` is unique and never null (among rows matching `key_where`); `write_disposition` and
    `merge_key` are dlt's; `columns` are dlt column hints beyond the API's documented columns (`declared`:
    whether `api_columns.json` documents it); `jsonapi_type` is the type of its rows in the API's documents;
    `resource` is False for a table whose rows ride along with the resources that record them; `notified`, a
    table whose rows the webhook notifications name, so a notification-driven refresh loads it;
    `unsent_columns`, declared columns the REST API may leave out of a resource (a notification's resource
    is complete without them)."""

    name: str
    description: str
    primary_key: tuple[str, ...] = ("id",)
    references: tuple[Reference, ...] = ()
    write_disposition: str | dict[str, str] = "merge"
    merge_key: str | None = None
    key_where: str | None = None
    columns: dict[str, dict[str, Any]] = field(default_factory=dict)
    declared: bool = True
    jsonapi_type: str | None = None
    resource: bool = True
    notified: bool = False
    unsent_columns: frozenset[str] = frozenset()

    @property
    def scd2(self) -> bool:
        """Whether dlt keeps every version of its rows (SCD2): dlt keys those rows itself, by a hash of each
        version, and `primary_key` is then the key of the current versions (`key_where`)."""
        return isinstance(self.write_disposition, dict) and self.write_disposition.get("strategy") == "scd2"

    @property
    def parents(self) -> tuple[str, ...]:
        """The tables its references name, each once, in order: its upstream assets."""
        return tuple(dict.fromkeys(reference.parent for reference in self.references))

    def declared_columns(self) -> dict[str, dict[str, Any]]:
        """Every column declared before data arrives: the API's (root table only) and the table's own."""
        documented = {name: {"data_type": type_} for name, type_ in api_columns()[self.name].items()} if self.declared else {}
        return {**documented, **{name: dict(hint) for name, hint in self.columns.items()}}


def _entity(column: str, type_column: str, entity: str, parent: str) -> Reference:
    return Reference(column, parent, where=f"{type_column} = '{entity}'")


TABLES: dict[str, RawTable] = {table.name: table for table in (
    RawTable("shipments", "Shipments (bills of lading / bookings), merged on id; one page per 100 shipments.",
             jsonapi_type="shipment", notified=True, references=(
                 Reference("pod_terminal_id", "terminals", note=FETCHED_BY_ID),
                 Reference("destination_terminal_id", "terminals", note=FETCHED_BY_ID),
                 Reference("port_of_lading_id", "ports", note=FETCHED_BY_ID),
                 Reference("port_of_discharge_id", "ports", note=FETCHED_BY_ID),
                 Reference("destination_id", "ports", note=FETCHED_BY_ID),
                 Reference("shipping_line_scac", "shipping_lines", "scac",
                           note="the carrier list may lag a SCAC the service already tracks"))),
    RawTable("shipment_eta_history", "Every version of a shipment's ETD/ETA dates across syncs (dlt SCD2: "
             "`_dlt_valid_from` / `_dlt_valid_to` mark when each was seen).",
             primary_key=("shipment_id",), key_where="_dlt_valid_to is null", merge_key="shipment_id", notified=True,
             write_disposition={"disposition": "merge", "strategy": "scd2"}, declared=False,
             columns={"shipment_id": {"data_type": "text"}, **{name: {"data_type": "timestamp"} for name in ETA_HISTORY_COLUMNS}},
             references=(Reference("shipment_id", "shipments"),)),
    RawTable("container_charge_history", "Every version of a container's last free days, availability, holds "
             "and fees across syncs (dlt SCD2, like shipment_eta_history).",
             primary_key=("container_id",), key_where="_dlt_valid_to is null", merge_key="container_id", notified=True,
             write_disposition={"disposition": "merge", "strategy": "scd2"}, declared=False,
             columns={"container_id": {"data_type": "text"},
                      **{name: {"data_type": type_} for name, type_ in CHARGE_HISTORY_COLUMNS.items()}},
             references=(Reference("container_id", "containers"),)),
    RawTable("containers", "Containers of the shipments (holds and fees as child tables), from the shipment pages.",
             jsonapi_type="container", notified=True, references=(
                 Reference("shipment_id", "shipments"),
                 Reference("pod_terminal_id", "terminals", note=FETCHED_BY_ID),
                 Reference("pickup_facility_id", "terminals", note=FETCHED_BY_ID))),
    RawTable("transport_events", "Milestones of each container; invalidated events kept with `invalidated_at`.",
             jsonapi_type="transport_event", notified=True, references=(
                 Reference("container_id", "containers"),
                 Reference("shipment_id", "shipments"),
                 Reference("vessel_id", "vessels", note=FETCHED_BY_ID),
                 Reference("location_id", "ports", note=FETCHED_BY_ID),
                 Reference("terminal_id", "terminals", note=FETCHED_BY_ID))),
    RawTable("map_features", "Route-map GeoJSON features per container (WKB geometry); fetched only when due.",
             primary_key=("container_id", "feature_index"), merge_key="container_id", declared=False,
             references=(Reference("container_id", "containers"),)),
    RawTable("terminals", "Terminals named by shipments, containers and events (fetched by id once, ever).",
             jsonapi_type="terminal", notified=True, references=(Reference("port_id", "ports", note=FETCHED_BY_ID),)),
    RawTable("ports", "Ports named by shipments, terminals and events (fetched by id once, ever).", jsonapi_type="port", notified=True),
    RawTable("vessels", "Vessels named by transport events (fetched by id once, ever).", jsonapi_type="vessel", notified=True),
    RawTable("tracking_requests", "Tracking requests, incremental on `updated_at` (5-minute lag window).",
             jsonapi_type="tracking_request", notified=True,
             unsent_columns=frozenset({"tags"}),  # live tracking requests carry `shipment_tags`, not `tags`
             references=(
                 _entity("tracked_object_id", "tracked_object_type", "shipment", "shipments"),
                 Reference("customer_id", "parties"))),
    RawTable("parties", "Customers (parties) of the account.", jsonapi_type="party"),
    RawTable("shipping_lines", "Shipping lines (carriers) and their SCACs.", jsonapi_type="shipping_line"),
    RawTable("departed_shipments", "Shipments that left the account (no longer listed by the service), with when "
             "a sync noticed; a shipment listed again drops out.", primary_key=("shipment_id",), declared=False,
             columns={"shipment_id": {"data_type": "text", "nullable": False},
                      "left_account_at": {"data_type": "timestamp", "nullable": True},
                      "listed_again": {"data_type": "bool", "nullable": True, "hard_delete": True}},
             references=(Reference("shipment_id", "shipments"),)),
    RawTable("custom_field_definitions", "The account's custom field definitions (slug, label, data type, entity "
             "type); a deleted one goes.", jsonapi_type="custom_field_definition", columns=HARD_DELETE_COLUMN),
    RawTable("custom_fields", "Custom field values on shipments, containers and tracking requests (`entity_type`, "
             "`entity_id`); deleted values go.", jsonapi_type="custom_field", columns=HARD_DELETE_COLUMN,
             references=(
                 Reference("definition_id", "custom_field_definitions"),
                 _entity("entity_id", "entity_type", "shipment", "shipments"),
                 _entity("entity_id", "entity_type", "container", "containers"),
                 _entity("entity_id", "entity_type", "tracking_request", "tracking_requests"))),
    RawTable("notifications_applied", "Webhook notifications applied by a targeted refresh, loaded with the rows they "
             "changed: when the service created each and when it arrived (its load's `_dlt_loads.inserted_at` is when "
             "its change became queryable). `webhook_freshness` reads the lag from it.",
             declared=False, resource=False, notified=True,
             columns={"id": {"data_type": "text", "nullable": False},
                      "event": {"data_type": "text", "nullable": True},
                      "created_at": {"data_type": "timestamp", "nullable": True},
                      "received_at": {"data_type": "timestamp", "nullable": True},
                      "reference_type": {"data_type": "text", "nullable": True},
                      "reference_id": {"data_type": "text", "nullable": True}}),
    RawTable("sync_issues", "Items (a map, a container's events, a terminal, port or vessel) that failed after "
             "their retries and were skipped: one row each while it fails, deleted when a sync fetches it again.",
             primary_key=("resource", "item_id"), declared=False, resource=False,
             columns={"resource": {"data_type": "text", "nullable": False},
                      "item_id": {"data_type": "text", "nullable": False},
                      "http_status": {"data_type": "bigint", "nullable": True},
                      "error": {"data_type": "text", "nullable": True},
                      "message": {"data_type": "text", "nullable": True},
                      "first_seen_at": {"data_type": "timestamp", "nullable": True},
                      "last_seen_at": {"data_type": "timestamp", "nullable": True},
                      # syncs that tried the item and failed, each after its own retries
                      "attempts": {"data_type": "bigint", "nullable": True},
                      "resolved": {"data_type": "bool", "nullable": True, "hard_delete": True}}),
)}  # fmt: skip


@cache
def double_columns(table: str) -> tuple[str, ...]:
    """The table's declared columns of type double (the live service sends some as strings)."""
    return tuple(name for name, hint in TABLES[table].declared_columns().items() if hint.get("data_type") == "double")


def table_of_type(jsonapi_type: str) -> str:
    """The raw table whose rows are of a JSON:API type (`port` → `ports`)."""
    return next(name for name, table in TABLES.items() if table.jsonapi_type == jsonapi_type)


def nested_table_names(table: str) -> list[str]:
    """The dlt child tables of a raw table that the API documents (`containers__holds_at_pod_terminal`)."""
    return sorted(name for name in api_columns() if name.startswith(f"{table}__"))


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
