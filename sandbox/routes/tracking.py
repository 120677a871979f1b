"""Tracking requests: create (own bucket, 201), list with filters, get one, and infer_number."""

from __future__ import annotations

from datetime import datetime

from starlette.routing import Route

from ..config import parse_iso
from ..jsonapi import ApiError, api_error, document, error, not_found
from ..validation import parse_json, related_id, tracking_request
from ..world import ValidationIssue
from .common import list_document, one_document, read_data
from .context import Ctx, api
from .infer import infer


def _instant(ctx: Ctx, name: str) -> datetime | None:
    raw = ctx.params.get(name)
    if not raw:
        return None
    try:
        return parse_iso(raw)
    except ValueError:
        raise ApiError(400, [error(400, "Bad Request", f"{name} must be an ISO 8601 date-time",
                                   parameter=name)]) from None


@api()
async def list_tracking_requests(ctx: Ctx) -> dict:
    """GET /tracking_requests: status/scac/request_number/q and created/updated windows; tracked_object
    included by default (as the live list capture); meta with pagination block."""
    p = ctx.params
    seq = ctx.account.tracking_requests(
        ctx.now, status=p.get("filter[status]") or None, scac=p.get("filter[scac]") or None,
        request_number=p.get("filter[request_number]") or None, q=p.get("q") or None,
        created_start=_instant(ctx, "filter[created_at][start]"), created_end=_instant(ctx, "filter[created_at][end]"),
        updated_start=_instant(ctx, "filter[updated_at][start]"), updated_end=_instant(ctx, "filter[updated_at][end]"))
    return list_document(ctx, seq, default_size=25, meta="pagination", default_include="tracked_object")


@api()
async def get_tracking_request(ctx: Ctx) -> dict:
    """GET /tracking_requests/{id}: tracked_object included by default."""
    tid = ctx.request.path_params["id"]
    found = ctx.account.get("tracking_request", tid, ctx.now)
    if found is None:
        raise not_found("TrackingRequest", tid)
    return one_document(ctx, found, default_include="tracked_object")


@api(bucket="tracking_requests_create", status=201)
async def create_tracking_request(ctx: Ctx) -> dict:
    """POST /tracking_requests: the spec's 422 cases (all reported at once), then the world creates it."""
    data = await read_data(ctx, "tracking_request")
    attrs = tracking_request(data, ctx.world.carrier_support)
    customer = related_id(data, "customer", "party")
    if customer is not None and ctx.account.get("party", customer, ctx.now) is None:
        raise ApiError(422, [error(422, "Unprocessable Entity", f"Customer '{customer}' was not found",
                                   pointer="/data/relationships/customer", code="not_found")])
    created = ctx.account.create_tracking_request(attrs, customer, ctx.now)
    return document(created, links={"self": ctx.base(created["links"]["self"]) if created.get("links") else ctx.base()})


TR_EDITABLE = ("ref_number",)   # the spec's "Edit a tracking request" body


@api()
async def patch_tracking_request(ctx: Ctx) -> dict:
    """PATCH /tracking_requests/{id}: only `ref_number` (a string, or null to clear) is editable, as the
    spec; any other attribute is a 422."""
    data = await read_data(ctx, "tracking_request")
    attrs = data.get("attributes") or {}
    if not isinstance(attrs, dict):
        raise ValidationIssue("/data/attributes", "Attributes must be an object", "invalid")
    for name in attrs:
        if name not in TR_EDITABLE:
            raise ValidationIssue(f"/data/attributes/{name}", f"{name} is not an editable attribute", "invalid")
    ref = attrs.get("ref_number")
    if ref is not None and not isinstance(ref, str):
        raise ValidationIssue("/data/attributes/ref_number", "Ref number must be a string", "invalid")
    tid = ctx.request.path_params["id"]
    updated = ctx.account.patch_tracking_request(tid, ctx.now, attrs)
    if updated is None:
        raise not_found("TrackingRequest", tid)
    return one_document(ctx, updated)


@api(bucket="infer_number")
async def infer_number(ctx: Ctx) -> dict:
    """POST /tracking_requests/infer_number: plain JSON `{number}`; own 200/min bucket."""
    body = parse_json(await ctx.request.body())
    number = body.get("number") if isinstance(body, dict) else None
    if not isinstance(number, str) and isinstance(body, dict) and isinstance(body.get("data"), dict):
        number = (body["data"].get("attributes") or {}).get("number")
    result = infer(number, ctx.world.carrier_prefixes()) if isinstance(number, str) else None
    if result is None:
        raise api_error(422, "Unprocessable Entity", "This reference number is not valid.", pointer="/number",
                        code="invalid")
    return {"data": result}


ROUTES = [
    Route("/v2/tracking_requests", list_tracking_requests, methods=["GET"]),
    Route("/v2/tracking_requests", create_tracking_request, methods=["POST"]),
    Route("/v2/tracking_requests/infer_number", infer_number, methods=["POST"]),
    Route("/v2/tracking_requests/{id}", get_tracking_request, methods=["GET"]),
    Route("/v2/tracking_requests/{id}", patch_tracking_request, methods=["PATCH"]),
]
