"""The web app's deep links under /app. The caller's account comes from the same
`Authorization: Token <key>` header as the API (a browser session stand-in): without a header the app
redirects (302) to /app/login; with a key that cannot be verified it answers a 401 HTML page."""

from __future__ import annotations

import html
from urllib.parse import quote

from starlette.requests import Request
from starlette.responses import HTMLResponse, RedirectResponse, Response
from starlette.routing import Route

from .auth import Principal


def _page(title: str, body: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(f"<!DOCTYPE html><html><head><title>{html.escape(title)}</title></head>"
                        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>", status_code=status)


def _app_url(request: Request) -> str:
    return str(request.base_url).rstrip("/") + "/app"


def _caller(request: Request) -> Principal | Response:
    header = request.headers.get("authorization")
    if header is None:
        target = quote(request.url.path + ("?" + request.url.query if request.url.query else ""), safe="")
        return RedirectResponse(f"{_app_url(request)}/login?return_to={target}", status_code=302)
    principal = request.app.state.sandbox.keys.authenticate(header)
    return principal or _page("Unauthorized", "<p>The API key could not be verified.</p>", 401)


async def find(request: Request) -> Response:
    """GET /app/shipments/find?q=: resolve via Account.find_for_deeplink (the spec's five steps) and
    redirect to the shipment (with ?container=) or to the pre-filled shipments list."""
    who = _caller(request)
    if isinstance(who, Response):
        return who
    state = request.app.state.sandbox
    q = request.query_params.get("q", "")
    hit = state.world.account(who.account).find_for_deeplink(q, state.clock.now()) if q.strip() else None
    if hit is None:
        return RedirectResponse(f"{_app_url(request)}/shipments?q={quote(q, safe='')}", status_code=302)
    shipment_id, container_id = hit
    suffix = f"?container={container_id}" if container_id else ""
    return RedirectResponse(f"{_app_url(request)}/shipments/{shipment_id}{suffix}", status_code=302)


async def shipment_page(request: Request) -> Response:
    """GET /app/shipments/{id}: a simple page for the caller's shipment (404 when not in the account)."""
    who = _caller(request)
    if isinstance(who, Response):
        return who
    state = request.app.state.sandbox
    sid = request.path_params["id"]
    shp = state.world.account(who.account).get("shipment", sid, state.clock.now())
    if shp is None:
        return _page("Shipment not found", "", 404)
    a = shp.get("attributes", {})
    container = request.query_params.get("container")
    extra = f"<p>Selected container: {html.escape(container)}</p>" if container else ""
    return _page(f"Shipment {a.get('bill_of_lading_number', sid)}", f"<p id='shipment'>{html.escape(sid)}</p>{extra}")


async def shipments_page(request: Request) -> Response:
    """GET /app/shipments?q=: the shipments list with the query pre-filled."""
    who = _caller(request)
    if isinstance(who, Response):
        return who
    q = html.escape(request.query_params.get("q", ""), quote=True)
    return _page("Shipments", f"<form><input name='q' value=\"{q}\"></form>")


async def login_page(request: Request) -> Response:
    """GET /app/login: where unauthenticated browsers land."""
    return _page("Log in", "<p>Send 'Authorization: Token &lt;API_KEY&gt;' to use the sandbox web app.</p>")


ROUTES = [
    Route("/app/shipments/find", find, methods=["GET"]),
    Route("/app/shipments", shipments_page, methods=["GET"]),
    Route("/app/shipments/{id}", shipment_page, methods=["GET"]),
    Route("/app/login", login_page, methods=["GET"]),
]
