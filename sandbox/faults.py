"""Seeded fault injection for /v2 routes (never /_sandbox/): 5xx bursts, 429 storms with honest
Retry-After, slow responses, connection resets and truncated bodies. Runs repeat for a given seed and
request sequence. Route rules come first: a path matching one fails every time, with no randomness."""

from __future__ import annotations

import asyncio
import json
import math
import random
import socket
import struct
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from fnmatch import fnmatchcase
from http import HTTPStatus

from .config import FAULT_PROFILES, RouteRule

KINDS = ("5xx", "429", "slow", "reset", "truncated")
MAX_DELAY = 3600.0  # seconds a "slow" fault may hold a request; beyond it the sandbox would look hung
_5XX = {500: "Internal Server Error", 502: "Bad Gateway", 503: "Service Unavailable"}


@dataclass(frozen=True)
class Fault:
    """One decision: which fault, and its parameters."""

    kind: str
    status: int = 0
    retry_after: int = 0
    delay: float = 0.0
    body: str = "json"


class FaultInjector:
    """Decides per request whether to inject a fault; thread-safe and reconfigurable at runtime."""

    def __init__(self, profile: str = "none", rate: float = 0.1, seed: int = 0, delay: float = 35.0,
                 clock: Callable[[], float] = time.monotonic, routes: Iterable[RouteRule] = ()) -> None:
        self._clock = clock
        self._lock = threading.Lock()
        self.routes: tuple[RouteRule, ...] = ()
        self.configure(profile, rate, seed, delay)
        self.set_routes(routes)

    def configure(self, profile: str, rate: float, seed: int, delay: float) -> None:
        """Switch profile/rate/seed/delay and reset the RNG and any burst or storm in progress."""
        if profile not in FAULT_PROFILES:
            raise ValueError(f"unknown fault profile {profile!r}; one of {', '.join(FAULT_PROFILES)}")
        if not 0.0 <= rate <= 1.0 or not 0 <= delay <= MAX_DELAY:
            raise ValueError(f"rate must be within 0..1 and delay within 0..{MAX_DELAY:g}")
        with self._lock:
            self.profile, self.rate, self.seed, self.delay = profile, float(rate), int(seed), float(delay)
            self._rng = random.Random(self.seed)
            self._burst = 0
            self._storm_until = 0.0
            self._quiet_until = 0.0

    def set_routes(self, routes: Iterable[RouteRule]) -> None:
        """Replace every route rule at once (empty: none); the random profile and its RNG are untouched."""
        rules = tuple(routes)
        if not all(isinstance(r, RouteRule) for r in rules):
            raise TypeError("routes must be RouteRule instances")
        with self._lock:
            self.routes = rules

    def describe(self) -> dict:
        """Current configuration, for the control endpoint."""
        with self._lock:
            return {"profile": self.profile, "rate": self.rate, "seed": self.seed, "delay": self.delay,
                    "routes": [r.as_dict() for r in self.routes]}

    def decide(self, path: str = "") -> Fault | None:
        """The fault for the next /v2 request to `path`, or None. The first route rule matching the path
        answers it without consulting the random profile (nor advancing its RNG). A 429 storm answers every
        request until it ends, then a quiet period at least as long guarantees that a retry after
        Retry-After seconds succeeds."""
        with self._lock:
            rule = next((r for r in self.routes if fnmatchcase(path, r.path)), None)
            if rule is not None:
                return Fault("route", rule.status, body=rule.body)
            if self.profile == "none":
                return None
            now = self._clock()
            if now < self._storm_until:
                return Fault("429", 429, retry_after=max(1, math.ceil(self._storm_until - now)))
            if now < self._quiet_until:
                return None
            if self._burst > 0:
                self._burst -= 1
                return Fault("5xx", self._rng.choice(list(_5XX)))
            if self._rng.random() >= self.rate:
                return None
            kind = self._rng.choice(KINDS) if self.profile == "mixed" else self.profile
            if kind == "5xx":
                self._burst = self._rng.randint(0, 2)
                return Fault("5xx", self._rng.choice(list(_5XX)))
            if kind == "429":
                duration = self._rng.uniform(1.0, 2.5)
                self._storm_until = now + duration
                self._quiet_until = self._storm_until + max(3.0, 2 * duration)
                return Fault("429", 429, retry_after=math.ceil(duration))
            if kind == "slow":
                return Fault("slow", delay=self.delay)
            return Fault(kind)


def _json(status: int, title: str, detail: str) -> bytes:
    return json.dumps({"errors": [{"status": str(status), "title": title, "detail": detail}]}).encode()


def _html(status: int, title: str) -> bytes:
    """A reverse proxy's bare error page (nginx's), as answered when the app behind it is unreachable."""
    return (f"<html>\r\n<head><title>{status} {title}</title></head>\r\n<body>\r\n<center><h1>{status} {title}"
            f"</h1></center>\r\n<hr><center>nginx</center>\r\n</body>\r\n</html>\r\n").encode()


def _reason(status: int) -> str:
    try:
        return HTTPStatus(status).phrase
    except ValueError:
        return "Error"


class FaultMiddleware:
    """ASGI middleware applying FaultInjector decisions to paths under /v2."""

    def __init__(self, app, injector: FaultInjector, on_fault: Callable[[str], None]) -> None:
        self.app, self.injector, self.on_fault = app, injector, on_fault

    async def __call__(self, scope, receive, send) -> None:
        if scope["type"] != "http" or not scope["path"].startswith("/v2"):
            return await self.app(scope, receive, send)
        fault = self.injector.decide(scope["path"])
        if fault is None:
            return await self.app(scope, receive, send)
        self.on_fault(fault.kind)
        if fault.kind == "route":
            title = _reason(fault.status)
            if fault.body == "html":
                return await _send(send, fault.status, _html(fault.status, title),
                                   content_type=b"text/html; charset=utf-8")
            return await _send(send, fault.status, _json(fault.status, title, "Simulated failure of this route."))
        if fault.kind == "5xx":
            return await _send(send, fault.status, _json(fault.status, _5XX[fault.status], "Simulated upstream failure."))
        if fault.kind == "429":
            from .ratelimit import bucket_detail
            return await _send(send, 429, _json(429, "Too Many Requests", bucket_detail("default")),
                               [(b"retry-after", str(fault.retry_after).encode())])
        if fault.kind == "slow":
            await asyncio.sleep(fault.delay)
            return await self.app(scope, receive, send)
        await _cut(self.app, scope, receive, send, reset=fault.kind == "reset")


async def _send(send, status: int, body: bytes, extra: list | None = None,
                content_type: bytes = b"application/vnd.api+json") -> None:
    headers = [(b"content-type", content_type), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers + (extra or [])})
    await send({"type": "http.response.body", "body": body})


async def _cut(app, scope, receive, send, *, reset: bool) -> None:
    """Serve the real response's headers (with its full Content-Length) and half its body, then close
    the connection: with an RST (`reset`) or a clean FIN (`truncated`)."""
    start: dict = {}
    chunks: list[bytes] = []

    async def capture(message) -> None:
        if message["type"] == "http.response.start":
            start.update(message)
        elif message["type"] == "http.response.body":
            chunks.append(message.get("body", b""))

    await app(scope, receive, capture)
    body = b"".join(chunks)
    headers = [(k, v) for k, v in start.get("headers", []) if k.lower() != b"content-length"]
    headers.append((b"content-length", str(len(body)).encode()))
    await send({"type": "http.response.start", "status": start.get("status", 200), "headers": headers})
    await send({"type": "http.response.body", "body": body[: len(body) // 2], "more_body": True})
    transport = getattr(getattr(receive, "__self__", None), "transport", None)
    if transport is None:
        raise ConnectionAbortedError("simulated connection fault")
    sock = transport.get_extra_info("socket")
    if reset and sock is not None:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    transport.close()
    for _ in range(3):
        await asyncio.sleep(0)
