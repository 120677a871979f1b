"""What a dataset says to a key it does not answer to (`pipelines.sync.claim_dataset`'s messages): pure units.
The whole flow, a key checked with the service before a dataset records it, is tests/e2e/test_accounts.py."""

from __future__ import annotations

from pipelines.sync import another_key_message, is_loopback

REAL = "https://api.terminal49.com"


def test_a_dataset_a_sandbox_loaded_is_named_as_such_when_a_real_key_meets_it():
    line = another_key_message("ocean_tracking", "aaaaaaaaaaaa", "http://127.0.0.1:41234", "bbbbbbbbbbbb", REAL)

    assert line.startswith("Dataset ocean_tracking was loaded from http://127.0.0.1:41234 (a local sandbox")
    assert f"not from {REAL} with this one (sha256:bbbbbbbbbbbb)" in line and "--dataset NAME" in line
    assert "--adopt-new-key" not in line, "adopting a real key into a sandbox's data would mix the two"


def test_another_key_of_the_same_service_may_be_another_account_or_a_rotated_key():
    for loaded_from in (REAL, None):  # None: a dataset loaded before the origin was recorded
        line = another_key_message("ocean_tracking", "aaaaaaaaaaaa", loaded_from, "bbbbbbbbbbbb", REAL)
        assert "likely holds another account" in line and "--adopt-new-key" in line and "sandbox" not in line


def test_loopback_origins_are_this_machine():
    assert all(map(is_loopback, ("http://127.0.0.1:8080", "http://localhost:80", "http://[::1]:9000")))
    assert not any(map(is_loopback, (REAL, "http://10.0.0.5:8080", "http://sandbox.internal")))
