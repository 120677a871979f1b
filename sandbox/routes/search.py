"""GET /v2/search: shipments, then containers ("cargo"), then tracking requests whose number or
reference numbers match `query` (case-insensitive substring), at most 25 results, each a
`search_result` shaped like the live captures (links self/current, no meta)."""

from __future__ import annotations

from itertools import islice

from starlette.routing import Route

from ..jsonapi import api_error
from ..world.identifiers import norm_container
from .common import list_document
from .context import Ctx, api

MAX_RESULTS = 25  # spec: "Returns up to 25 results"


def _result(id_: str, entity_type: str, number: str, **attrs) -> dict:
    base = {"entity_type": entity_type, "number": number, "shipment_id": None, "scac": None,
            "port_of_lading_name": None, "port_of_discharge_name": None, "containers_count": None,
            "tracking_stopped": None, "tracking_stopped_reason": None, "status": None, "failed_reason": None,
            "ref_numbers": [], "created_at": None, "updated_at": None}
    return {"id": id_, "type": "search_result", "attributes": {**base, **attrs}}


def _shipment(s: dict) -> dict:
    a = s["attributes"]
    return _result(s["id"], "shipment", a["bill_of_lading_number"], scac=a["shipping_line_scac"],
                   port_of_lading_name=a["port_of_lading_name"], port_of_discharge_name=a["port_of_discharge_name"],
                   containers_count=len(s["relationships"]["containers"]["data"]),
                   tracking_stopped=a["line_tracking_stopped_at"] is not None,
                   tracking_stopped_reason=a["line_tracking_stopped_reason"], ref_numbers=a["ref_numbers"],
                   created_at=a["created_at"], updated_at=a["line_tracking_last_succeeded_at"] or a["created_at"])


def _containers(ctx: Ctx, query: str, limit: int) -> list[dict]:
    """Containers whose number contains the query: API-created shipments' first, then seeded ones."""
    acct = ctx.account
    store, t = acct.store, int(ctx.now.timestamp())
    needle = norm_container(query)
    if not needle or limit <= 0:
        return []
    hits: list[tuple[int, int]] = [(i, c.slot) for i in store.api_shipments(t) for c in store.identity(i).containers
                                   if needle in c.number.upper()]
    index = acct.search_index()
    hits += [store.container_at(g) for g, number in enumerate(index.cont_numbers) if needle in number]
    out = []
    for i, slot in hits[:limit]:
        c = acct.get("container", acct.container_id(i, slot), ctx.now)
        if c is None:
            continue
        a = c["attributes"]
        out.append(_result(c["id"], "cargo", a["number"], shipment_id=acct.shipment_id(i),
                           scac=store.identity(i).carrier.scac, ref_numbers=a.get("ref_numbers") or [],
                           created_at=a.get("created_at"), updated_at=a.get("updated_at") or a.get("created_at")))
    return out


def _tracking_requests(ctx: Ctx, query: str, limit: int) -> list[dict]:
    """Tracking requests matching the query that have no shipment (duplicates of shipments are dropped)."""
    if limit <= 0:
        return []
    rows = (r for r in ctx.account.tracking_requests(ctx.now, q=query)
            if r["relationships"]["tracked_object"]["data"] is None)
    return [_result(r["id"], "tracking_request", r["attributes"]["request_number"], scac=r["attributes"]["scac"],
                    status=r["attributes"]["status"], failed_reason=r["attributes"]["failed_reason"],
                    ref_numbers=r["attributes"]["ref_numbers"], created_at=r["attributes"]["created_at"],
                    updated_at=r["attributes"]["updated_at"]) for r in islice(rows, limit)]


@api()
async def search(ctx: Ctx) -> dict:
    """GET /search?query=: 400 without a query; shipments first, then cargo, then tracking requests."""
    query = (ctx.params.get("query") or "").strip()
    if not query:
        raise api_error(400, "Bad Request", "query is required", parameter="query")
    results = [_shipment(s) for s in islice(ctx.account.shipments(ctx.now, q=query), MAX_RESULTS)]
    results += _containers(ctx, query, MAX_RESULTS - len(results))
    results += _tracking_requests(ctx, query, MAX_RESULTS - len(results))
    return list_document(ctx, results, default_size=MAX_RESULTS, meta="none", paginated=False)


ROUTES = [Route("/v2/search", search, methods=["GET"])]
