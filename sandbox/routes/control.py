"""Control endpoints under /_sandbox/ (no auth, never faulted): clock, faults, stats, health."""

from __future__ import annotations

import asyncio
import math
import threading
import time
from datetime import UTC, datetime

from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from ..config import RouteRule
from ..jsonapi import ApiError, error
from ..validation import parse_json
from .context import SandboxState

# The simulated clock must stay a datetime: no jump may carry it past this instant (year 9999 overflows).
LATEST = datetime(5000, 1, 1, tzinfo=UTC)
MAX_SEED = 2**63


def _state(request: Request) -> SandboxState:
    return request.app.state.sandbox


def _bad_request(message: str) -> JSONResponse:
    """A 400 naming the problem in `error` (what control clients read) and as a JSON:API error document."""
    return JSONResponse({"error": message, "errors": [error(400, "Bad Request", message)]}, status_code=400)


async def _body(request: Request) -> dict | JSONResponse:
    try:
        body = parse_json(await request.body())
    except ApiError as exc:
        return _bad_request(f"body must be JSON: {exc.errors[0]['detail']}")
    if body is None:
        return {}
    return body if isinstance(body, dict) else _bad_request("body must be an object")


def _finite(value: object) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _clock_doc(state: SandboxState) -> dict:
    return {"now": state.clock.now().isoformat().replace("+00:00", "Z"), "speed": state.speed}


async def get_clock(request: Request) -> JSONResponse:
    """GET /_sandbox/clock: the simulated now."""
    return JSONResponse(_clock_doc(_state(request)))


async def post_clock(request: Request) -> JSONResponse:
    """POST /_sandbox/clock {"advance_seconds": N}: move simulated time forward (N a finite number >= 0
    that keeps the clock before LATEST; anything else is a 400 and leaves the clock alone)."""
    body = await _body(request)
    if isinstance(body, JSONResponse):
        return body
    n = body.get("advance_seconds")
    if not _finite(n) or n < 0:
        return _bad_request("advance_seconds must be a finite number >= 0")
    state = _state(request)
    if float(n) >= (LATEST - state.clock.now()).total_seconds():
        return _bad_request(f"advance_seconds must keep the simulated clock before {LATEST.year}")
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


def _number(body: dict, key: str, cur: dict) -> float:
    """A finite number (or its string form, as before) for `key`; ValueError otherwise."""
    value = body.get(key, cur[key])
    number = float(value) if isinstance(value, int | float | str) and not isinstance(value, bool) else math.nan
    if not math.isfinite(number):
        raise ValueError(f"{key} must be a finite number")
    return number


def _seed(value: object) -> int:
    """An integer seed within ±2**63 (integral floats and digit strings accepted, as before)."""
    if isinstance(value, bool) or not isinstance(value, int | float | str):
        raise ValueError("seed must be an integer")
    if isinstance(value, float) and not (math.isfinite(value) and value.is_integer()):
        raise ValueError("seed must be an integer")
    seed = int(value)
    if not -MAX_SEED < seed < MAX_SEED:
        raise ValueError("seed must be an integer within ±2**63")
    return seed


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
                inj.configure(str(body.get("profile", cur["profile"])), _number(body, "rate", cur),
                              _seed(body.get("seed", cur["seed"])), _number(body, "delay", cur))
        except (ValueError, TypeError, OverflowError) as exc:
            return _bad_request(str(exc))
        if rules is not None:
            inj.set_routes(rules)
    return JSONResponse(inj.describe())


async def stats(request: Request) -> JSONResponse:
    """GET /_sandbox/stats: requests and 429s per bucket by key fingerprint and by account name, faults,
    routes, and the webhook delivery counters (sent/succeeded/failed/retried)."""
    state = _state(request)
    return JSONResponse({**state.stats.snapshot(), "webhook_deliveries": state.webhooks.snapshot()})


async def stats_reset(request: Request) -> JSONResponse:
    """POST /_sandbox/stats/reset: zero the counters and the rate-limit windows."""
    state = _state(request)
    state.stats.reset()
    state.limiter.reset()
    return JSONResponse(state.stats.snapshot())


def _wait_all(events: list[threading.Event], timeout: float) -> int:
    """How many of `events` were set within `timeout` seconds overall."""
    deadline = time.monotonic() + timeout
    done = 0
    for ev in events:
        if ev.wait(max(0.0, deadline - time.monotonic())):
            done += 1
    return done


async def webhooks_tick(request: Request) -> JSONResponse:
    """POST /_sandbox/webhooks/tick: run one webhook tick now (notifications for the changes since the
    last tick, due retries) and answer once every delivery it queued was attempted once (60 s at most)."""
    state = _state(request)
    waits = state.webhooks.tick()
    attempted = await asyncio.get_running_loop().run_in_executor(None, _wait_all, waits, 60.0)
    return JSONResponse({**_clock_doc(state), "queued": len(waits), "attempted": attempted,
                         "deliveries": state.webhooks.snapshot()})


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
    Route("/_sandbox/webhooks/tick", webhooks_tick, methods=["POST"]),
]
