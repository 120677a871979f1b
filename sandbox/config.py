"""Sandbox settings: one dataclass filled from the command line and `SANDBOX_*` environment variables."""

from __future__ import annotations

import argparse
import os
import secrets
from dataclasses import dataclass, field
from datetime import UTC, datetime

from .auth import KeyRing

DEFAULT_PORT = 8049
DEFAULT_LIMITS = {"default": 100, "tracking_requests_create": 100, "infer_number": 200, "refresh": 10}
FAULT_PROFILES = ("none", "5xx", "429", "slow", "reset", "truncated", "mixed")
ROUTE_BODIES = ("json", "html")


@dataclass(frozen=True)
class RouteRule:
    """One persistent fault: every /v2 request whose path matches the fnmatch glob `path` answers `status`
    with a JSON:API (`json`) or a proxy-style HTML (`html`) error body, the way the live service sometimes
    breaks one container's map for days. Validated on construction (ValueError)."""

    path: str
    status: int
    body: str = "json"

    def __post_init__(self) -> None:
        if not isinstance(self.path, str) or not self.path or self.path[0] not in "/*?[":
            raise ValueError(f"path must be a glob matched against the request path, such as "
                             f"'/v2/containers/*/map_geojson'; got {self.path!r}")
        if not isinstance(self.status, int) or isinstance(self.status, bool) or not 400 <= self.status <= 599:
            raise ValueError(f"status must be an integer within 400..599; got {self.status!r}")
        if self.body not in ROUTE_BODIES:
            raise ValueError(f"body must be one of {', '.join(ROUTE_BODIES)}; got {self.body!r}")

    @classmethod
    def parse(cls, spec: str) -> RouteRule:
        """A rule from the command-line form `PATTERN=STATUS[:json|:html]`."""
        pattern, sep, rest = spec.rpartition("=")
        status, _, body = rest.partition(":")
        if not sep or not status.strip().isdigit():
            raise ValueError(f"expected PATTERN=STATUS[:html], such as '/v2/containers/*/map_geojson=500'; "
                             f"got {spec!r}")
        return cls(pattern.strip(), int(status), body.strip() or "json")

    @classmethod
    def from_dict(cls, doc: object) -> RouteRule:
        """A rule from the control endpoint's `{"path", "status", "body"?}` object; unknown keys are refused
        so that a misspelt key cannot silently fall back to a default."""
        if not isinstance(doc, dict):
            raise ValueError(f"each rule must be an object with path, status and optional body; got {doc!r}")
        unknown = set(doc) - {"path", "status", "body"}
        if unknown:
            raise ValueError(f"unknown rule keys {sorted(unknown)}; allowed: path, status, body")
        if "path" not in doc or "status" not in doc:
            raise ValueError("each rule needs path and status")
        return cls(doc["path"], doc["status"], doc.get("body", "json"))

    def as_dict(self) -> dict:
        """The control endpoint's JSON form."""
        return {"path": self.path, "status": self.status, "body": self.body}


@dataclass
class Settings:
    """Everything the app needs to start; defaults mirror the live service's published limits."""

    host: str = "127.0.0.1"
    port: int = DEFAULT_PORT
    seed: int = 49
    shipments: int = 500
    api_keys: list[str] = field(default_factory=list)
    no_routing_keys: list[str] = field(default_factory=list)
    revoked_keys: list[str] = field(default_factory=list)
    account_keys: list[tuple[str, ...]] = field(default_factory=list)  # one group of keys per extra account
    rate_window: float = 60.0
    limits: dict[str, int] = field(default_factory=lambda: dict(DEFAULT_LIMITS))
    faults: str = "none"
    fault_rate: float = 0.1
    fault_seed: int = 0
    fault_delay: float = 35.0
    fail_routes: list[RouteRule] = field(default_factory=list)
    speed: float = 1.0
    start: datetime | None = None
    access_log: bool = False
    webhook_tick_seconds: float = 0.5   # real seconds between webhook ticks (0: only POST /_sandbox/webhooks/tick)
    signing_secret: str = field(default_factory=lambda: secrets.token_hex(32))

    def ensure_key(self) -> None:
        """Generate one printable full-entitlement key when none was given, so the sandbox is usable."""
        if not self.api_keys:
            self.api_keys.append("sbx_" + secrets.token_hex(16))

    def key_ring(self) -> KeyRing:
        """The keys as the app authenticates them (ValueError when a key is given to two accounts)."""
        return KeyRing(self.api_keys, self.no_routing_keys, self.revoked_keys, self.account_keys)

    def start_time(self) -> datetime:
        """The simulated start instant (tz-aware UTC); `now` when not configured."""
        return self.start or datetime.now(UTC)


def _env(name: str, default: str | None = None) -> str | None:
    return os.environ.get(f"SANDBOX_{name}", default)


def _env_list(name: str) -> list[str]:
    raw = _env(name) or ""
    return [k for k in (p.strip() for p in raw.split(",")) if k]


def parse_iso(value: str) -> datetime:
    """Parse an ISO 8601 instant; naive values are taken as UTC (the service's system timestamps are UTC)."""
    dt = datetime.fromisoformat(value.replace("Z", "+00:00"))
    return dt if dt.tzinfo else dt.replace(tzinfo=UTC)


def _account_group(value: str) -> tuple[str, ...]:
    """One `--account-key` value: the comma-separated keys of one extra account."""
    keys = tuple(k for k in (p.strip() for p in value.split(",")) if k)
    if not keys:
        raise argparse.ArgumentTypeError("--account-key needs at least one key (KEY[,KEY...])")
    return keys


def _env_account_groups() -> list[tuple[str, ...]]:
    """SANDBOX_ACCOUNT_KEYS: accounts separated by `;`, the keys of one account by `,`."""
    return [_account_group(group) for group in (_env("ACCOUNT_KEYS") or "").split(";") if group.strip()]


def _shipments(value: str) -> int:
    n = int(value)
    if not 50 <= n <= 100_000:
        raise argparse.ArgumentTypeError("--shipments must be within 50..100000")
    return n


def _fail_route(value: str) -> RouteRule:
    try:
        return RouteRule.parse(value)
    except ValueError as exc:
        raise argparse.ArgumentTypeError(str(exc)) from None


def build_parser() -> argparse.ArgumentParser:
    """The `python -m sandbox` argument parser; every option says what it does and falls back to the SANDBOX_*
    variable its help names."""
    p = argparse.ArgumentParser(prog="python -m sandbox", description="Local Terminal49 API v2 simulator")
    p.add_argument("--host", default=_env("HOST", "127.0.0.1"),
                   help="address to listen on (default %(default)s; SANDBOX_HOST)")
    p.add_argument("--port", type=int, default=int(_env("PORT", str(DEFAULT_PORT))),
                   help="port to listen on, 0 for a free one (default %(default)s; SANDBOX_PORT)")
    p.add_argument("--seed", type=int, default=int(_env("SEED", "49")),
                   help="seed of the simulated world: the same seed and --shipments build the same shipments, "
                   "containers and events (default %(default)s; SANDBOX_SEED)")
    p.add_argument("--shipments", type=_shipments, default=_shipments(_env("SHIPMENTS", "500")),
                   help="how many shipments the world holds, 50..100000 (default %(default)s; SANDBOX_SHIPMENTS)")
    p.add_argument("--api-key", action="append", default=None,
                   help="a key with full entitlements (repeatable; SANDBOX_API_KEYS, comma-separated); none "
                   "given: one is generated and printed")
    p.add_argument("--api-key-no-routing", action="append", default=None,
                   help="a key of a basic account, without routing data (repeatable; SANDBOX_API_KEYS_NO_ROUTING)")
    p.add_argument("--revoked-key", action="append", default=None,
                   help="a key the sandbox refuses with 401, as a revoked key (repeatable; SANDBOX_REVOKED_KEYS)")
    p.add_argument("--account-key", type=_account_group, action="append", default=None, metavar="KEY[,KEY...]",
                   help="an account of its own (repeatable; the 2nd, 3rd, ... are account-2, account-3, ...): its "
                   "own seeded shipments and rate budget, shared by the comma-separated keys "
                   "(SANDBOX_ACCOUNT_KEYS: accounts separated by ';')")
    p.add_argument("--rate-window", type=float, default=float(_env("RATE_WINDOW", "60")), metavar="SECONDS",
                   help="the rolling window each key's (or account's) request budgets are counted in (100 "
                   "requests for most routes, as live); a short one makes rate-limit tests fast (default "
                   "%(default)s; SANDBOX_RATE_WINDOW)")
    p.add_argument("--faults", choices=FAULT_PROFILES, default=_env("FAULTS", "none"),
                   help="random failures injected into /v2 answers: 5xx bursts, 429 storms with Retry-After, slow "
                   "answers, connection resets, truncated bodies, or a mix of them (default %(default)s; "
                   "SANDBOX_FAULTS)")
    p.add_argument("--fault-rate", type=float, default=float(_env("FAULT_RATE", "0.1")),
                   help="share of requests, 0..1, that start a fault of the --faults profile (default %(default)s; "
                   "SANDBOX_FAULT_RATE)")
    p.add_argument("--fault-seed", type=int, default=int(_env("FAULT_SEED", "0")),
                   help="seed of the fault injection: the same seed and request order fail the same requests "
                   "(default %(default)s; SANDBOX_FAULT_SEED)")
    p.add_argument("--fault-delay", type=float, default=float(_env("FAULT_DELAY", "35")), metavar="SECONDS",
                   help="how long a slow fault holds its request before answering (default %(default)s; "
                   "SANDBOX_FAULT_DELAY)")
    p.add_argument("--fail-route", type=_fail_route, action="append", default=None,
                   metavar="PATTERN=STATUS[:html]", help="every /v2 request whose path matches the glob answers "
                   "STATUS (repeatable; SANDBOX_FAIL_ROUTES takes a comma-separated list)")
    p.add_argument("--speed", type=float, default=float(_env("SPEED", "1.0")), metavar="FACTOR",
                   help="simulated seconds per real second: shipments sail, holds clear and events happen this "
                   "much faster than real time; 0 stops the clock (move it with POST /_sandbox/clock) "
                   "(default %(default)s; SANDBOX_SPEED)")
    p.add_argument("--start", type=parse_iso, default=parse_iso(_env("START")) if _env("START") else None,
                   metavar="ISO", help="the simulated instant the clock starts at, ISO 8601 (UTC without an "
                   "offset); unset: now. Fix it for a world that is the same every day (SANDBOX_START)")
    p.add_argument("--webhook-tick", type=float, default=float(_env("WEBHOOK_TICK", "0.5")), metavar="SECONDS",
                   help="real seconds between webhook ticks (0: only on POST /_sandbox/webhooks/tick) "
                   "(default %(default)s; SANDBOX_WEBHOOK_TICK)")
    p.add_argument("--access-log", action="store_true", default=_env("ACCESS_LOG") == "1",
                   help="log one line per request (SANDBOX_ACCESS_LOG=1)")
    return p


def settings_from_args(argv: list[str] | None = None) -> Settings:
    """Build Settings from argv (None: sys.argv) plus environment; ensures at least one key exists."""
    parser = build_parser()
    a = parser.parse_args(argv)
    try:
        fail_routes = a.fail_route or [RouteRule.parse(v) for v in _env_list("FAIL_ROUTES")]
    except ValueError as exc:
        parser.error(f"SANDBOX_FAIL_ROUTES: {exc}")
    try:
        account_keys = a.account_key or _env_account_groups()
    except argparse.ArgumentTypeError as exc:
        parser.error(f"SANDBOX_ACCOUNT_KEYS: {exc}")
    s = Settings(
        host=a.host, port=a.port, seed=a.seed, shipments=a.shipments,
        api_keys=a.api_key or _env_list("API_KEYS"),
        no_routing_keys=a.api_key_no_routing or _env_list("API_KEYS_NO_ROUTING"),
        revoked_keys=a.revoked_key or _env_list("REVOKED_KEYS"), account_keys=account_keys,
        rate_window=a.rate_window, faults=a.faults, fault_rate=a.fault_rate, fault_seed=a.fault_seed,
        fault_delay=a.fault_delay, fail_routes=fail_routes, speed=a.speed, start=a.start,
        access_log=a.access_log, webhook_tick_seconds=a.webhook_tick,
    )
    s.ensure_key()
    try:
        s.key_ring()
    except ValueError as exc:
        parser.error(str(exc))
    return s
