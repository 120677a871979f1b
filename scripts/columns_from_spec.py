"""Generate `pipelines/source/api_columns.json`: every column the vendor's OpenAPI spec documents, per table,
named as `pipelines.api` flattens a resource and typed the dlt way, plus what the live service was
seen to send where it departs from the spec (`LIVE_COLUMNS`: live data wins).

    python scripts/columns_from_spec.py                 # write the vendored file from ../shared/...
    python scripts/columns_from_spec.py --check         # exit 1 when the vendored file is out of date
    python scripts/columns_from_spec.py --spec PATH --out PATH

Naming, as the flattening and dlt's normalizer make it: `id`; each attribute as the API names it (an object
with properties becomes `<name>__<property>` columns, as dlt flattens a dict; an array of objects becomes
the nested table `<table>__<name>`; an array of scalars one JSON column); `<relationship>_id` for to-one,
`<relationship>_ids` (JSON) for to-many, `<relationship>_type` for the polymorphic ones; `self_link`.
The project reads only the generated file: the spec is not needed at run time.
"""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO))

from pipelines.api import POLYMORPHIC  # noqa: E402  (the script runs from anywhere)

DEFAULT_SPEC = REPO.parent / "shared" / "reference" / "terminal49" / "openapi.json"
DEFAULT_OUT = REPO / "pipelines" / "extract" / "api_columns.json"

#: Table (the source's resource) → the spec's component schema of its rows.
TABLES = {
    "shipments": "shipment",
    "containers": "container",
    "transport_events": "transport_event",
    "terminals": "terminal",
    "ports": "port",
    "vessels": "vessel",
    "tracking_requests": "tracking_request",
    "parties": "party",
    "shipping_lines": "shipping_line",
    "custom_field_definitions": "custom_field_definition",
    "custom_fields": "custom_field",
}

# What live responses carry beyond the spec (API-NOTES §0, §4-§9, §12; the captured fixtures in
# shared/reference/terminal49/fixtures): most are null in every capture, and dlt makes no column for an
# attribute that was only ever null, so each needs its type declared here.
_PROVIDED_DATA_TERMINAL = (
    "available_for_pickup", "fees_at_pod_terminal", "holds_at_pod_terminal", "location_at_pod_terminal",
    "pickup_appointment_at", "pickup_lfd", "pod_full_out_at", "pod_full_out_chassis_number",
)  # fmt: skip
_PROVIDED_DATA_LINE = (
    "empty_terminated_at", "equipment_height", "equipment_length", "equipment_type",
    "final_destination_full_out_at", "pod_arrived_at", "pod_discharged_at", "pod_full_out_at", "seal_number",
    "ssl_lfd", "weight_in_lbs",
)  # fmt: skip


def _provided_data(fields: tuple[str, ...]) -> dict[str, str]:
    """`provided_data`, a map of field → provided? plus a note, as dlt flattens it."""
    columns: dict[str, str] = {}
    for name in fields:
        columns[f"provided_data__{name}"] = "bool"
        columns[f"provided_data__{name}_notes"] = "text"
    return columns


LIVE_COLUMNS: dict[str, dict[str, str]] = {
    "shipments": {"pol_original_etd_at": "timestamp", "destination_original_eta_at": "timestamp"},
    "containers": {
        "delivered_at": "timestamp",
        "empty_out_at": "timestamp",
        "pol_full_in_at": "timestamp",
        "pol_vessel_loaded_at": "timestamp",
        "pol_vessel_departed_at": "timestamp",
        "rail_last_tracking_request_at": "timestamp",
        "ssl_lfd": "timestamp",
        # null in every capture; kept whole, as the spec's holds/fees would be (no nested table of them)
        "ind_facility_holds": "json",
        "ind_facility_fees": "json",
    },
    "transport_events": {
        "value": "text",
        "invalidated_at": "timestamp",
        "source_event_id": "text",
        "previous_version_id": "text",
    },
    "tracking_requests": {"shipment_tags": "json", "user_id": "text"},
    "ports": {"terminals_ids": "json"},
    "terminals": {"facility_type": "text", **_provided_data(_PROVIDED_DATA_TERMINAL)},
    "shipping_lines": {"tracking_url": "text", "contact_url": "text", **_provided_data(_PROVIDED_DATA_LINE)},
    # cli/custom-field-definitions.list.json: relationships the spec omits (to-many kept as JSON id lists)
    "custom_field_definitions": {
        "template_id": "text", "created_at": "timestamp", "updated_at": "timestamp",
        "account_id": "text", "fields_ids": "json", "options_ids": "json",
    },
}

#: Where the live type differs from the spec's. (Port coordinates are strings on the wire, `"35.10162"`,
#: but the source casts them to numbers before dlt sees them, so the spec's `number` holds.)
LIVE_TYPES: dict[str, dict[str, str]] = {
    # a plain string in the spec, but an ISO 8601 instant by its description, example and live captures
    "vessels": {"position_timestamp": "timestamp"},
    # any JSON value by the spec (`custom_field_value`: string, number, bool, array or object), loaded as its
    # JSON text (`pipelines.source.resources`): dlt's json type takes objects and lists only, so a
    # string or a boolean would land in variant columns, and a list would become a nested table
    "custom_fields": {"value": "text"},
}

_SCALARS = {"integer": "bigint", "number": "double", "boolean": "bool"}
_STRING_FORMATS = {"date-time": "timestamp", "date": "date"}


def _resolve(spec: dict[str, Any], node: dict[str, Any]) -> dict[str, Any]:
    """Follow `$ref` (and a one-element `allOf`) to the schema it names."""
    while True:
        if "$ref" in node:
            target: Any = spec
            for part in node["$ref"].removeprefix("#/").split("/"):
                target = target[part]
            node = target
        elif len(node.get("allOf", ())) == 1:
            node = node["allOf"][0]
        else:
            return node


def _scalar_type(node: dict[str, Any]) -> str:
    kind = node.get("type")
    if kind == "string":
        return _STRING_FORMATS.get(node.get("format", ""), "text")
    if kind in ("array", "object"):
        return "json"
    return _SCALARS.get(kind, "text")


def _value_columns(spec: dict[str, Any], name: str, node: dict[str, Any], table: str,
                   tables: dict[str, dict[str, str]]) -> dict[str, str]:
    """Columns of one attribute: a scalar, a flattened object, a JSON list, or a nested table."""
    node = _resolve(spec, node)
    if node.get("type") == "object" and node.get("properties"):
        columns: dict[str, str] = {}
        for prop, sub in node["properties"].items():
            columns.update(_value_columns(spec, f"{name}__{prop}", sub, table, tables))
        return columns
    if node.get("type") == "array":
        items = _resolve(spec, node.get("items", {}))
        if items.get("type") == "object" and items.get("properties"):
            nested = f"{table}__{name}"
            tables[nested] = {}
            for prop, sub in items["properties"].items():
                tables[nested].update(_value_columns(spec, prop, sub, nested, tables))
            return {}
    return {name: _scalar_type(node)}


def _relationship_columns(name: str, node: dict[str, Any]) -> dict[str, str]:
    data = node.get("properties", {}).get("data", {})
    if data.get("type") == "array":
        return {f"{name}_ids": "json"}
    columns = {f"{name}_id": "text"}
    if name in POLYMORPHIC:
        columns[f"{name}_type"] = "text"
    return columns


def columns_from_spec(spec: dict[str, Any]) -> dict[str, dict[str, str]]:
    """Table → {column: dlt data type}, nested tables (`<table>__<attribute>`) included, live columns added."""
    schemas = spec["components"]["schemas"]
    tables: dict[str, dict[str, str]] = {}
    for table, schema_name in TABLES.items():
        schema = _resolve(spec, schemas[schema_name])
        properties = schema.get("properties", {})
        columns = {"id": "text"}
        tables[table] = columns
        attributes = _resolve(spec, properties.get("attributes", {})).get("properties", {})
        for name, node in attributes.items():
            if name != "id":  # the flattening drops the live copy of the id inside attributes
                columns.update(_value_columns(spec, name, node, table, tables))
        relationships = _resolve(spec, properties.get("relationships", {})).get("properties", {})
        for name, node in relationships.items():
            columns.update(_relationship_columns(name, _resolve(spec, node)))
        columns["self_link"] = "text"
        columns.update(LIVE_COLUMNS.get(table, {}))
        columns.update(LIVE_TYPES.get(table, {}))
    return {table: dict(sorted(columns.items())) for table, columns in sorted(tables.items())}


def render(spec: dict[str, Any]) -> str:
    """The vendored file's text."""
    document = {
        "generated_by": "scripts/columns_from_spec.py from the vendor's OpenAPI spec (components.schemas) and "
        "the live-only columns it lists; do not edit by hand",
        "spec_version": spec.get("info", {}).get("version"),
        "tables": columns_from_spec(spec),
    }
    return json.dumps(document, indent=1) + "\n"


def main(argv: list[str] | None = None) -> int:
    """Write (or `--check`) the vendored columns file."""
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--spec", type=Path, default=DEFAULT_SPEC)
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--check", action="store_true", help="fail when the vendored file differs")
    args = parser.parse_args(argv)
    text = render(json.loads(args.spec.read_text()))
    if args.check:
        if args.out.read_text() != text:
            print(f"{args.out} is out of date: run python scripts/columns_from_spec.py", file=sys.stderr)
            return 1
        return 0
    args.out.write_text(text)
    print(f"wrote {args.out}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
