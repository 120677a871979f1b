"""Per-app state shared by the handlers, request statistics, and the `api` decorator that wraps every
/v2 handler with auth, rate limiting, accounting and JSON:API error handling."""

from __future__ import annotations

import functools
import logging
import threading
from collections import Counter, defaultdict
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from starlette.requests import ClientDisconnect, Request
from starlette.responses import Response

from ..auth import UNAUTHORIZED_DETAIL, KeyRing, Principal
from ..faults import FaultInjector
from ..jsonapi import ApiError, ApiResponse, api_error, error, error_response
from ..ratelimit import SlidingWindowLimiter, bucket_detail
from ..uploads import BlobStore
from ..world import ValidationIssue

log = logging.getLogger("sandbox")


class Stats:
    """Counters for `GET /_sandbox/stats`; keys appear only as fingerprints, accounts by name."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.reset()

    def reset(self) -> None:
        """Zero every counter."""
        with self._lock:
            self.by_key: dict[str, Counter] = defaultdict(Counter)
            self.limited: dict[str, Counter] = defaultdict(Counter)
            self.by_account: dict[str, Counter] = defaultdict(Counter)
            self.limited_by_account: dict[str, Counter] = defaultdict(Counter)
            self.faults: Counter = Counter()
            self.routes: Counter = Counter()
            self.abandoned: Counter = Counter()
            self.unauthorized = 0

    def request(self, who: Principal, bucket: str, route: str) -> None:
        """Count one authenticated request in its bucket and route, under its key and its account."""
        with self._lock:
            self.by_key[who.fingerprint][bucket] += 1
            self.by_account[who.account][bucket] += 1
            self.routes[route] += 1

    def abandon(self, route: str) -> None:
        """Move one request from its route's count to the abandoned ones: the client went away before
        its body arrived, so nothing was processed (it still spent its place in the rate budget)."""
        with self._lock:
            self.routes[route] -= 1
            self.abandoned[route] += 1

    def rate_limited(self, who: Principal, bucket: str) -> None:
        """Count one 429 served by the limiter, under its key and its account."""
        with self._lock:
            self.limited[who.fingerprint][bucket] += 1
            self.limited_by_account[who.account][bucket] += 1

    def fault(self, kind: str) -> None:
        """Count one injected fault (a fault 429 counts here, not in rate_limited)."""
        with self._lock:
            self.faults[kind] += 1

    def denied(self) -> None:
        """Count one 401."""
        with self._lock:
            self.unauthorized += 1

    def snapshot(self) -> dict:
        """A JSON-able copy of the counters."""
        with self._lock:
            return {
                "requests_by_key": {k: dict(v) for k, v in self.by_key.items()},
                "rate_limited_by_key": {k: dict(v) for k, v in self.limited.items()},
                "rate_limited_total": sum(sum(v.values()) for v in self.limited.values()),
                "requests_by_account": {k: dict(v) for k, v in self.by_account.items()},
                "rate_limited_by_account": {k: dict(v) for k, v in self.limited_by_account.items()},
                "faults_served": dict(self.faults),
                "faults_total": sum(self.faults.values()),
                "requests_by_route": dict(self.routes),
                "abandoned_by_route": dict(self.abandoned),
                "unauthorized": self.unauthorized,
            }


@dataclass
class SandboxState:
    """Everything handlers need: the world and its clock plus the HTTP layer's own stores."""

    world: Any
    clock: Any
    keys: KeyRing
    limiter: SlidingWindowLimiter
    faults: FaultInjector
    blobs: BlobStore
    speed: float = 1.0
    stats: Stats = field(default_factory=Stats)
    custom_fields: dict[str, Any] = field(default_factory=dict)  # account name -> CustomFieldStore (writes in memory)
    webhooks: Any = None  # sandbox.webhooks.WebhookHub: per-account webhooks, notifications, deliveries


@dataclass
class Ctx:
    """What an API handler receives: the request, the caller and one `now` for the whole request."""

    request: Request
    state: SandboxState
    principal: Principal
    now: datetime

    @property
    def account(self) -> Any:
        """The caller's world Account."""
        return self.state.world.account(self.principal.account)

    @property
    def world(self) -> Any:
        """The World (reference data)."""
        return self.state.world

    @property
    def params(self) -> dict[str, str]:
        """Query parameters (last value wins)."""
        return dict(self.request.query_params)

    def base(self, path: str | None = None) -> str:
        """Absolute URL of `path` (default: the request path) on this server, without query."""
        root = str(self.request.base_url).rstrip("/")
        return root + (path if path is not None else self.request.url.path)

    @property
    def raw_query(self) -> str:
        """The query string exactly as received."""
        return self.request.scope.get("query_string", b"").decode("latin-1")

    def get(self, type_: str, id_: str) -> dict | None:
        """Resolve any resource visible to the caller (for include=)."""
        return self.account.get(type_, id_, self.now)


Handler = Callable[[Ctx], Awaitable[Response | dict]]


def unauthorized() -> ApiResponse:
    """The 401 document for any key that cannot be verified."""
    return error_response(api_error(401, "Unauthorized", UNAUTHORIZED_DETAIL))


def api(bucket: str = "default", status: int = 200) -> Callable[[Handler], Callable[[Request], Awaitable[Response]]]:
    """Wrap a handler: authenticate (401), count in the bucket of the key's budget (429 with honest
    Retry-After), record stats, and turn ApiError or any unexpected exception into a JSON:API error document.
    Counting rule: every authenticated request to a known route counts; 401s count nowhere (no key)."""

    def wrap(fn: Handler) -> Callable[[Request], Awaitable[Response]]:
        @functools.wraps(fn)
        async def endpoint(request: Request) -> Response:
            state: SandboxState = request.app.state.sandbox
            principal = state.keys.authenticate(request.headers.get("authorization"))
            if principal is None:
                state.stats.denied()
                return unauthorized()
            route = f"{request.method} {request.scope['route'].path}" if "route" in request.scope else request.url.path
            retry_after = state.limiter.hit(principal.budget, bucket)
            if retry_after is not None:
                state.stats.rate_limited(principal, bucket)
                return error_response(ApiError(429, [{"status": "429", "title": "Too Many Requests",
                                                      "detail": bucket_detail(bucket)}],
                                               {"Retry-After": str(retry_after)}))
            state.stats.request(principal, bucket, route)
            try:
                result = await fn(Ctx(request, state, principal, state.clock.now()))
            except ClientDisconnect:  # killed or dropped mid-upload: nobody is left to answer
                state.stats.abandon(route)
                return Response(status_code=400)
            except ApiError as exc:
                return error_response(exc)
            except ValidationIssue as exc:  # the world refused (carrier semantics): a 422 with its pointer
                return error_response(ApiError(422, [error(422, exc.title, exc.detail, pointer=exc.pointer,
                                                           code=exc.code)]))
            except Exception:
                log.exception("unhandled error on %s", route)
                return error_response(api_error(500, "Internal Server Error"))
            return result if isinstance(result, Response) else ApiResponse(result, status_code=status)

        return endpoint

    return wrap
