"""Reference data (terminals, ports, vessels, shipping lines) and customer parties."""

from __future__ import annotations

from starlette.routing import Route

from ..jsonapi import document, not_found
from ..validation import party
from .common import list_document, one_document, read_data
from .context import Ctx, api

SHIPPING_LINES_PAGE = 38  # the live list (no page params) came back with 38 rows and links.next/last


def _one(ctx: Ctx, found: dict | None, kind: str) -> dict:
    if found is None:
        raise not_found(kind, ctx.request.path_params["id"])
    return one_document(ctx, found)


@api()
async def get_terminal(ctx: Ctx) -> dict:
    """GET /terminals/{id}."""
    return _one(ctx, ctx.world.get_terminal(ctx.request.path_params["id"]), "Terminal")


@api()
async def get_port(ctx: Ctx) -> dict:
    """GET /ports/{id or UN/LOCODE}."""
    return _one(ctx, ctx.world.get_port(ctx.request.path_params["id"]), "Port")


@api()
async def get_vessel(ctx: Ctx) -> dict:
    """GET /vessels/{id or IMO}: position as of the simulated now."""
    return _one(ctx, ctx.world.get_vessel(ctx.request.path_params["id"], ctx.now), "Vessel")


@api()
async def list_shipping_lines(ctx: Ctx) -> dict:
    """GET /shipping_lines: paginated with links (no meta), like the live capture."""
    return list_document(ctx, ctx.world.shipping_lines(), default_size=SHIPPING_LINES_PAGE, meta="none")


@api()
async def get_shipping_line(ctx: Ctx) -> dict:
    """GET /shipping_lines/{id}."""
    return _one(ctx, ctx.world.get_shipping_line(ctx.request.path_params["id"]), "ShippingLine")


@api()
async def list_parties(ctx: Ctx) -> dict:
    """GET /parties: default size 25; meta with pagination block."""
    return list_document(ctx, ctx.account.parties(), default_size=25, meta="pagination")


@api(status=201)
async def create_party(ctx: Ctx) -> dict:
    """POST /parties: `company_name` required."""
    created = ctx.account.create_party(party(await read_data(ctx, "party")), ctx.now)
    return document(created)


@api()
async def get_party(ctx: Ctx) -> dict:
    """GET /parties/{id}."""
    return _one(ctx, ctx.account.get("party", ctx.request.path_params["id"], ctx.now), "Party")


ROUTES = [
    Route("/v2/terminals/{id}", get_terminal, methods=["GET"]),
    Route("/v2/ports/{id}", get_port, methods=["GET"]),
    Route("/v2/vessels/{id}", get_vessel, methods=["GET"]),
    Route("/v2/shipping_lines", list_shipping_lines, methods=["GET"]),
    Route("/v2/shipping_lines/{id}", get_shipping_line, methods=["GET"]),
    Route("/v2/parties", list_parties, methods=["GET"]),
    Route("/v2/parties", create_party, methods=["POST"]),
    Route("/v2/parties/{id}", get_party, methods=["GET"]),
]
