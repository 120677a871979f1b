"""Registering the webhook: the secret goes into the secrets file (other keys and comments kept, mode 0600)
and is never printed; an existing webhook for the URL is updated, else one is created (scripted server)."""

from __future__ import annotations

import json
import stat
from pathlib import Path

import pytest
import tomlkit

from pipelines.cli import commands as cli_commands
from pipelines.cli import main
from pipelines.errors import ConfigurationError
from pipelines.webhooks import WebhookSecret
from pipelines.webhooks.receiver import CATALOG_EVENTS, Registration, register_webhook, store_secret
from tests.support.scripted import Reply

SECRET = "whsec_registered_0a1b2c3d4e5f"
URL = "https://example.com/webhooks/terminal49"
EXISTING = """# the project's secrets
[sources.ocean_tracking]
api_key = "t49-key"  # from the developer portal

[destination.postgres.credentials]
password = "pw"
"""


def test_the_secret_joins_an_existing_file_keeping_its_keys_and_comments(tmp_path: Path):
    path = tmp_path / "secrets.toml"
    path.write_text(EXISTING)
    path.chmod(0o644)
    assert store_secret(path, WebhookSecret(SECRET)) == path
    text = path.read_text()
    assert text.startswith(EXISTING.split("\n\n")[0])  # the section, its comments and key as they were
    assert "# from the developer portal" in text and "# the project's secrets" in text
    parsed = tomlkit.parse(text)
    assert parsed["sources"]["ocean_tracking"]["webhook_secret"] == SECRET
    assert parsed["sources"]["ocean_tracking"]["api_key"] == "t49-key"
    assert parsed["destination"]["postgres"]["credentials"]["password"] == "pw"
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    store_secret(path, "rotated")
    assert tomlkit.parse(path.read_text())["sources"]["ocean_tracking"]["webhook_secret"] == "rotated"
    assert list(tmp_path.iterdir()) == [path]  # no temporary file left behind


def test_a_missing_file_is_created_with_mode_0600(tmp_path: Path):
    path = tmp_path / ".dlt" / "secrets.toml"
    store_secret(path, SECRET)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    assert tomlkit.parse(path.read_text()) == {"sources": {"ocean_tracking": {"webhook_secret": SECRET}}}
    other = tmp_path / "other.toml"
    other.write_text('[sources]\nlog_level = "info"\n')
    store_secret(other, SECRET)
    assert tomlkit.parse(other.read_text())["sources"] == {"log_level": "info",
                                                             "ocean_tracking": {"webhook_secret": SECRET}}


def test_a_malformed_file_is_refused_and_left_alone(tmp_path: Path):
    path = tmp_path / "secrets.toml"
    path.write_text("[sources.ocean_tracking\napi_key = 1\n")
    with pytest.raises(ConfigurationError, match="malformed") as caught:
        store_secret(path, SECRET)
    assert SECRET not in str(caught.value)
    assert path.read_text() == "[sources.ocean_tracking\napi_key = 1\n"


def test_register_prints_one_line_without_the_secret(tmp_path: Path, monkeypatch, capsys):
    path = tmp_path / "secrets.toml"
    path.write_text(EXISTING)
    seen = {}

    def fake_register(client, url, events):
        seen.update(url=url, events=events)
        return Registration("wh-1", url, ("container.updated", "container.created"), True, WebhookSecret(SECRET))

    monkeypatch.setattr(cli_commands, "register_webhook", fake_register)
    monkeypatch.setenv("RUNTIME__LOG_LEVEL", "ERROR")  # main() would set it for the rest of the session
    code = main(["webhooks", "register", "--url", URL, "--events", "container.updated,container.created",
                 "--secrets-file", str(path), "--api-key", "t49-test-key"])
    out = capsys.readouterr()
    assert code == 0
    assert seen == {"url": URL, "events": ["container.updated", "container.created"]}
    assert SECRET not in out.out + out.err
    assert len(out.out.strip().splitlines()) == 1
    assert "wh-1" in out.out and URL in out.out and "2 events" in out.out and str(path) in out.out
    assert tomlkit.parse(path.read_text())["sources"]["ocean_tracking"]["webhook_secret"] == SECRET
    assert repr(Registration("wh-1", URL, (), True, WebhookSecret(SECRET))).count(SECRET) == 0


def _webhook(ident: str, url: str, secret: str | None = None) -> dict:
    attributes = {"url": url, "active": False, "events": ["container.updated"]}
    if secret:
        attributes["secret"] = secret
    return {"id": ident, "type": "webhook", "attributes": attributes}


def test_an_existing_webhook_is_patched_and_keeps_its_secret(api_server, make_client):
    api_server.script("GET", "/webhooks", Reply(200, {"data": [_webhook("wh-0", "https://other.example/x"),
                                                               _webhook("wh-1", URL, SECRET)], "links": {}}))
    api_server.script("PATCH", "/webhooks/wh-1", Reply(200, {"data": _webhook("wh-1", URL)}))
    done = register_webhook(make_client(), URL, ["container.updated", " container.created", "container.updated"])
    assert (done.webhook_id, done.created, done.secret.reveal()) == ("wh-1", False, SECRET)
    assert done.events == ("container.updated", "container.created")
    [patch] = api_server.seen("PATCH")
    assert json.loads(patch.body) == {"data": {"id": "wh-1", "type": "webhook", "attributes": {
        "events": ["container.updated", "container.created"], "active": True}}}
    assert api_server.seen("POST") == []


def test_a_new_webhook_is_created_for_every_event_by_default(api_server, make_client):
    api_server.script("GET", "/webhooks", Reply(200, {"data": [], "links": {}}))
    categories = {"data": [{"type": "webhook_event_category", "attributes": {"name": "container", "events": [
        {"name": "container.updated"}, {"name": "container.created"}]}}]}
    api_server.script("GET", "/webhooks/events", Reply(200, categories))
    api_server.script("POST", "/webhooks", Reply(201, {"data": _webhook("wh-9", URL, SECRET)}))
    done = register_webhook(make_client(), URL)
    assert (done.webhook_id, done.created, done.secret.reveal()) == ("wh-9", True, SECRET)
    [post] = api_server.seen("POST")
    assert json.loads(post.body)["data"]["attributes"] == {
        "url": URL, "active": True, "events": ["container.updated", "container.created"]}


def test_without_the_events_endpoint_the_catalog_is_used(api_server, make_client):
    api_server.script("GET", "/webhooks", Reply(200, {"data": [], "links": {}}))
    api_server.script("POST", "/webhooks", Reply(201, {"data": _webhook("wh-9", URL, SECRET)}))
    done = register_webhook(make_client(), URL)  # GET /webhooks/events: the HTML 404 of an unknown route
    assert done.events == CATALOG_EVENTS and len(CATALOG_EVENTS) == len(set(CATALOG_EVENTS)) == 43
