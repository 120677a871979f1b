"""Response bodies validated against the vendor OpenAPI `components.schemas` ($refs resolved,
OAS 3.0 `nullable` translated). Relaxed where the spec is known wrong (API-NOTES section 12), by
tests.support.sandbox_http.relax_schemas (shared with test_http_property.py):
- container `type` enum says `account` → `container`;
- port `latitude`/`longitude` are strings on the wire → string or number;
- transport_event `relationships.vessel.data` uses `name` instead of `type` → not checked;
- tracking_request `tags` is `shipment_tags` on the wire (extra members are allowed anyway);
- to-one relationship `data` may be null (JSON:API "empty to-one"; live captures show it) even where
  the spec omits `nullable` (e.g. shipment `line_tracking_stopped_by_user`);
- terminal address/code attributes may be null (live [FIX:terminals.get] has `bic_facility_code: null`)."""

from __future__ import annotations

import copy
import re
import time

import jsonschema
import pytest
import requests
import schemathesis
from hypothesis import HealthCheck, Phase, given, settings
from schemathesis import GenerationMode
from schemathesis.checks import not_a_server_error
from schemathesis.specs.openapi.checks import (
    content_type_conformance,
    response_schema_conformance,
    status_code_conformance,
)

from tests.support.sandbox_http import Client, ok, openapi, relax_schemas
from tests.support.sandboxes import FULL_KEY, shared_dir


def _convert(node, schemas):
    if isinstance(node, list):
        return [_convert(n, schemas) for n in node]
    if not isinstance(node, dict):
        return node
    if "$ref" in node:
        return _convert(copy.deepcopy(schemas[node["$ref"].rsplit("/", 1)[-1]]), schemas)
    out = {k: _convert(v, schemas) for k, v in node.items() if not k.startswith("x-") and k not in ("example", "examples")}
    if out.pop("nullable", False):
        if "enum" in out:
            out["enum"] = [*out["enum"], None]
        return {"anyOf": [out, {"type": "null"}]}
    return out


@pytest.fixture(scope="module")
def schema():
    spec = openapi(str(shared_dir() / "reference" / "terminal49" / "openapi.json"))
    schemas = relax_schemas(spec["components"]["schemas"])

    def get(name):
        return _convert(schemas[name], schemas)

    return get


def check(schema, name, instance):
    jsonschema.validate(instance, schema(name))


@pytest.mark.slow
def test_lists_and_resources(own_sandbox, schema):
    cl = Client(own_sandbox.base_url, FULL_KEY)
    shp = ok(cl.get("/shipments?page[size]=10&include=containers,port_of_lading,port_of_discharge,pod_terminal"))
    check(schema, "links", shp["links"])
    check(schema, "meta", shp["meta"])
    for r in shp["data"]:
        check(schema, "shipment", r)
    for r in shp.get("included", []):
        if r["type"] in ("container", "port", "terminal"):
            check(schema, r["type"], r)
    cont = ok(cl.get("/containers?page[size]=10&include=shipment"))
    for r in cont["data"]:
        check(schema, "container", r)
    for r in ok(cl.get(f"/containers/{cont['data'][0]['id']}/transport_events"))["data"]:
        check(schema, "transport_event", r)
    for r in ok(cl.get("/shipping_lines?page[size]=100"))["data"]:
        check(schema, "shipping_line", r)
    ok(cl.post("/parties", {"data": {"type": "party", "attributes": {"company_name": "Schema Co"}}}), 201)
    for r in ok(cl.get("/parties"))["data"]:
        check(schema, "party", r)
    tr = ok(cl.post("/tracking_requests", {"data": {"type": "tracking_request", "attributes": {
        "request_type": "bill_of_lading", "request_number": "MAEU5550001", "scac": "MAEU"}}}), 201)
    check(schema, "tracking_request", tr["data"])
    for r in ok(cl.get("/tracking_requests"))["data"]:
        check(schema, "tracking_request", r)


def test_error_documents(sandbox, schema):
    cl = Client(sandbox.base_url, FULL_KEY)
    bodies = [
        cl.post("/tracking_requests", {"data": {"type": "tracking_request", "attributes": {}}}).json(),
        Client(sandbox.base_url, None).get("/shipments").json(),
        cl.get("/shipments/00000000-0000-0000-0000-000000000000").json(),
    ]
    for body in bodies:
        for e in body["errors"]:
            check(schema, "error", e)


# ---- every operation fuzzed from the spec ----------------------------------------------------------------
# Property-based: schemathesis generates requests from the vendor's OpenAPI spec for every operation the
# sandbox serves (read from the Starlette app's routes at run time, so new routes are covered as they land)
# and checks each answer: never a 5xx, and status code, content type and body as the spec documents them.
# Seeded and bounded (MAX_EXAMPLES per operation, no shrinking).  Where the spec is known wrong the spec is
# relaxed before loading, in ONE place: `relax_schemas` (tests.support.sandbox_http, shared with
# test_http_openapi.py) for response schemas, and SPEC_FIXES below for the rest, each entry citing what proves
# the spec wrong.


MAX_EXAMPLES = 15


BIG = {"default": 1_000_000, "tracking_requests_create": 1_000_000, "infer_number": 1_000_000,
       "refresh": 1_000_000}


CHECKS = [not_a_server_error, status_code_conformance, content_type_conformance, response_schema_conformance]


# Requests the spec forbids (negative mode) may be answered by any documented error: none may be a 5xx,
# and what comes back is still a documented content type and body.
NEGATIVE_CHECKS = [not_a_server_error, content_type_conformance, response_schema_conformance]


# A notification's `included` holds the shipment, container, port, terminal and vessel records of its event
# (payloads.mdx "Included resources" and the 36 payloads of webhook-events-examples.mdx), where the spec
# lists webhook, tracking_request, transport_event and estimated_event only.
NOTIFICATION_PATHS = re.compile(r"^/webhook_notifications")


# Status codes the service answers on every operation though the spec lists them on few or none.
# Each: (status, proof). Added to every operation's `responses` before loading.
COMMON_STATUSES = {
    "400": "API-NOTES.md:71 (a bad parameter answers a 400 JSON:API error, live); :69 (SDK maps 400)",
    "401": "API-NOTES.md:69 (SDK maps 401; every route needs the Token header, :61)",
    "404": "API-NOTES.md:69-70 (unknown ids 404 via the SDK's NotFound; unknown routes an HTML 404)",
    "429": "API-NOTES.md:97-111 section 3 (every route is rate limited: 429 with Retry-After)",
}


# Writes answer 409 when the body's resource type is not the endpoint's: JSON:API 1.0 "Creating Resources"
# / "Updating Resources" (MUST return 409 Conflict); the spec lists it on none. INFERRED for the live service.
WRITE_STATUSES = {
    "409": "JSON:API 1.0, 409 Conflict on a resource type mismatch",
    "422": "API-NOTES.md:68 (the 422 validation error document, live POST /tracking_requests example)",
}


# Response schema enums the wire contradicts: (schema, attribute, extra value, proof).
ENUM_FIXES = [
    ("custom_field_definition", "entity_type", "Cargo",
     "fixtures/cli/custom-field-definitions.list.json:250 (a live definition on containers)"),
]


# The spec documents `application/json` responses; the service speaks JSON:API, whose media type the
# sandbox answers with (API-NOTES.md:63: JSON:API documents, docs examples send application/vnd.api+json;
# pipelines/api/client.py accepts both). Every documented JSON response also accepts this type.
JSONAPI_RESPONSE = "application/vnd.api+json"


def _drop_uri_format(node: object) -> None:
    """Links are not RFC 3986 URIs on the wire: `page[number]` brackets stay literal
    (fixtures/cli/shipments.list.json:179) and included resources' `links.self` is a relative path
    (fixtures/sdk/containers.get.include.json:211). Every `format: uri` goes."""
    if isinstance(node, dict):
        if node.get("format") == "uri":
            del node["format"]
        for child in node.values():
            _drop_uri_format(child)
    elif isinstance(node, list):
        for child in node:
            _drop_uri_format(child)


def spec_fixes(spec: dict) -> dict:
    """The vendor spec with its known errors relaxed (see the module docstring); a copy."""
    spec = copy.deepcopy(spec)
    spec["components"]["schemas"] = relax_schemas(spec["components"]["schemas"])
    _drop_uri_format(spec)
    for name, attribute, value, _proof in ENUM_FIXES:
        attr = spec["components"]["schemas"][name]["properties"]["attributes"]["properties"][attribute]
        attr["enum"] = [*attr["enum"], value]
    error_doc = {"description": "JSON:API error", "content": {"application/vnd.api+json": {"schema": {
        "type": "object", "properties": {"errors": {"type": "array", "items": {
            "$ref": "#/components/schemas/error"}}}}}}}
    for path, item in spec["paths"].items():
        for method, op in item.items():
            if method not in ("get", "post", "patch", "put", "delete"):
                continue
            if NOTIFICATION_PATHS.match(path):
                for response in op.get("responses", {}).values():
                    for content in response.get("content", {}).values():
                        included = content.get("schema", {}).get("properties", {}).get("included")
                        if included:
                            included["items"] = {"type": "object", "required": ["id", "type"]}
            statuses = {**COMMON_STATUSES, **(WRITE_STATUSES if method in ("post", "patch", "put") else {})}
            for status in statuses:
                op.setdefault("responses", {}).setdefault(status, copy.deepcopy(error_doc))
            for response in op["responses"].values():
                content = response.get("content", {})
                if "application/json" in content:
                    content.setdefault(JSONAPI_RESPONSE, content["application/json"])
    return spec


def _pattern(path: str) -> str:
    return re.sub(r"\{[^}]+\}", "{}", path)


def served(app) -> set[tuple[str, str]]:
    """(METHOD, /v2 path pattern with parameters as `{}`) for every API route the app has."""
    out = set()
    for route in app.routes:
        path = getattr(route, "path", "")
        if path.startswith("/v2/"):
            out |= {(m, _pattern(path[3:])) for m in (getattr(route, "methods", None) or ()) if m != "HEAD"}
    return out


# The first path segment → the resource type whose real id fills the operation's first path parameter, so
# that requests reach real resources and not only the 404 of a random id.
COLLECTIONS = {
    "shipments": "shipment", "containers": "container", "tracking_requests": "tracking_request",
    "ports": "port", "terminals": "terminal", "vessels": "vessel", "shipping_lines": "shipping_line",
    "parties": "party", "metro_areas": "metro_area", "custom_field_definitions": "custom_field_definition",
    "documents": "document",
}


def real_ids(cl: Client) -> dict[str, str]:
    """One id per resource type the sandbox has (plus `vessel_imo`), found through the list endpoints."""
    ids: dict[str, str] = {}
    shp = ok(cl.get("/shipments?page[size]=20&include=containers,port_of_lading,pod_terminal,destination"))
    for r in shp["data"] + shp.get("included", []):
        ids.setdefault(r["type"], r["id"])
    for path in ("/tracking_requests", "/shipping_lines", "/parties", "/custom_field_definitions", "/documents"):
        resp = cl.get(path + "?page[size]=1")
        if resp.ok and resp.json().get("data"):
            ids.setdefault(resp.json()["data"][0]["type"], resp.json()["data"][0]["id"])
    events = ok(cl.get(f"/containers/{ids['container']}/transport_events"))["data"]
    vessel = next((e["relationships"]["vessel"]["data"] for e in events
                   if (e.get("relationships", {}).get("vessel") or {}).get("data")), None)
    if vessel:
        ids["vessel"] = vessel["id"]
        resp = cl.get(f"/vessels/{vessel['id']}")
        if resp.ok:
            ids["vessel_imo"] = str(resp.json()["data"]["attributes"].get("imo"))
    return ids


def real_path_parameters(path: str, ids: dict[str, str]) -> dict[str, str] | None:
    """The first path parameter of `path` set to a real id of its collection's type, or None."""
    param = re.search(r"\{([^}]+)\}", path)
    kind = COLLECTIONS.get(path.split("/")[1])
    if param is None or kind is None:
        return None
    value = ids.get("vessel_imo" if param.group(1) == "imo" else kind)
    return {param.group(1): value} if value else None


def explore(strategy, checks: list, base_url: str, session: requests.Session) -> int:
    """Send MAX_EXAMPLES generated requests (seeded; no shrinking, to stay bounded) and check each answer;
    returns how many were sent. Raises the failures found."""
    sent = 0

    @settings(max_examples=MAX_EXAMPLES, derandomize=True, deadline=None, database=None,
              phases=[Phase.explicit, Phase.generate], suppress_health_check=list(HealthCheck))
    @given(case=strategy)
    def run(case) -> None:
        nonlocal sent
        sent += 1
        response = case.call(base_url=base_url, session=session, timeout=30)
        case.validate_response(response, checks=checks)

    run()
    return sent


@pytest.mark.slow
def test_sandbox_answers_as_the_spec_says(make_sandbox):
    """Every served operation, fuzzed from the spec (positive, negative, and with real ids), answers as the
    spec documents (relaxed where proven wrong) and never with a 5xx; the sandbox still answers after."""
    srv = make_sandbox(limits=BIG)
    spec = spec_fixes(openapi(str(shared_dir() / "reference" / "terminal49" / "openapi.json")))
    schema = schemathesis.openapi.from_dict(spec)
    routes = served(srv.app)
    ids = real_ids(Client(srv.base_url, FULL_KEY))
    session = requests.Session()
    session.headers["Authorization"] = f"Token {FULL_KEY}"
    failures: list[str] = []
    operations: list[str] = []
    examples = 0
    started = time.monotonic()
    for result in schema.get_all_operations():
        op = result.ok()
        if (op.method.upper(), _pattern(op.path)) not in routes:
            continue
        operations.append(f"{op.method.upper()} {op.path}")
        real = real_path_parameters(op.path, ids)
        variants = [("positive", op.as_strategy(), CHECKS),
                    ("negative", op.as_strategy(GenerationMode.NEGATIVE), NEGATIVE_CHECKS)]
        if real:
            variants.append(("positive, real ids", op.as_strategy(path_parameters=real), CHECKS))
        for label, strategy, checks in variants:
            try:
                examples += explore(strategy, checks, srv.base_url, session)
            except (Exception, BaseExceptionGroup) as exc:  # collect every failure, then report them all
                failures.append(f"{op.method.upper()} {op.path} ({label}): {str(exc)[:1500]}")
    elapsed = time.monotonic() - started
    print(f"{len(operations)} operations, {examples} examples, {elapsed:.1f}s: {operations}")
    assert len(operations) >= 15, operations
    assert requests.get(srv.root_url + "/_sandbox/health", timeout=10).json()["status"] == "ok"
    assert ok(Client(srv.base_url, FULL_KEY).get("/shipments?page[size]=2"))["data"]
    assert not failures, "\n\n".join(failures)
