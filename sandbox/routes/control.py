"""Control endpoints under /_sandbox/ (no auth, never faulted): clock, faults, stats, health."""

from __future__ import annotations

import json

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..config import RouteRule
from .context import SandboxState


def _state(request: Request) -> SandboxState:
    return request.app.state.sandbox


async def _body(request: Request) -> dict | JSONResponse:
    try:
        body = json.loads(await request.body() or b"{}")
    except (ValueError, UnicodeDecodeError):
        return JSONResponse({"error": "body must be JSON"}, status_code=400)
    return body if isinstance(body, dict) else JSONResponse({"error": "body must be an object"}, status_code=400)


def _clock_doc(state: SandboxState) -> dict:
    return {"now": state.clock.now().isoformat().replace("+00:00", "Z"), "speed": state.speed}


async def get_clock(request: Request) -> JSONResponse:
    """GET /_sandbox/clock: the simulated now."""
    return JSONResponse(_clock_doc(_state(request)))


async def post_clock(request: Request) -> JSONResponse:
    """POST /_sandbox/clock {"advance_seconds": N}: move simulated time forward (N >= 0)."""
    body = await _body(request)
    if isinstance(body, JSONResponse):
        return body
    n = body.get("advance_seconds")
    if not isinstance(n, int | float) or isinstance(n, bool) or n < 0:
        return JSONResponse({"error": "advance_seconds must be a number >= 0"}, status_code=400)
    state = _state(request)
    state.clock.advance(float(n))
    return JSONResponse(_clock_doc(state))


def _route_rules(raw: object) -> list[RouteRule]:
    """The `routes` member of POST /_sandbox/faults as rules; ValueError naming the bad rule."""
    if not isinstance(raw, list):
        raise ValueError('routes must be a list of {"path", "status", "body"} objects')
    rules = []
    for i, doc in enumerate(raw):
        try:
            rules.append(RouteRule.from_dict(doc))
        except ValueError as exc:
            raise ValueError(f"routes[{i}]: {exc}") from None
    return rules


async def faults(request: Request) -> JSONResponse:
    """GET/POST /_sandbox/faults {"profile","rate","seed","delay","routes"}: switch fault injection at
    runtime. `routes` replaces every route rule (`[]` clears them); a body with only `routes` leaves the
    random profile and its RNG as they are. Anything invalid answers 400 and changes nothing."""
    inj = _state(request).faults
    if request.method == "POST":
        body = await _body(request)
        if isinstance(body, JSONResponse):
            return body
        cur = inj.describe()
        try:
            rules = _route_rules(body["routes"]) if "routes" in body else None
            if rules is None or body.keys() & {"profile", "rate", "seed", "delay"}:
                inj.configure(str(body.get("profile", cur["profile"])), float(body.get("rate", cur["rate"])),
                              int(body.get("seed", cur["seed"])), float(body.get("delay", cur["delay"])))
        except (ValueError, TypeError) as exc:
            return JSONResponse({"error": str(exc)}, status_code=400)
        if rules is not None:
            inj.set_routes(rules)
    return JSONResponse(inj.describe())


async def stats(request: Request) -> JSONResponse:
    """GET /_sandbox/stats: requests per key fingerprint and bucket, 429s, faults, routes."""
    return JSONResponse(_state(request).stats.snapshot())


async def stats_reset(request: Request) -> JSONResponse:
    """POST /_sandbox/stats/reset: zero the counters and the rate-limit windows."""
    state = _state(request)
    state.stats.reset()
    state.limiter.reset()
    return JSONResponse(state.stats.snapshot())


async def health(request: Request) -> JSONResponse:
    """GET /_sandbox/health: liveness plus a little about the world."""
    state = _state(request)
    accounts = getattr(state.world, "accounts", {})
    return JSONResponse({"status": "ok", "accounts": sorted(accounts), **_clock_doc(state)})


ROUTES = [
    Route("/_sandbox/clock", get_clock, methods=["GET"]),
    Route("/_sandbox/clock", post_clock, methods=["POST"]),
    Route("/_sandbox/faults", faults, methods=["GET", "POST"]),
    Route("/_sandbox/stats", stats, methods=["GET"]),
    Route("/_sandbox/stats/reset", stats_reset, methods=["POST"]),
    Route("/_sandbox/health", health, methods=["GET"]),
]
