"""The Starlette application: wires settings, the world, auth, limits, faults and routes together.
Request bodies pass the RequestGuard (size, content type, strict JSON) first. Unknown routes answer the
live service's HTML 404 page; unexpected errors a JSON:API 500."""

from __future__ import annotations

import logging
from email.utils import format_datetime
from typing import Any

from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import Request
from starlette.responses import HTMLResponse, Response

from .config import Settings
from .faults import FaultInjector, FaultMiddleware
from .jsonapi import api_error, error_response
from .limits import RequestGuard
from .ratelimit import SlidingWindowLimiter
from .routes import all_routes
from .routes.context import SandboxState
from .uploads import BlobStore
from .webhooks import WebhookHub

log = logging.getLogger("sandbox")

NOT_FOUND_HTML = """<!DOCTYPE html>
<html>
<head>
  <title>The page you were looking for doesn't exist (404)</title>
  <meta name="viewport" content="width=device-width,initial-scale=1">
</head>

<body>
  <!-- This file lives in public/404.html -->
  <div class="dialog">
    <div>
      <h1>The page you were looking for doesn't exist.</h1>
      <p>You may have mistyped the address or the page may have moved.</p>
    </div>
    <p>If you are the application owner check the logs for more information.</p>
  </div>
</body>
</html>
"""


async def _http_exception(request: Request, exc: Exception) -> Response:
    """404 and 405 from routing become the Rails HTML 404 page, as the live service answers."""
    status = getattr(exc, "status_code", 500)
    if status in (404, 405):
        return HTMLResponse(NOT_FOUND_HTML, status_code=404)
    return error_response(api_error(status, getattr(exc, "detail", "Error") or "Error"))


async def _server_error(request: Request, exc: Exception) -> Response:
    """Any exception that escaped a handler: a JSON:API 500, never a traceback page."""
    log.error("unhandled %s on %s", exc.__class__.__name__, request.url.path)
    return error_response(api_error(500, "Internal Server Error"))


def build_world(settings: Settings) -> tuple[Any, Any]:
    """Build the real World and SimClock from settings."""
    from .world import SimClock, World

    start = settings.start_time()
    return World(settings.seed, settings.shipments, start), SimClock(start, settings.speed)


def create_app(settings: Settings, world: Any = None, clock: Any = None) -> Starlette:
    """The ASGI app. `world`/`clock` default to the real ones built from settings (tests may pass
    prebuilt ones to share a world between servers); the world gains one account per `--account-key`."""
    if world is None or clock is None:
        world, clock = build_world(settings)
    keys = settings.key_ring()
    for name in keys.extra_accounts:  # a prebuilt world gets them too
        world.add_account(name)
    state = SandboxState(
        world=world, clock=clock, keys=keys,
        limiter=SlidingWindowLimiter(settings.rate_window, settings.limits),
        faults=FaultInjector(settings.faults, settings.fault_rate, settings.fault_seed, settings.fault_delay,
                             routes=settings.fail_routes),
        blobs=BlobStore(settings.signing_secret), speed=settings.speed,
    )
    state.webhooks = WebhookHub(world, clock, settings.webhook_tick_seconds)
    app = Starlette(routes=all_routes(), exception_handlers={HTTPException: _http_exception,
                                                             Exception: _server_error})
    app.state.sandbox = state
    app.add_middleware(FaultMiddleware, injector=state.faults, on_fault=state.stats.fault)
    app.add_middleware(RequestGuard)  # outside the faults: a refused body is never a simulated failure
    app.add_middleware(SimulatedDateMiddleware, clock=clock)
    return app


class SimulatedDateMiddleware:
    """Every response's `Date` header is the simulated clock's, as the live service's `Date` and its
    `created_at` timestamps come from one clock (clients stamp write intents with it)."""

    def __init__(self, app: Any, clock: Any) -> None:
        self.app, self.clock = app, clock

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def send_with_date(message: dict) -> None:
            if message["type"] == "http.response.start":
                headers = [(k, v) for k, v in message.get("headers", []) if k.lower() != b"date"]
                headers.append((b"date", format_datetime(self.clock.now(), usegmt=True).encode()))
                message = {**message, "headers": headers}
            await send(message)

        await self.app(scope, receive, send_with_date)
