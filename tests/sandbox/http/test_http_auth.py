"""Auth: only `Authorization: Token <key>`; every other form is a 401 JSON:API error."""

from __future__ import annotations

import pytest
import requests

from tests.support.sandbox_http import JSONAPI, Client, errors, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY, REVOKED_KEY

BAD_HEADERS = [
    None,
    f"Bearer {FULL_KEY}",
    f'Token "{FULL_KEY}"',
    f"Token  {FULL_KEY}",
    f"Token {FULL_KEY[:-3]}",
    f"Token {REVOKED_KEY}",
    "Token not-a-key",
    f"token {FULL_KEY}",
    FULL_KEY,
    "Token ",
]


@pytest.mark.parametrize("header", BAD_HEADERS, ids=lambda h: repr(h)[:30])
def test_bad_auth_is_401(sandbox, header):
    resp = requests.get(sandbox.base_url + "/shipments", headers={"Authorization": header} if header else {},
                        timeout=10)
    (err,) = errors(resp, 401)
    assert err["title"] == "Unauthorized"
    assert "API key could not be verified" in err["detail"]
    assert FULL_KEY not in resp.text


def test_valid_token_and_content_type(sandbox):
    for key in (FULL_KEY, BASIC_KEY):
        body = ok(Client(sandbox.base_url, key).get("/shipments"))
        assert isinstance(body["data"], list)


def test_accounts_are_scoped(sandbox):
    full = ok(Client(sandbox.base_url, FULL_KEY).get("/shipments"))
    basic = ok(Client(sandbox.base_url, BASIC_KEY).get("/shipments"))
    assert full["meta"]["total"] != basic["meta"]["total"] or {r["id"] for r in full["data"]}.isdisjoint(
        r["id"] for r in basic["data"])
    sid = basic["data"][0]["id"]
    errors(Client(sandbox.base_url, FULL_KEY).get(f"/shipments/{sid}"), 404)


def test_every_api_route_needs_auth(sandbox):
    anon = Client(sandbox.base_url, None)
    for method, path in [("GET", "/containers"), ("GET", "/parties"), ("POST", "/tracking_requests"),
                         ("GET", "/shipping_lines"), ("POST", "/rails/active_storage/direct_uploads"),
                         ("GET", "/documents"), ("PATCH", "/containers/x/refresh")]:
        resp = anon.s.request(method, anon.url(path), json={}, timeout=10)
        assert resp.status_code == 401, (method, path)
        assert resp.headers["content-type"].startswith(JSONAPI)


def test_keys_never_in_stats(sandbox):
    Client(sandbox.base_url, FULL_KEY).get("/shipments")
    text = requests.get(sandbox.base_url.removesuffix("/v2") + "/_sandbox/stats", timeout=10).text
    assert FULL_KEY not in text and "key_" in text
