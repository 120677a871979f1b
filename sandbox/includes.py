"""`include=` checking: which relationship names each resource type has (and what they point to), how deep
a path may go and how many paths one request may ask for, so that a cyclic path such as
`containers.shipment.containers...` costs a bounded amount of work and a misspelt name is a 400.

RELATIONSHIPS is the vendor spec's `components.schemas.<type>.properties.relationships` (the target types
from each relationship's `data.type` enum), plus the relationships the sandbox's resources carry that the
spec leaves out (port `terminals`, tracking_request `user`, transport_event `previous_version` and
`source_event`), and the webhook types (`webhook_notification`, whose `reference_object` may also be a
`container_updated_event`, as the vendor's webhook examples show). Types not listed here are not checked:
the live service's include validation is not verified, so only a name unknown on a known type is refused."""

from __future__ import annotations

from .jsonapi import ApiError, error

MAX_INCLUDE_DEPTH = 3  # the pipeline asks for two levels (containers.transport_events); the docs show two
MAX_INCLUDE_PATHS = 20

RELATIONSHIPS: dict[str, dict[str, tuple[str, ...]]] = {
    "shipment": {
        "destination": ("port", "metro_area"), "port_of_lading": ("port",), "containers": ("container",),
        "port_of_discharge": ("port",), "pod_terminal": ("terminal",),
        "destination_terminal": ("terminal", "rail_terminal"), "line_tracking_stopped_by_user": ("user",),
    },
    "container": {
        "shipment": ("shipment",), "pickup_facility": ("terminal",), "pod_terminal": ("terminal",),
        "transport_events": ("transport_event",), "raw_events": ("raw_event",),
    },
    "terminal": {"port": ("port",)},
    "rail_terminal": {"port": ("port",), "metro_area": ("metro_area",)},
    "port": {"terminals": ("terminal",)},
    "tracking_request": {"tracked_object": ("shipment",), "customer": ("party",), "user": ("user",)},
    "transport_event": {
        "shipment": ("shipment",), "location": ("port", "metro_area"), "vessel": ("vessel",),
        "terminal": ("terminal", "rail_terminal"), "container": ("container",),
        "previous_version": ("transport_event",), "source_event": ("raw_event",),
    },
    "estimated_event": {"shipment": ("shipment",), "port": ("port",), "vessel": ("vessel",)},
    "raw_event": {"location": ("port", "metro_area"), "vessel": ("vessel",)},
    "custom_field": {"entity": ("shipment", "container", "tracking_request"),
                     "definition": ("custom_field_definition",)},
    "document": {
        "account": ("account",), "user": ("user",), "email_submission": ("email_submission",),
        "last_document_representation": ("document_representation",), "shipments": ("shipment",),
        "cargos": ("container",),
    },
    "email_submission": {"account": ("account",), "user": ("user",), "documents": ("document",)},
    "webhook": {},
    "webhook_notification": {
        "webhook": ("webhook",), "webhook_notification_logs": ("webhook_notification_log",),
        "reference_object": ("tracking_request", "transport_event", "estimated_event", "container_updated_event"),
    },
    "container_updated_event": {"container": ("container",), "terminal": ("terminal",), "shipment": ("shipment",)},
}


def _bad(detail: str) -> ApiError:
    return ApiError(400, [error(400, "Bad Request", detail, parameter="include")])


def parse_include(value: str | None, primary: list[dict]) -> list[list[str]]:
    """`include=a,b.c` → [["a"], ["b", "c"]]: blank items dropped, duplicates once. 400 (source.parameter
    `include`) for a path deeper than MAX_INCLUDE_DEPTH, more than MAX_INCLUDE_PATHS paths, or a name that
    no type reachable at its position has (checked only while every such type is in RELATIONSHIPS; a
    first name that a `primary` resource carries is always accepted)."""
    if not value:
        return []
    paths: list[list[str]] = []
    for item in (s.strip() for s in value.split(",")):
        path = item.split(".") if item else []
        if path and path not in paths:
            paths.append(path)
    if len(paths) > MAX_INCLUDE_PATHS:
        raise _bad(f"At most {MAX_INCLUDE_PATHS} include paths may be requested.")
    for path in paths:
        if len(path) > MAX_INCLUDE_DEPTH or "" in path:
            raise _bad(f"Invalid include path '{'.'.join(path)}': at most {MAX_INCLUDE_DEPTH} relationship "
                       "names separated by dots.")
        _check_path(path, {r["type"] for r in primary},
                    carried={name for r in primary for name in (r.get("relationships") or {})})
    return paths


def _check_path(path: list[str], types: set[str], carried: set[str]) -> None:
    for position, name in enumerate(path):
        if not types or not types <= RELATIONSHIPS.keys():
            return
        targets = [RELATIONSHIPS[t][name] for t in types if name in RELATIONSHIPS[t]]
        if not targets and position == 0 and name in carried:
            return  # a relationship the resources carry that the table does not know yet: not checked further
        if not targets:
            raise _bad(f"'{name}' is not a relationship of {' or '.join(sorted(types))} "
                       f"(include path '{'.'.join(path)}').")
        types = {t for group in targets for t in group}
