"""GET /v2/containers/{id}/raw_events: the carrier's milestones behind the transport events, with
only `data` and `included` (no links, no meta), as the live capture."""

from __future__ import annotations

from starlette.routing import Route

from ..jsonapi import not_found
from ..world.raw_events import raw_event_resources
from .context import Ctx, api


@api()
async def raw_events(ctx: Ctx) -> dict:
    """Raw events of a container known at the simulated now, oldest first, vessels/ports/terminals included."""
    cid = ctx.request.path_params["id"]
    events = ctx.account.transport_events(cid, ctx.now)
    container = ctx.get("container", cid) if events is not None else None
    if container is None:
        raise not_found("Container", cid)
    shipment_ref = container["relationships"]["shipment"]["data"]
    shipment = ctx.get("shipment", shipment_ref["id"]) if shipment_ref else None
    sa = shipment["attributes"] if shipment else {}
    carrier = (sa.get("shipping_line_short_name") or sa.get("shipping_line_name"), sa.get("shipping_line_scac"))
    data, included = raw_event_resources(events, carrier, cid, ctx.get)
    return {"data": data, "included": included}


ROUTES = [Route("/v2/containers/{id}/raw_events", raw_events, methods=["GET"])]
