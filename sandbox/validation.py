"""Request-body validation: JSON parsing, the JSON:API envelope, and per-resource attribute rules.
Every failure is an ApiError (400/409/422), so a bad body never reaches the world or becomes a 500."""

from __future__ import annotations

import json
import threading
from collections import OrderedDict
from collections.abc import Callable
from typing import Any

from .jsonapi import ApiError, api_error, error

REQUEST_TYPES = ("bill_of_lading", "booking_number", "container")


MAX_JSON_DEPTH = 64  # the deepest body the API takes (JSON:API documents nest about six levels)
LOCATE_LIMIT = 64 * 1024  # larger bodies get no pointer to a bad string: finding it costs a Python-level walk


def _reject_constant(name: str) -> Any:
    raise ValueError(f"{name} is not JSON")


def _pointer(parent: str, key: object) -> str:
    """RFC 6901: one more reference token, with `~` and `/` escaped."""
    return f"{parent}/{str(key).replace('~', '~0').replace('/', '~1')}"


def _lone_surrogate_at(value: Any) -> str | None:
    """The JSON pointer of the first string or key holding a lone surrogate (slow: for error reports)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        node, pointer = stack.pop()
        if isinstance(node, str):
            try:
                node.encode("utf-8")
            except UnicodeEncodeError:
                return pointer or "/"
        elif isinstance(node, dict | list):
            for key, child in (node.items() if isinstance(node, dict) else enumerate(node)):
                if isinstance(key, str) and _lone_surrogate_at(key) is not None:
                    return pointer or "/"
                stack.append((child, _pointer(pointer, key)))
    return None


def check_json_value(value: Any, *, locate: bool = True) -> None:
    """Refuse (400) a decoded body nested deeper than MAX_JSON_DEPTH or holding a string or key that is no
    valid Unicode text (json.loads turns a "\\ud800" escape into a lone surrogate, which can be neither stored
    nor served as UTF-8), so nothing like it is ever stored. Iterative, over containers only; `locate`
    names the offending string's pointer (a second, slower pass)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        node, depth = stack.pop()
        if depth >= MAX_JSON_DEPTH:
            raise api_error(400, "Bad Request", f"The request body is nested more than {MAX_JSON_DEPTH} levels "
                            "deep.", pointer="/")
        children = node.values() if isinstance(node, dict) else node
        stack.extend((child, depth + 1) for child in children if isinstance(child, dict | list))
    try:  # the C encoder keeps surrogates as they are; UTF-8 then refuses them
        json.dumps(value, ensure_ascii=False).encode("utf-8")
    except UnicodeEncodeError:
        pointer = _lone_surrogate_at(value) if locate else "/"
        raise api_error(400, "Bad Request", "The request body has a string that is not valid Unicode "
                        "(a lone UTF-16 surrogate).", pointer=pointer) from None


# Large bodies are decoded and checked once, off the event loop, by sandbox.limits.RequestGuard; the
# handler's own parse_json of the same bytes then takes the result from here instead of redoing the work
# on the loop. A few entries at most: one a request in flight.
LARGE_BODY = 32 * 1024
_checked: OrderedDict[bytes, Any] = OrderedDict()
_checked_lock = threading.Lock()
_MISSING = object()


def remember_checked(body: bytes, value: Any) -> None:
    """Keep the checked decoding of a large `body` for the handler's parse_json (see LARGE_BODY)."""
    with _checked_lock:
        _checked[body] = value
        while len(_checked) > 8:
            _checked.popitem(last=False)


def parse_json(body: bytes) -> Any:
    """Decode a request body as strict JSON (UTF-8; no NaN/Infinity; at most MAX_JSON_DEPTH levels; Unicode
    scalar values only), or raise a 400 Bad Request."""
    if len(body) >= LARGE_BODY:
        with _checked_lock:
            value = _checked.pop(body, _MISSING)
        if value is not _MISSING:
            return value
    try:
        value = json.loads(body.decode("utf-8"), parse_constant=_reject_constant) if body.strip() else None
    except (UnicodeDecodeError, ValueError) as exc:  # json.JSONDecodeError is a ValueError
        raise api_error(400, "Bad Request", f"The request body is not valid JSON: {exc.__class__.__name__}") from None
    except RecursionError:
        raise api_error(400, "Bad Request", f"The request body is nested more than {MAX_JSON_DEPTH} levels "
                        "deep.", pointer="/") from None
    if isinstance(value, dict | list):
        check_json_value(value, locate=len(body) < LOCATE_LIMIT)
    elif isinstance(value, str):
        check_json_value([value])
    return value


def jsonapi_shape(payload: Any) -> None:
    """The JSON:API document rules every /v2 body must meet whatever the route (400 otherwise): a top-level
    object; when `data` is an object, `attributes` and `relationships` are objects (or absent/null) and
    each relationship is an object whose `data` is null, a resource identifier or an array of them."""
    if payload is None:
        return
    if not isinstance(payload, dict):
        raise api_error(400, "Bad Request", "The request body must be a JSON object.", pointer="/")
    data = payload.get("data")
    if not isinstance(data, dict):
        return
    attrs = data.get("attributes")
    if attrs is not None and not isinstance(attrs, dict):
        raise api_error(400, "Bad Request", "'attributes' must be an object.", pointer="/data/attributes")
    rels = data.get("relationships")
    if rels is None:
        return
    if not isinstance(rels, dict):
        raise api_error(400, "Bad Request", "'relationships' must be an object.", pointer="/data/relationships")
    for name, rel in rels.items():
        pointer = _pointer("/data/relationships", name)
        if not isinstance(rel, dict):
            raise api_error(400, "Bad Request", f"Relationship '{name}' must be an object.", pointer=pointer)
        linkage = rel.get("data")
        items = linkage if isinstance(linkage, list) else [linkage]
        if not all(item is None or isinstance(item, dict) for item in items) or (
                isinstance(linkage, list) and None in linkage):
            raise api_error(400, "Bad Request", f"Relationship '{name}' data must be null, a resource "
                            "identifier object or an array of them.", pointer=pointer + "/data")


def envelope(payload: Any, type_: str) -> dict:
    """Check `{data: {type, attributes}}`: a missing data member or type is 400, a wrong type 409 (JSON:API)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise api_error(400, "Bad Request", "The request must include a 'data' object.", pointer="/data")
    data = payload["data"]
    if not isinstance(data.get("type"), str):
        raise api_error(400, "Bad Request", "The resource object must have a 'type' string.", pointer="/data/type")
    if data.get("type") != type_:
        raise api_error(409, "Conflict", f"Resource type must be '{type_}', got {data.get('type')!r}.",
                        pointer="/data/type")
    attrs = data.get("attributes", {})
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, dict):
        raise api_error(400, "Bad Request", "'attributes' must be an object.", pointer="/data/attributes")
    data["attributes"] = attrs
    rels = data.get("relationships")
    if rels is not None and not isinstance(rels, dict):
        raise api_error(400, "Bad Request", "'relationships' must be an object.", pointer="/data/relationships")
    return data


def _unprocessable(field: str, detail: str, code: str, base: str = "/data/attributes") -> dict:
    return error(422, "Unprocessable Entity", detail, pointer=f"{base}/{field}", code=code)


def _blank(v: Any) -> bool:
    return v is None or (isinstance(v, str) and not v.strip())


def string_list_errors(attrs: dict, field: str) -> list[dict]:
    """422 error(s) when attrs[field] is present and not an array of strings."""
    if field not in attrs:
        return []
    v = attrs[field]
    if not isinstance(v, list) or not all(isinstance(x, str) for x in v):
        return [_unprocessable(field, f"{field} must be an array of strings", "invalid")]
    return []


def raise_if(errors: list[dict]) -> None:
    """Raise one 422 document carrying all collected errors."""
    if errors:
        raise ApiError(422, errors)


def tracking_request(data: dict, carrier_support: Callable[[str], str]) -> dict:
    """Validate a create-tracking-request body; returns the clean attributes.

    The four spec cases (blank request_number, blank scac without auto-detect, unknown scac,
    unsupported scac) plus type checks on arrays/booleans, all reported together."""
    a = data["attributes"]
    errs: list[dict] = []
    if _blank(a.get("request_number")) or not isinstance(a.get("request_number"), str):
        errs.append(_unprocessable("request_number", "Request number can't be blank", "blank"))
    rt = a.get("request_type")
    if rt is not None and rt not in REQUEST_TYPES:
        errs.append(_unprocessable("request_type", f"Request type '{rt}' is not included in the list", "inclusion"))
    auto = a.get("auto_detect_vocc_scac", False)
    if auto is not None and not isinstance(auto, bool):
        errs.append(_unprocessable("auto_detect_vocc_scac", "auto_detect_vocc_scac must be a boolean", "invalid"))
    scac = a.get("scac")
    if _blank(scac):
        if auto is not True:
            errs.append(_unprocessable("scac", "Scac can't be blank", "blank"))
    elif not isinstance(scac, str):
        errs.append(_unprocessable("scac", "Scac must be a string", "invalid"))
    else:
        support = carrier_support(scac.strip().upper())
        if support == "unknown":
            errs.append(_unprocessable("scac", f"Scac '{scac}' is not recognized", "not_recognized"))
        elif support == "unsupported":
            errs.append(_unprocessable("scac", f"Scac '{scac}' is not supported at this time", "not_supported"))
    errs += string_list_errors(a, "ref_numbers") + string_list_errors(a, "shipment_tags")
    raise_if(errs)
    clean = {k: a[k] for k in ("request_type", "request_number", "ref_numbers", "shipment_tags",
                               "auto_detect_vocc_scac") if k in a}
    clean["request_number"] = a["request_number"].strip()
    clean["scac"] = scac.strip().upper() if isinstance(scac, str) and scac.strip() else None
    return clean


def related_id(data: dict, name: str, type_: str) -> str | None:
    """The id of a to-one relationship `name` (or None); a malformed one is a 422 with its pointer."""
    rel = (data.get("relationships") or {}).get(name)
    d = rel.get("data") if isinstance(rel, dict) else rel
    if d is None:
        return None
    if not isinstance(d, dict) or d.get("type") != type_ or not isinstance(d.get("id"), str):
        raise ApiError(422, [_unprocessable(name, f"{name} must be {{type: '{type_}', id: <uuid>}}", "invalid",
                                            base="/data/relationships")])
    return d["id"]


def party(data: dict) -> str:
    """Validate a create-party body; returns the company name."""
    name = data["attributes"].get("company_name")
    if _blank(name) or not isinstance(name, str):
        raise_if([_unprocessable("company_name", "Company name can't be blank", "blank")])
    return name.strip()


def patch_attrs(data: dict, fields: tuple[str, ...]) -> dict:
    """Validate a PATCH body's editable array-of-string attributes; returns only those present."""
    a = data["attributes"]
    errs: list[dict] = []
    for f in fields:
        errs += string_list_errors(a, f)
    raise_if(errs)
    return {f: a[f] for f in fields if f in a}


def document_attrs(data: dict) -> tuple[str, str]:
    """Validate a create-document body's `name` and `attached_document` presence (content checked later)."""
    a = data["attributes"]
    errs = []
    if _blank(a.get("name")) or not isinstance(a.get("name"), str):
        errs.append(_unprocessable("name", "Name can't be blank", "blank"))
    if _blank(a.get("attached_document")) or not isinstance(a.get("attached_document"), str):
        errs.append(_unprocessable("attached_document", "Attached document can't be blank", "blank"))
    raise_if(errs)
    return a["name"].strip(), a["attached_document"].strip()


def attached_document_error(detail: str) -> ApiError:
    """The 422 for an attached_document that is not the signed id of an uploaded blob."""
    return ApiError(422, [_unprocessable("attached_document", detail, "invalid")])
