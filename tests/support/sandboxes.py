"""Sandboxes for the tests: the keys, seed, size and instant every sandbox starts from, starting one in this
process, and the sandbox's control endpoints (its clock, faults and counters) and raw API reads."""

from __future__ import annotations

import os
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests

from tests.support import REPO

FULL_KEY = "sbx_test_full_5f2b8c1d9e7a4b3c"
FULL_KEY_2 = "sbx_test_full_second_77aa11bb"
BASIC_KEY = "sbx_test_basic_0a9b8c7d6e5f"
REVOKED_KEY = "sbx_test_revoked_1122334455"
SEED = 7
SHIPMENTS = 60
# Every sandbox a test starts begins at this instant, never at "now": the simulated world follows its clock
# (holds appear and clear, vessels sail), so a world started at the wall clock differs from day to day.
SANDBOX_START = datetime(2026, 11, 1, tzinfo=UTC)
# Limits no test reaches unless it sets its own.
GENEROUS_LIMITS = {"default": 100_000, "tracking_requests_create": 100_000, "infer_number": 100_000, "refresh": 100_000}
# The suite's shared world: the session sandbox and every test's own copy of it (`own_sandbox`) are this world,
# frozen at SANDBOX_START (only a test that owns its copy moves the clock), with limits no sync reaches; a lake
# synced from one of them is the lake any of them would give (`tests.support.shared`).
FROZEN_WORLD = {"speed": 0.0, "limits": GENEROUS_LIMITS}
# The world watched over time (the `history` fixture): a bigger account whose frozen clock starts 75 days
# before SANDBOX_START and is moved 5 days between 16 syncs, so that the syncs see each arrival's ETA change
# (over 50 arrivals with 3 versions or more) and its holds, fees and last free days come and go.
HISTORY_WORLD = {**FROZEN_WORLD, "shipments": 200, "start": SANDBOX_START - timedelta(days=75)}
HISTORY_SYNCS, HISTORY_STEP_SECONDS = 16, 5 * 86400


def shared_dir() -> Path:
    """The shared reference dir: `<repo>/../shared`, or $OCEAN_TRACKING_SHARED_DIR."""
    env = os.environ.get("OCEAN_TRACKING_SHARED_DIR")
    return Path(env) if env else REPO.parent / "shared"


def sandbox_settings(**overrides: Any):
    """The settings of a test sandbox: the suite's keys, seed, size and start instant, and otherwise the
    sandbox's own defaults (the live service's limits, a clock at real speed, no faults); `overrides` change
    any of them (`**FROZEN_WORLD` for the suite's shared world)."""
    from sandbox.config import Settings

    base = dict(host="127.0.0.1", port=0, seed=SEED, shipments=SHIPMENTS, api_keys=[FULL_KEY, FULL_KEY_2],
                no_routing_keys=[BASIC_KEY], revoked_keys=[REVOKED_KEY], signing_secret="test-secret",
                start=SANDBOX_START)
    base.update(overrides)
    return Settings(**base)


def sandbox_server(**overrides: Any):
    """A sandbox server of this process on a free loopback port (`sandbox_settings(**overrides)`), not started
    yet: `with sandbox_server(...) as server:` starts it and stops it at the end of the block."""
    from sandbox.server import SandboxServer
    from sandbox.world import SimClock, World

    settings = sandbox_settings(**overrides)
    start = settings.start_time()
    return SandboxServer(settings, World(settings.seed, settings.shipments, start), SimClock(start, settings.speed))


def start_sandbox(**overrides: Any):
    """`sandbox_server(**overrides)`, started; the caller stops it (`server.stop()`)."""
    return sandbox_server(**overrides).start()


def advance_clock(server, seconds: float) -> None:
    """Move the sandbox's simulated clock forward."""
    response = requests.post(f"{server.root_url}/_sandbox/clock", json={"advance_seconds": seconds}, timeout=10)
    response.raise_for_status()


def set_faults(server, profile: str, rate: float = 1.0, seed: int = 0, **extra: Any) -> None:
    """Switch the sandbox's fault profile at runtime (control endpoint, never faulted itself)."""
    response = requests.post(f"{server.root_url}/_sandbox/faults",
                             json={"profile": profile, "rate": rate, "seed": seed, **extra}, timeout=10)
    response.raise_for_status()


def sandbox_stats(server) -> dict[str, Any]:
    """The sandbox's own counters (requests per key fingerprint and bucket, per route, 429s, faults)."""
    return requests.get(f"{server.root_url}/_sandbox/stats", timeout=10).json()


def routes(server) -> dict[str, int]:
    """Requests the sandbox handled per route (injected faults never reach a handler, so a route count is
    the number of times the service really processed that call)."""
    return sandbox_stats(server)["requests_by_route"]


def requests_served(server) -> int:
    """Requests the sandbox received so far, under every key and bucket."""
    return sum(sum(buckets.values()) for buckets in sandbox_stats(server)["requests_by_key"].values())


def api_get(server, path: str, key: str = FULL_KEY, **params: Any) -> dict:
    """A raw GET on the sandbox API (independent of the client under test)."""
    response = requests.get(f"{server.base_url}{path}", params=params,
                            headers={"Authorization": f"Token {key}"}, timeout=10)
    response.raise_for_status()
    return response.json()


def api_total(server, path: str, key: str = FULL_KEY) -> int:
    """The service's own count of a list endpoint, read from `meta.total`."""
    return api_get(server, path, key, **{"page[size]": 1})["meta"]["total"]


def tracking_count(server, number: str) -> int:
    """How many tracking requests the service holds for one request_number."""
    return api_get(server, "/tracking_requests", **{"filter[request_number]": number})["meta"]["total"]


def set_routes(server, routes: list[dict]) -> None:
    """Replace the sandbox's persistent route faults."""
    requests.post(f"{server.root_url}/_sandbox/faults", json={"routes": routes}, timeout=10).raise_for_status()


def first_container(server) -> str:
    """The id of one container of the account."""
    return api_get(server, "/containers", **{"page[size]": 1})["data"][0]["id"]


def deliver_webhooks(server) -> dict:
    """Have the sandbox look for world changes now and deliver their notifications (once each)."""
    response = requests.post(f"{server.root_url}/_sandbox/webhooks/tick", timeout=60)
    response.raise_for_status()
    return response.json()
