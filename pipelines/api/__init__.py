"""The only HTTP client of the service: Token auth, the host-wide rate limiter, retries, JSON:API errors, and
the API settings they read (`client`, `ratelimit`, `retry`, `config`). Here, what needs neither dlt nor HTTP,
so that the Dagster code location (which must not import dlt while it loads) and pure functions can use it:
JSON:API documents flattened into rows, and the accounts one deployment follows.

JSON:API documents → flat rows, one list per resource type (`flatten_document`, `rows_by_type`). A row is
`id`, the attributes as top-level columns named as the API names them, `<name>_id` for to-one relationships
(None when `data` is null), `<name>_ids` for to-many, `<name>_type` for the polymorphic ones, and
`self_link`. Shapes that are not JSON:API raise `MalformedResponseError` naming the JSON path.

The accounts (`configured_accounts`, `account_named`): the names in $OCEAN_TRACKING_ACCOUNTS, each an
`Account` (`pipelines.settings`).
"""

from __future__ import annotations

import os
from collections.abc import Collection, Mapping
from dataclasses import dataclass, field
from typing import Any

from pipelines.errors import ConfigurationError, MalformedResponseError
from pipelines.settings import ACCOUNT_NAME_PATTERN, ACCOUNTS_ENV, Account

#: Relationships whose target type varies (shipment or container; party or account), so the type is kept.
POLYMORPHIC = frozenset({"tracked_object", "reference_object", "customer", "entity"})

Row = dict[str, Any]


@dataclass
class FlatDocument:
    """A flattened document: primary rows, included rows by type, and the top-level links/meta."""

    data: list[Row] = field(default_factory=list)
    data_types: list[str] = field(default_factory=list)
    included: dict[str, list[Row]] = field(default_factory=dict)
    links: dict[str, Any] = field(default_factory=dict)
    meta: dict[str, Any] = field(default_factory=dict)


def _fail(path: str, problem: str) -> MalformedResponseError:
    return MalformedResponseError(f"not a JSON:API document: {path}: {problem}")


def _type_name(value: Any) -> str:
    return "null" if value is None else type(value).__name__


def _identifier(value: Any, path: str) -> tuple[str, str | None]:
    if not isinstance(value, Mapping):
        raise _fail(path, f"expected a resource identifier object, got {_type_name(value)}")
    rid = value.get("id")
    if rid is None or isinstance(rid, bool | dict | list):
        raise _fail(f"{path}.id", f"expected a string id, got {_type_name(rid)}")
    rtype = value.get("type")
    return str(rid), None if rtype is None else str(rtype)


def _member_object(resource: Mapping, member: str, path: str) -> Mapping:
    """`resource[member]` when it is an object, {} when absent or null; anything else is malformed."""
    value = resource.get(member)
    if value is None:
        return {}
    if type(value) is not dict and not isinstance(value, Mapping):
        raise _fail(f"{path}.{member}", f"expected an object, got {_type_name(value)}")
    return value


def flatten_resource(resource: Any, path: str = "data", polymorphic: Collection[str] = POLYMORPHIC) -> Row:
    """One resource object → one flat row (see module docstring); `path` names it in errors.

    Runs for every resource of every page (about 1,200 on a page of 100 shipments with their includes),
    so well-formed input takes a fast path (`_fast_identifier`) and error paths are built only on error."""
    rid = _fast_identifier(resource)
    rid = rid[0] if rid is not None else _identifier(resource, path)[0]
    row: Row = {"id": rid}
    for name, value in _member_object(resource, "attributes", path).items():
        if name == "id":
            # Live ports/terminals repeat their id inside attributes; the resource id is authoritative
            # (the anonymised fixtures even show a different value there), so the copy is dropped.
            continue
        row[str(name)] = value

    for name, rel in _member_object(resource, "relationships", path).items():
        if type(rel) is not dict and not isinstance(rel, Mapping):
            raise _fail(f"{path}.relationships.{name}", f"expected an object, got {_type_name(rel)}")
        if "data" not in rel:
            continue  # links-only relationship: nothing to record
        linkage = rel["data"]
        if isinstance(linkage, list):
            ids = [item["id"] for item in linkage if type(item) is dict and type(item.get("id")) is str]
            if len(ids) != len(linkage):
                rel_path = f"{path}.relationships.{name}"
                ids = [_identifier(item, f"{rel_path}.data[{i}]")[0] for i, item in enumerate(linkage)]
            _put(row, f"{name}_ids", ids)
        elif linkage is None:
            _put(row, f"{name}_id", None)
            if name in polymorphic:
                _put(row, f"{name}_type", None)
        else:
            target = _fast_identifier(linkage) or _identifier(linkage, f"{path}.relationships.{name}.data")
            _put(row, f"{name}_id", target[0])
            if name in polymorphic:
                _put(row, f"{name}_type", target[1])

    links = resource.get("links")
    if isinstance(links, Mapping) and links.get("self") is not None:
        _put(row, "self_link", links.get("self"))
    return row


def _fast_identifier(value: Any) -> tuple[str, str | None] | None:
    """`(id, type)` of a plain resource identifier (a dict, a string id, a string or absent type); None
    for anything else, which `_identifier` then converts or rejects with its JSON path."""
    if type(value) is dict:
        rid = value.get("id")
        rtype = value.get("type")
        if type(rid) is str and (rtype is None or type(rtype) is str):
            return rid, rtype
    return None


def _put(row: Row, column: str, value: Any) -> None:
    """Set a derived column; an attribute of the same name wins and the derived one gets a suffix."""
    if column in row and row[column] != value:
        column = f"{column}_rel"
    row[column] = value


def _resource_type(resource: Mapping[str, Any], path: str) -> str:
    rtype = resource.get("type")
    if not isinstance(rtype, str) or not rtype:
        raise _fail(f"{path}.type", f"expected a non-empty string, got {_type_name(rtype)}")
    return rtype


def flatten_document(document: Any, polymorphic: Collection[str] = POLYMORPHIC) -> FlatDocument:
    """A whole document (single or list `data`, optional `included`) → FlatDocument; included deduped by
    (type, id), first occurrence wins; a resource also in `data` is not repeated in `included`."""
    if not isinstance(document, Mapping):
        raise _fail("$", f"expected an object, got {_type_name(document)}")
    if "errors" in document and "data" not in document:
        raise _fail("$", "an error document (errors[]) where data was expected")
    data = document.get("data")
    if data is None:
        items: list[Any] = []
    elif isinstance(data, list):
        items = data
    elif isinstance(data, Mapping):
        items = [data]
    else:
        raise _fail("data", f"expected an object, a list or null, got {_type_name(data)}")
    out = FlatDocument()
    seen: set[tuple[str, str]] = set()
    single = isinstance(data, Mapping)
    for i, item in enumerate(items):
        path = "data" if single else f"data[{i}]"
        if not isinstance(item, Mapping):
            raise _fail(path, f"expected a resource object, got {_type_name(item)}")
        rtype = _resource_type(item, path)
        row = flatten_resource(item, path, polymorphic)
        out.data.append(row)
        out.data_types.append(rtype)
        seen.add((rtype, row["id"]))

    included = document.get("included")
    if included is None:
        included = []
    if not isinstance(included, list):
        raise _fail("included", f"expected a list, got {_type_name(included)}")
    for i, item in enumerate(included):
        path = f"included[{i}]"
        if not isinstance(item, Mapping):
            raise _fail(path, f"expected a resource object, got {_type_name(item)}")
        rtype = _resource_type(item, path)
        row = flatten_resource(item, path, polymorphic)
        if (rtype, row["id"]) in seen:
            continue
        seen.add((rtype, row["id"]))
        out.included.setdefault(rtype, []).append(row)

    for key in ("links", "meta"):
        value = document.get(key)
        if isinstance(value, Mapping):
            setattr(out, key, dict(value))
    return out


def rows_by_type(document: Any, polymorphic: Collection[str] = POLYMORPHIC) -> dict[str, list[Row]]:
    """Primary and included rows together, keyed by resource type (the shape a dlt resource routes by)."""
    flat = flatten_document(document, polymorphic)
    out: dict[str, list[Row]] = {}
    for rtype, row in zip(flat.data_types, flat.data, strict=True):
        out.setdefault(rtype, []).append(row)
    for rtype, rows in flat.included.items():
        out.setdefault(rtype, []).extend(rows)
    return out


def configured_accounts() -> list[Account]:
    """The accounts one deployment follows: the names in $OCEAN_TRACKING_ACCOUNTS (comma-separated), else
    the single account of [sources.ocean_tracking]. A malformed or repeated name is one line."""
    raw = os.environ.get(ACCOUNTS_ENV, "").strip()
    if not raw:
        return [Account()]
    names = [name.strip() for name in raw.split(",") if name.strip()]
    for name in names:
        if not ACCOUNT_NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(
                f"{ACCOUNTS_ENV} names an account {name!r}: names are lower-case letters, digits and _ "
                "(starting with a letter, at most 30), because they become schema names.")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{ACCOUNTS_ENV} names an account twice; each account once.")
    return [Account(name) for name in names]


def account_named(name: str | None) -> Account:
    """The configured account called `name` (None: the single account when no accounts are configured);
    one line naming the configured ones when there is none by that name."""
    accounts = configured_accounts()
    if name is None:
        if accounts == [Account()]:
            return Account()
        raise ConfigurationError(f"{ACCOUNTS_ENV} names several accounts: say which one (--account "
                                 f"{' | '.join(str(a.name) for a in accounts)}).")
    for account in accounts:
        if account.name == name:
            return account
    configured = ", ".join(str(a.name) for a in accounts if a.name) or "none"
    raise ConfigurationError(f"No account {name!r} is configured ({ACCOUNTS_ENV}: {configured}).")
