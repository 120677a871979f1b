"""The client tests' fixtures: a scripted HTTP server on loopback and clients pointed at it."""

from __future__ import annotations

from typing import Any

import pytest

from tests.support.scripted import TEST_KEY, ScriptedServer


@pytest.fixture
def api_server():
    """A scripted server of the test's own (`tests.support.scripted.ScriptedServer`), closed after it."""
    server = ScriptedServer()
    yield server
    server.close()


@pytest.fixture
def make_client(api_server, tmp_path):
    """Build a client against the scripted server with fast retries and its own limiter file."""
    from pipelines.api.client import OceanTrackingClient
    from pipelines.api.config import load_settings

    made = []

    def make(**overrides: Any) -> OceanTrackingClient:
        options = {
            "max_attempts": 3,
            "backoff_factor": 0.01,
            "connect_timeout": 2.0,
            "read_timeout": 5.0,
            "limiter_path": tmp_path / "limiter.sqlite",
            **overrides,
        }
        client = OceanTrackingClient(load_settings(api_key=TEST_KEY, base_url=api_server.base_url, **options))
        made.append(client)
        return client

    yield make
    for client in made:
        client.close()
        client.limiter.close()
