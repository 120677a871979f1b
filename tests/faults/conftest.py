"""The fault tests' reference: what a fault-free sync of the suite's world loads."""

from __future__ import annotations

import pytest

from tests.support.syncs import SyncResult, snapshot


@pytest.fixture(scope="session")
def clean_snapshot(synced: SyncResult) -> dict[str, list[tuple]]:
    """The fault-free reference: every row of the shared `synced` lake (one sync of the frozen world), as
    `snapshot` orders it."""
    return snapshot(synced)
