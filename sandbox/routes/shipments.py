"""Shipments and containers: lists, single resources, PATCHes, transport events, map and refresh."""

from __future__ import annotations

from starlette.routing import Route

from ..auth import REFRESH, ROUTING
from ..jsonapi import api_error, not_found
from ..validation import patch_attrs
from .common import list_document, one_document, read_data
from .context import Ctx, api


def _flag(raw: str | None) -> bool | None:
    """A boolean query parameter (true/false, 1/0); None when absent or unreadable (ignored, as live)."""
    value = (raw or "").strip().lower()
    return True if value in ("true", "1") else False if value in ("false", "0") else None


@api()
async def list_shipments(ctx: Ctx) -> dict:
    """GET /shipments: `q` and `number` search, `filter[tracking_stopped]` (true/false); other filters
    silently ignored; meta {total,size}."""
    p = ctx.params
    seq = ctx.account.shipments(ctx.now, q=p.get("q") or None, number=p.get("number") or None,
                                tracking_stopped=_flag(p.get("filter[tracking_stopped]")))
    return list_document(ctx, seq, default_size=30, meta="shipments")


def _by_path_id(ctx: Ctx, type_: str) -> dict:
    """The account's resource named by the route's `{id}`, or the JSON:API 404."""
    id_ = ctx.request.path_params["id"]
    found = ctx.account.get(type_, id_, ctx.now)
    if found is None:
        raise not_found(type_.capitalize(), id_)
    return found


@api()
async def get_shipment(ctx: Ctx) -> dict:
    """GET /shipments/{id} with include."""
    return one_document(ctx, _by_path_id(ctx, "shipment"))


@api()
async def patch_shipment(ctx: Ctx) -> dict:
    """PATCH /shipments/{id}: `ref_numbers` and `tags` (arrays of strings; tags deduplicated)."""
    data = await read_data(ctx, "shipment")
    attrs = patch_attrs(data, ("ref_numbers", "tags"))
    if "tags" in attrs:
        attrs["tags"] = list(dict.fromkeys(attrs["tags"]))
    sid = ctx.request.path_params["id"]
    updated = ctx.account.patch_shipment(sid, ctx.now, **attrs)
    if updated is None:
        raise not_found("Shipment", sid)
    return one_document(ctx, updated)


async def _set_tracking(ctx: Ctx, stop: bool) -> dict:
    sid = ctx.request.path_params["id"]
    updated = ctx.account.set_tracking(sid, ctx.now, stop=stop)
    if updated is None:
        raise not_found("Shipment", sid)
    return one_document(ctx, updated)


@api()
async def stop_tracking(ctx: Ctx) -> dict:
    """PATCH /shipments/{id}/stop_tracking: no body; the shipment with line_tracking_stopped_* set
    (reason cancelled_by_user, line_tracking_stopped_by_user); its containers get no more updates."""
    return await _set_tracking(ctx, True)


@api()
async def resume_tracking(ctx: Ctx) -> dict:
    """PATCH /shipments/{id}/resume_tracking: no body; the shipment with the stopped fields cleared."""
    return await _set_tracking(ctx, False)


@api()
async def list_containers(ctx: Ctx) -> dict:
    """GET /containers: page and include only; meta {total}."""
    return list_document(ctx, ctx.account.containers(ctx.now), default_size=30, meta="containers")


@api()
async def get_container(ctx: Ctx) -> dict:
    """GET /containers/{id} with include."""
    return one_document(ctx, _by_path_id(ctx, "container"))


@api()
async def patch_container(ctx: Ctx) -> dict:
    """PATCH /containers/{id}: `ref_numbers` only."""
    data = await read_data(ctx, "container")
    attrs = patch_attrs(data, ("ref_numbers",))
    cid = ctx.request.path_params["id"]
    updated = ctx.account.patch_container(cid, ctx.now, **attrs)
    if updated is None:
        raise not_found("Container", cid)
    return one_document(ctx, updated)


@api()
async def transport_events(ctx: Ctx) -> dict:
    """GET /containers/{id}/transport_events: all events, links self/current only (as live)."""
    cid = ctx.request.path_params["id"]
    events = ctx.account.transport_events(cid, ctx.now)
    if events is None:
        raise not_found("Container", cid)
    return list_document(ctx, events, default_size=max(1, len(events)), meta="none", paginated=False)


@api()
async def map_geojson(ctx: Ctx) -> dict:
    """GET /containers/{id}/map_geojson: 403 without the routing-data entitlement."""
    if ROUTING not in ctx.principal.entitlements:
        raise api_error(403, "Forbidden", "Routing data feature is not enabled for this account")
    cid = ctx.request.path_params["id"]
    fc = ctx.account.map_geojson(cid, ctx.now)
    if fc is None:
        raise not_found("Container", cid)
    return fc


@api(bucket="refresh")
async def refresh_container(ctx: Ctx) -> dict:
    """PATCH /containers/{id}/refresh: own 10/min bucket; 403 without the refresh entitlement."""
    if REFRESH not in ctx.principal.entitlements:
        raise api_error(403, "API access not enabled",
                        "This API endpoint is not enabled for your account. Please contact support@terminal49.com")
    _by_path_id(ctx, "container")
    return {"message": "Started refresh for Shipping line, Terminal, Rail"}


ROUTES = [
    Route("/v2/shipments", list_shipments, methods=["GET"]),
    Route("/v2/shipments/{id}", get_shipment, methods=["GET"]),
    Route("/v2/shipments/{id}", patch_shipment, methods=["PATCH"]),
    Route("/v2/shipments/{id}/stop_tracking", stop_tracking, methods=["PATCH"]),
    Route("/v2/shipments/{id}/resume_tracking", resume_tracking, methods=["PATCH"]),
    Route("/v2/containers", list_containers, methods=["GET"]),
    Route("/v2/containers/{id}", get_container, methods=["GET"]),
    Route("/v2/containers/{id}", patch_container, methods=["PATCH"]),
    Route("/v2/containers/{id}/transport_events", transport_events, methods=["GET"]),
    Route("/v2/containers/{id}/map_geojson", map_geojson, methods=["GET"]),
    Route("/v2/containers/{id}/refresh", refresh_container, methods=["PATCH"]),
]
