"""Vessel future positions (routing-data entitlement, spec `vessel_with_positions`) and metro areas.
`GET /vessels/{imo}` needs no route of its own: `/vessels/{id}` in reference.py accepts an IMO."""

from __future__ import annotations

import math

from starlette.routing import Route

from ..auth import ROUTING
from ..jsonapi import api_error, not_found
from ..world.future_positions import future_positions
from ..world.metro_areas import find_metro_area, metro_area_resource
from ..world.timeutil import to_epoch
from .common import one_document
from .context import Ctx, api


def _required(ctx: Ctx, name: str) -> str:
    value = (ctx.params.get(name) or "").strip()
    if not value:
        raise api_error(400, "Bad Request", f"{name} is required", parameter=name)
    return value


def _coordinate(ctx: Ctx, name: str, bound: float) -> float:
    raw = _required(ctx, name)
    try:
        value = float(raw)
    except ValueError:
        value = math.nan
    if not math.isfinite(value) or abs(value) > bound:
        raise api_error(400, "Bad Request", f"{name} must be a number within +-{bound:g}", parameter=name)
    return value


def _positions(ctx: Ctx, start: tuple[float, float] | None) -> dict:
    if ROUTING not in ctx.principal.entitlements:
        raise api_error(403, "Forbidden", "Routing data feature is not enabled for this account")
    vid = ctx.request.path_params["id"]
    vessel = ctx.world.fleet.find(vid)
    if vessel is None:
        raise not_found("Vessel", vid)
    ports = {}
    for name in ("port_id", "previous_port_id"):
        ports[name] = ctx.world.ref.find_port(_required(ctx, name))
        if ports[name] is None:
            raise not_found("Port", ctx.params[name])
    return one_document(ctx, future_positions(ctx.world.fleet, vessel, ports["port_id"], to_epoch(ctx.now), start))


@api()
async def get_future_positions(ctx: Ctx) -> dict:
    """GET /vessels/{id}/future_positions?port_id=&previous_port_id=: from the vessel's position."""
    return _positions(ctx, None)


@api()
async def get_future_positions_with_coordinates(ctx: Ctx) -> dict:
    """GET /vessels/{id}/future_positions_with_coordinates: from the given latitude/longitude."""
    lat, lon = _coordinate(ctx, "latitude", 90), _coordinate(ctx, "longitude", 180)
    return _positions(ctx, (lon, lat))


@api()
async def get_metro_area(ctx: Ctx) -> dict:
    """GET /metro_areas/{id or UN/LOCODE}."""
    key = ctx.request.path_params["id"]
    port = find_metro_area(ctx.world.ref, key)
    if port is None:
        raise not_found("MetroArea", key)
    return one_document(ctx, metro_area_resource(port))


ROUTES = [
    Route("/v2/vessels/{id}/future_positions", get_future_positions, methods=["GET"]),
    Route("/v2/vessels/{id}/future_positions_with_coordinates", get_future_positions_with_coordinates,
          methods=["GET"]),
    Route("/v2/metro_areas/{id}", get_metro_area, methods=["GET"]),
]
