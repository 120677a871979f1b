"""Custom fields of one account: definitions (with enum options) and the values set on shipments,
containers and tracking requests.

Each account starts with the same deterministic set of definitions (shaped like the live
`custom-field-definitions.list` capture, container ones with the live `entity_type` "Cargo") and values
on a share of its seeded shipments and containers, drawn from the world seed, so two servers with the
same seed agree. Writes live in memory, per store. Refusals raise `ValidationIssue` (a 422 upstream);
unknown ids come back as None (a 404 upstream).
"""

from __future__ import annotations

import re
import threading
from dataclasses import dataclass, field
from datetime import date, datetime

from .identifiers import reference_uuid, stable_int
from .lifecycle import ValidationIssue
from .timeutil import DAY, iso

DATA_TYPES = ("short_text", "number", "date", "datetime", "boolean", "enum", "enum_multi", "reference")
ENTITY_TYPES = {"shipment": "Shipment", "container": "Cargo", "cargo": "Cargo", "trackingrequest": "TrackingRequest",
                "tracking_request": "TrackingRequest"}
RESOURCE_TYPE = {"Shipment": "shipment", "Cargo": "container", "TrackingRequest": "tracking_request"}
SLUG = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
MAX_TEXT = 255
SHIPMENT_SHARE = 40   # percent of seeded shipments carrying values
CONTAINER_SHARE = 25  # percent of seeded shipments whose containers carry values

# (entity_type, api_slug, display_name, description, data_type, options)
SEEDED = (
    ("Shipment", "purchase_order_number", "Purchase Order Number", "Buyer\u2019s order reference for procurement.",
     "short_text", ()),
    ("Shipment", "sales_order_number", "Sales Order Number", "Seller\u2019s internal sales order reference.",
     "short_text", ()),
    ("Shipment", "packing_list_number", "Packing List Number", "Reference number for associated packing list.",
     "short_text", ()),
    ("Shipment", "customer_reference_number", "Customer Reference Number", "Reference used by the end customer.",
     "short_text", ()),
    ("Shipment", "incoterm", "Incoterm", "Delivery terms agreed with the seller.", "enum",
     (("FOB", "fob"), ("CIF", "cif"), ("EXW", "exw"), ("DAP", "dap"), ("DDP", "ddp"))),
    ("Shipment", "move_type", "Move Type", "Door or port at each end of the move.", "enum",
     (("Port to Port", "port_to_port"), ("Port to Door", "port_to_door"), ("Door to Door", "door_to_door"))),
    ("Cargo", "hazmat_indicator", "Hazmat Indicator", "Whether the container carries dangerous goods.", "boolean",
     ()),
    ("Cargo", "unloading_priority", "Unloading Priority", "Warehouse unloading priority.", "enum",
     (("Low", "low"), ("Normal", "normal"), ("High", "high"))),
    ("Cargo", "declared_weight_kg", "Declared Weight (kg)", "Gross weight declared by the shipper.", "number", ()),
)


@dataclass
class Definition:
    """One custom field definition; `options` are (id, label, value, position) rows in position order."""

    id: str
    entity_type: str
    api_slug: str
    display_name: str
    description: str | None
    data_type: str
    created_at: int
    updated_at: int
    validation: dict | None = None
    default_format: str | None = None
    default_value: object = None
    reference_type: str | None = None
    options: list[dict] = field(default_factory=list)


@dataclass(slots=True)
class Value:
    """One custom field value on an entity (`entity_type` is the JSON:API type: shipment, container...)."""

    id: str
    entity_type: str
    entity_id: str
    definition_id: str
    value: object


def canonical_entity_type(raw: object) -> str | None:
    """"Shipment" / "Cargo" / "TrackingRequest" for any accepted spelling (Container is stored as Cargo)."""
    return ENTITY_TYPES.get(raw.replace(" ", "").lower()) if isinstance(raw, str) else None


def _issue(field_: str, detail: str, code: str, base: str = "/data/attributes") -> ValidationIssue:
    return ValidationIssue(f"{base}/{field_}", detail, code)


class CustomFieldStore:
    """Definitions, options and values of one account (seeded lazily on first use)."""

    def __init__(self, seed: int, account: str, n_shipments: int, start_ts: int, shipment_id, container_ids) -> None:
        """`shipment_id(i)` and `container_ids(i)` name the account's seeded shipment `i` and its containers."""
        self.seed, self.account, self.n = seed, account, n_shipments
        self._shipment_id, self._container_ids = shipment_id, container_ids
        self.start_ts = start_ts
        self.lock = threading.RLock()
        self.definitions: dict[str, Definition] = {}
        self.values: dict[str, Value] = {}
        self.by_entity: dict[str, dict[str, Value]] = {}
        self._counter = 0
        self._seeded = False

    # ----- seeding ---------------------------------------------------------------------------------

    def _uuid(self, kind: str, key: str) -> str:
        return reference_uuid(kind, f"{self.seed}:{self.account}:{key}")

    def _ensure(self) -> None:
        if self._seeded:
            return
        self._seeded = True
        for k, (etype, slug, name, desc, dtype, options) in enumerate(SEEDED):
            created = self.start_ts - (120 - k) * DAY
            d = Definition(self._uuid("custom_field_definition", slug), etype, slug, name, desc, dtype, created, created)
            d.options = [{"id": self._uuid("custom_field_option", f"{slug}:{value}"), "label": label, "value": value,
                          "position": pos} for pos, (label, value) in enumerate(options)]
            self.definitions[d.id] = d
        by_slug = {d.api_slug: d for d in self.definitions.values()}
        for i in range(self.n):
            for etype, entity_id, slug, value in self._seeded_values(i):
                d = by_slug[slug]
                self._add(Value(self._uuid("custom_field", f"{entity_id}:{slug}"), etype, entity_id, d.id, value))

    def _add(self, v: Value) -> None:
        self.values[v.id] = v
        self.by_entity.setdefault(v.entity_id, {})[v.id] = v

    def _remove(self, v: Value) -> None:
        del self.values[v.id]
        self.by_entity[v.entity_id].pop(v.id, None)

    def _seeded_values(self, i: int) -> list[tuple[str, str, str, object]]:
        h = stable_int(self.seed, self.account, "custom_fields", i)
        out: list[tuple[str, str, str, object]] = []
        if h % 100 < SHIPMENT_SHARE:
            sid = self._shipment_id(i)
            out.append(("shipment", sid, "purchase_order_number", f"PO-{100000 + (h >> 8) % 900000}"))
            if (h >> 28) % 2:
                out.append(("shipment", sid, "sales_order_number", f"SO-{10000 + (h >> 32) % 90000}"))
            if (h >> 29) % 4 == 0:
                out.append(("shipment", sid, "packing_list_number", f"PL-{1000 + (h >> 36) % 9000}"))
            if (h >> 30) % 2:
                out.append(("shipment", sid, "incoterm", ("fob", "cif", "exw", "dap", "ddp")[(h >> 40) % 5]))
        if (h >> 44) % 100 < CONTAINER_SHARE:
            for slot, cid in enumerate(self._container_ids(i)):
                c = stable_int(self.seed, self.account, "custom_fields", i, slot)
                out.append(("container", cid, "hazmat_indicator", c % 10 == 0))
                out.append(("container", cid, "unloading_priority", ("low", "normal", "normal", "high")[(c >> 8) % 4]))
        return out

    # ----- definitions -----------------------------------------------------------------------------

    def list_definitions(self, *, entity_type: str | None = None, data_type: str | None = None,
                         display_name: str | None = None) -> list[Definition]:
        """Definitions in creation order; entity_type/data_type match exactly, display_name by prefix
        (case-insensitive)."""
        with self.lock:
            self._ensure()
            et = canonical_entity_type(entity_type) if entity_type is not None else None
            prefix = display_name.lower() if display_name is not None else None
            return [d for d in self.definitions.values()
                    if (entity_type is None or d.entity_type == et)
                    and (data_type is None or d.data_type == data_type)
                    and (prefix is None or d.display_name.lower().startswith(prefix))]

    def definition(self, def_id: str) -> Definition | None:
        """A definition by id."""
        with self.lock:
            self._ensure()
            return self.definitions.get(def_id)

    def by_slug(self, entity_type: str, slug: object) -> Definition | None:
        """The definition of `entity_type` ("Shipment", "Cargo"...) with api_slug `slug`."""
        with self.lock:
            self._ensure()
            return next((d for d in self.definitions.values()
                         if d.entity_type == entity_type and d.api_slug == slug), None)

    def create_definition(self, attrs: dict, now: int) -> Definition:
        """Validate and add a definition (422: missing/invalid attributes, api_slug already taken)."""
        etype = canonical_entity_type(attrs.get("entity_type"))
        if etype is None:
            raise _issue("entity_type", "Entity type must be Shipment or Container", "inclusion")
        slug = attrs.get("api_slug")
        if not isinstance(slug, str) or not SLUG.match(slug):
            raise _issue("api_slug", "Api slug must be lower-case letters, digits and underscores", "invalid")
        name = attrs.get("display_name")
        if not isinstance(name, str) or not name.strip():
            raise _issue("display_name", "Display name can't be blank", "blank")
        dtype = attrs.get("data_type")
        if dtype not in DATA_TYPES:
            raise _issue("data_type", f"Data type must be one of {', '.join(DATA_TYPES)}", "inclusion")
        desc = attrs.get("description")
        if desc is not None and not isinstance(desc, str):
            raise _issue("description", "Description must be a string", "invalid")
        with self.lock:
            self._ensure()
            if self.by_slug(etype, slug) is not None:
                raise _issue("api_slug", "Api slug has already been taken", "taken")
            self._counter += 1
            d = Definition(self._uuid("custom_field_definition", f"api:{self._counter}"), etype, slug, name.strip(),
                           desc, dtype, now, now)
            self._apply_definition(d, attrs)
            self.definitions[d.id] = d
            return d

    def update_definition(self, def_id: str, attrs: dict, now: int) -> Definition | None:
        """Change display_name/description/validation/default_format/default_value (others are fixed)."""
        with self.lock:
            d = self.definition(def_id)
            if d is None:
                return None
            if "display_name" in attrs:
                name = attrs["display_name"]
                if not isinstance(name, str) or not name.strip():
                    raise _issue("display_name", "Display name can't be blank", "blank")
                d.display_name = name.strip()
            if "description" in attrs:
                if attrs["description"] is not None and not isinstance(attrs["description"], str):
                    raise _issue("description", "Description must be a string", "invalid")
                d.description = attrs["description"]
            self._apply_definition(d, attrs)
            d.updated_at = now
            return d

    def _apply_definition(self, d: Definition, attrs: dict) -> None:
        if "validation" in attrs:
            if attrs["validation"] is not None and not isinstance(attrs["validation"], dict):
                raise _issue("validation", "Validation must be an object", "invalid")
            d.validation = attrs["validation"]
        if "default_format" in attrs:
            if attrs["default_format"] is not None and not isinstance(attrs["default_format"], str):
                raise _issue("default_format", "Default format must be a string", "invalid")
            d.default_format = attrs["default_format"]
        if attrs.get("default_value") is not None:
            self.check_value(d, attrs["default_value"], "default_value")
        if "default_value" in attrs:
            d.default_value = attrs["default_value"]

    def delete_definition(self, def_id: str) -> bool:
        """Remove a definition with its options and every value set through it."""
        with self.lock:
            if self.definition(def_id) is None:
                return False
            del self.definitions[def_id]
            for v in [v for v in self.values.values() if v.definition_id == def_id]:
                self._remove(v)
            return True

    # ----- options ---------------------------------------------------------------------------------

    def create_option(self, d: Definition, attrs: dict) -> dict:
        """Add an option (label and value strings; value unique within the definition)."""
        label, value, position = attrs.get("label"), attrs.get("value"), attrs.get("position")
        for name, v in (("label", label), ("value", value)):
            if not isinstance(v, str) or not v.strip():
                raise _issue(name, f"{name.capitalize()} can't be blank", "blank")
        if position is not None and (not isinstance(position, int) or isinstance(position, bool)):
            raise _issue("position", "Position must be an integer", "invalid")
        with self.lock:
            if any(o["value"] == value for o in d.options):
                raise _issue("value", "Value has already been taken", "taken")
            self._counter += 1
            opt = {"id": self._uuid("custom_field_option", f"api:{self._counter}"), "label": label, "value": value,
                   "position": position if position is not None else len(d.options)}
            d.options.append(opt)
            return opt

    def update_option(self, d: Definition, option_id: str, attrs: dict) -> dict | None:
        """Change an option's label and/or position."""
        with self.lock:
            opt = next((o for o in d.options if o["id"] == option_id), None)
            if opt is None:
                return None
            if "label" in attrs:
                if not isinstance(attrs["label"], str) or not attrs["label"].strip():
                    raise _issue("label", "Label can't be blank", "blank")
                opt["label"] = attrs["label"]
            if "position" in attrs:
                if not isinstance(attrs["position"], int) or isinstance(attrs["position"], bool):
                    raise _issue("position", "Position must be an integer", "invalid")
                opt["position"] = attrs["position"]
            return opt

    def delete_option(self, d: Definition, option_id: str) -> bool:
        """Remove an option (values already set keep their raw value)."""
        with self.lock:
            kept = [o for o in d.options if o["id"] != option_id]
            found = len(kept) != len(d.options)
            d.options = kept
            return found

    # ----- values ----------------------------------------------------------------------------------

    def check_value(self, d: Definition, value: object, name: str = "value") -> None:
        """422 unless `value` suits the definition's data_type (enum values must be option values)."""
        t, ok = d.data_type, True
        if value is None:
            raise _issue(name, "Value can't be blank", "blank")
        if t in ("short_text", "reference"):
            ok = isinstance(value, str) and len(value) <= MAX_TEXT
        elif t == "number":
            ok = isinstance(value, int | float) and not isinstance(value, bool)
        elif t == "boolean":
            ok = isinstance(value, bool)
        elif t in ("date", "datetime"):
            ok = isinstance(value, str) and _parses(value, t)
        elif t == "enum":
            ok = isinstance(value, str) and value in {o["value"] for o in d.options}
        elif t == "enum_multi":
            allowed = {o["value"] for o in d.options}
            ok = isinstance(value, list) and all(isinstance(v, str) and v in allowed for v in value)
        if not ok:
            raise _issue(name, f"Value is not a valid {t} for {d.api_slug}", "invalid")

    def display_value(self, d: Definition | None, value: object) -> str | None:
        """The formatted value: Yes/No, option labels, numbers without a trailing .0, text as is."""
        if value is None or d is None:
            return None
        labels = {o["value"]: o["label"] for o in d.options}
        if isinstance(value, bool):
            return "Yes" if value else "No"
        if d.data_type == "enum":
            return labels.get(value, str(value))
        if isinstance(value, list):
            return ", ".join(labels.get(v, str(v)) for v in value)
        if isinstance(value, float) and value.is_integer():
            return str(int(value))
        return str(value)

    def list_values(self, *, entity_type: str | None = None, entity_id: str | None = None,
                    definition_id: str | None = None) -> list[Value]:
        """Values in creation order, filtered (entity_type accepts Shipment/Container/Cargo, any case)."""
        with self.lock:
            self._ensure()
            rtype = RESOURCE_TYPE.get(canonical_entity_type(entity_type) or "", "?") if entity_type else None
            pool = self.by_entity.get(entity_id, {}) if entity_id is not None else self.values
            if rtype is None and definition_id is None:
                return list(pool.values())
            return [v for v in pool.values()
                    if (rtype is None or v.entity_type == rtype) and (entity_id is None or v.entity_id == entity_id)
                    and (definition_id is None or v.definition_id == definition_id)]

    def value(self, value_id: str) -> Value | None:
        """A value by id."""
        with self.lock:
            self._ensure()
            return self.values.get(value_id)

    def value_for(self, entity_id: str, d: Definition) -> Value | None:
        """The value of definition `d` on an entity, if set."""
        with self.lock:
            self._ensure()
            return next((v for v in self.by_entity.get(entity_id, {}).values() if v.definition_id == d.id), None)

    def set_value(self, entity_type: str, entity_id: str, slug: object, value: object) -> Value:
        """Create the value of `slug` on an entity (422: unknown slug, bad value, already set)."""
        etype = canonical_entity_type(entity_type) or ""
        with self.lock:
            d = self.by_slug(etype, slug)
            if d is None:
                raise _issue("api_slug", f"No custom field definition '{slug}' for {etype or entity_type}", "not_found")
            self.check_value(d, value)
            if self.value_for(entity_id, d) is not None:
                raise _issue("api_slug", f"{slug} is already set on this {entity_type}", "taken")
            self._counter += 1
            v = Value(self._uuid("custom_field", f"api:{self._counter}"), RESOURCE_TYPE[etype], entity_id, d.id, value)
            self._add(v)
            return v

    def update_value(self, v: Value, value: object) -> Value:
        """Replace a value (validated against its definition)."""
        with self.lock:
            self.check_value(self.definitions[v.definition_id], value)
            v.value = value
            return v

    def delete_value(self, value_id: str) -> bool:
        """Remove a value."""
        with self.lock:
            self._ensure()
            v = self.values.get(value_id)
            if v is not None:
                self._remove(v)
            return v is not None

    # ----- resources -------------------------------------------------------------------------------

    def definition_resource(self, d: Definition) -> dict:
        """A `custom_field_definition` resource shaped like the live capture."""
        return {
            "id": d.id, "type": "custom_field_definition",
            "attributes": {
                "entity_type": d.entity_type, "api_slug": d.api_slug, "display_name": d.display_name,
                "description": d.description, "data_type": d.data_type, "reference_type": d.reference_type,
                "validation": d.validation, "default_format": d.default_format, "default_value": d.default_value,
                "template_id": None, "created_at": iso(d.created_at), "updated_at": iso(d.updated_at),
            },
            "relationships": {
                "account": {"data": None},
                "fields": {"data": []},
                "options": {"data": [{"id": o["id"], "type": "custom_field_option"} for o in self.sorted_options(d)]},
            },
        }

    @staticmethod
    def sorted_options(d: Definition) -> list[dict]:
        """Options by position, then creation."""
        return sorted(d.options, key=lambda o: o["position"] if o["position"] is not None else 1 << 30)

    @staticmethod
    def option_resource(opt: dict) -> dict:
        """A `custom_field_option` resource (spec shape)."""
        return {"id": opt["id"], "type": "custom_field_option",
                "attributes": {"label": opt["label"], "value": opt["value"], "position": opt["position"]}}

    def value_resource(self, v: Value) -> dict:
        """A `custom_field` resource (spec shape: api_slug, value, display_value; entity and definition)."""
        d = self.definitions.get(v.definition_id)
        return {
            "id": v.id, "type": "custom_field",
            "attributes": {"api_slug": d.api_slug if d else None, "value": v.value,
                           "display_value": self.display_value(d, v.value)},
            "relationships": {
                "entity": {"data": {"type": v.entity_type, "id": v.entity_id}},
                "definition": {"data": {"type": "custom_field_definition", "id": v.definition_id}},
            },
        }


def _parses(text: str, kind: str) -> bool:
    try:
        if kind == "date":
            date.fromisoformat(text)
        else:
            datetime.fromisoformat(text.replace("Z", "+00:00"))
        return True
    except ValueError:
        return False
