"""Fixtures every fault module shares. `clean_snapshot`, the fault-free reference, is defined next to
`snapshot` in test_sync_faults.py; exposing it here lets a module request it without importing it."""

from tests.faults.test_sync_faults import clean_snapshot  # noqa: F401 (a fixture)
