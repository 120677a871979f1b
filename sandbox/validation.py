"""Request-body validation: JSON parsing, the JSON:API envelope, and per-resource attribute rules.
Every failure is an ApiError (400/409/422), so a bad body never reaches the world or becomes a 500."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from .jsonapi import ApiError, api_error, error

REQUEST_TYPES = ("bill_of_lading", "booking_number", "container")


def parse_json(body: bytes) -> Any:
    """Decode a request body as JSON, or raise a 400 Bad Request."""
    try:
        return json.loads(body.decode("utf-8")) if body.strip() else None
    except (UnicodeDecodeError, json.JSONDecodeError) as exc:
        raise api_error(400, "Bad Request", f"The request body is not valid JSON: {exc.__class__.__name__}") from None


def envelope(payload: Any, type_: str) -> dict:
    """Check `{data: {type, attributes}}`: a missing data member is 400, a wrong type 409 (JSON:API)."""
    if not isinstance(payload, dict) or not isinstance(payload.get("data"), dict):
        raise api_error(400, "Bad Request", "The request must include a 'data' object.", pointer="/data")
    data = payload["data"]
    if data.get("type") != type_:
        raise api_error(409, "Conflict", f"Resource type must be '{type_}', got {data.get('type')!r}.",
                        pointer="/data/type")
    attrs = data.get("attributes", {})
    if attrs is None:
        attrs = {}
    if not isinstance(attrs, dict):
        raise api_error(400, "Bad Request", "'attributes' must be an object.", pointer="/data/attributes")
    data["attributes"] = attrs
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
    if rel is None or rel.get("data") is None:
        return None
    d = rel.get("data")
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
