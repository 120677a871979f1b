"""Shared worlds for the world-model tests (module construction is cheap; rows are lazy)."""

from datetime import UTC, datetime

import pytest

from sandbox.world import World

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(scope="session")
def start() -> datetime:
    return START


@pytest.fixture(scope="session")
def world() -> World:
    return World(seed=1234, shipments=600, start=START)


@pytest.fixture()
def fresh_world() -> World:
    """A world nobody else mutated (for overlay tests)."""
    return World(seed=99, shipments=200, start=START)
