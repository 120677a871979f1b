"""Fixtures the lake tests share, defined with the whole-flow helpers: a sandbox of the test's own with
a frozen clock."""

from tests.e2e.conftest import fresh_sandbox  # noqa: F401 (a fixture)
