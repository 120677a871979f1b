"""The key: validated before any request, and never in logs, exception text or reprs."""

from __future__ import annotations

import logging
import pickle

import pytest

from pipelines import errors
from pipelines.api.config import ApiKey, load_settings, validate_api_key
from tests.support.scripted import TEST_KEY, Reply

SECRET = "zq81-very-secret-key-55aa"


@pytest.mark.parametrize(
    ("raw", "says"),
    [
        ("", "missing or empty"),
        (None, "missing or empty"),
        (f'"{SECRET}"', "quotes"),
        (f"'{SECRET}'", "quotes"),
        (f" {SECRET}", "whitespace"),
        (f"{SECRET}\n", "whitespace"),
        (f"Token {SECRET}", "scheme word"),
        (f"Bearer {SECRET}", "scheme word"),
        (f"{SECRET[:6]} {SECRET[6:]}", "whitespace"),
        (12345, "must be a string"),
    ],
)
def test_bad_keys_are_refused_without_echo(raw, says):
    with pytest.raises(errors.ConfigurationError) as info:
        validate_api_key(raw)
    text = str(info.value)
    assert says in text
    assert "SOURCES__OCEAN_TRACKING__API_KEY" in text or "must be a string" in text
    assert SECRET not in text and SECRET[:6] not in text


def test_key_masks_itself():
    key = validate_api_key(SECRET)
    for shown in (repr(key), str(key), f"{key}", repr(load_settings(api_key=SECRET))):
        assert SECRET not in shown
    assert key.reveal() == SECRET and key == ApiKey(SECRET)


def test_settings_read_the_dlt_way(monkeypatch):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__API_KEY", SECRET)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BASE_URL", "http://127.0.0.1:9/v2/")
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS", "6")
    settings = load_settings()
    assert settings.api_key.reveal() == SECRET
    assert settings.base_url == "http://127.0.0.1:9/v2"
    assert settings.app_url == "https://app.terminal49.com"
    assert settings.rate_window_seconds == 6.0
    assert load_settings(api_key="other", base_url="http://x/v2").api_key.reveal() == "other"


def test_bad_base_url_is_a_configuration_error():
    with pytest.raises(errors.ConfigurationError, match="absolute"):
        load_settings(api_key=SECRET, base_url="api.terminal49.com/v2")


def test_key_never_in_logs_or_errors(api_server, make_client, caplog):
    caplog.set_level(logging.DEBUG)
    api_server.script("GET", "/shipments", Reply(401, {"errors": [{"status": "401", "title": "Unauthorized"}]}))
    api_server.script("GET", "/custom_fields", *[Reply(500, b"")] * 3)
    api_server.script("POST", "/tracking_requests", Reply(drop=True))
    client = make_client()
    texts = [repr(client), repr(client.settings), repr(client._auth)]
    for call in (
        lambda: client.get("shipments"),
        lambda: client.get("custom_fields"),
        lambda: client.get("nothing/here"),
        lambda: client.post("tracking_requests", {"data": {}}),
    ):
        with pytest.raises(errors.ApiError) as info:
            call()
        texts += [str(info.value), repr(info.value), repr(info.value.__cause__), repr(info.value.__context__)]
    texts += [record.getMessage() for record in caplog.records]
    texts.append(repr(client.stats()))
    assert caplog.records, "the client should have logged something"
    assert api_server.seen()[0].headers["Authorization"] == f"Token {TEST_KEY}"
    for text in texts:
        assert TEST_KEY not in text


def test_errors_pickle_without_the_key(api_server, make_client):
    api_server.script("GET", "/shipments", Reply(401, {"errors": [{"status": "401", "title": "Unauthorized"}]}))
    with pytest.raises(errors.AuthenticationError) as info:
        make_client().get("shipments")
    assert TEST_KEY.encode() not in pickle.dumps(info.value)
