"""The webhook tests' journal locations: every journal test runs on both backends, a SQLite file and a real
PostgreSQL database (the session's server, `tests.support.postgres`, started only when a PostgreSQL case runs)."""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(params=["sqlite", "postgresql"])
def journal_location(request: pytest.FixtureRequest, tmp_path: Path) -> Path | str:
    """Where a test's journal lives: `tmp_path/journal.sqlite`, or the URL of a fresh PostgreSQL database
    (password included, as an operator would configure it)."""
    if request.param == "sqlite":
        return tmp_path / "journal.sqlite"
    return request.getfixturevalue("postgres_database").dsn
