"""Several accounts in one sandbox, over real HTTP: each `--account-key` group is an account of its own (its own
seeded shipments, overlays, webhooks and rate budget, shared by the group's keys), while the primary keys keep
the primary account and reference data stays shared. Servers run with speed 0 and no webhook tick thread; the
webhook test moves the clock and ticks through the control endpoints."""

from __future__ import annotations

import pytest
import requests

from sandbox.auth import fingerprint
from sandbox.config import settings_from_args
from sandbox.launcher import start_sandbox
from tests.support.sandbox_http import Client, RecordingReceiver, errors, ok
from tests.support.sandboxes import FULL_KEY, FULL_KEY_2, SANDBOX_START, SEED, SHIPMENTS

ACCOUNT_2 = "sbx_test_account_two_4d1c9a"           # account-2, first key
ACCOUNT_2B = "sbx_test_account_two_second_e83f02"   # account-2, second key: the same account and budget
ACCOUNT_3 = "sbx_test_account_three_7b26d5"         # account-3
GROUPS = [(ACCOUNT_2, ACCOUNT_2B), (ACCOUNT_3,)]
DAY = 86_400


@pytest.fixture
def srv(make_sandbox):
    return make_sandbox(account_keys=GROUPS, speed=0.0, webhook_tick_seconds=0)


def _rows(cl: Client, path: str) -> list[dict]:
    """Every row of a listing, page by page through `links.next`."""
    rows, url = [], f"{path}?page[size]=100"
    while url:
        body = ok(cl.get(url))
        rows.extend(body["data"])
        url = body.get("links", {}).get("next")
    return rows


def _stats(srv) -> dict:
    return requests.get(srv.root_url + "/_sandbox/stats", timeout=10).json()


def test_each_account_has_its_own_seeded_shipments(srv):
    keys = {"primary": FULL_KEY, "account-2": ACCOUNT_2, "account-3": ACCOUNT_3}
    shipments = {name: _rows(Client(srv.base_url, key), "/shipments") for name, key in keys.items()}
    containers = {name: _rows(Client(srv.base_url, key), "/containers") for name, key in keys.items()}
    ids = {name: {r["id"] for r in rows} for name, rows in shipments.items()}
    cids = {name: {r["id"] for r in rows} for name, rows in containers.items()}
    bls = {name: {r["attributes"]["bill_of_lading_number"] for r in rows} for name, rows in shipments.items()}

    assert len(ids["primary"]) == SHIPMENTS
    assert len({len(v) for v in ids.values()}) == 3, "this seed gives the three accounts three sizes"
    for a, b in [("primary", "account-2"), ("primary", "account-3"), ("account-2", "account-3")]:
        assert ids[a].isdisjoint(ids[b]) and cids[a].isdisjoint(cids[b]), (a, b)
        assert bls[a] != bls[b], (a, b)
    # a second key of an account reads the same account; the primary's second key still reads the primary
    assert _rows(Client(srv.base_url, ACCOUNT_2B), "/shipments") == shipments["account-2"]
    assert {r["id"] for r in _rows(Client(srv.base_url, FULL_KEY_2), "/shipments")} == ids["primary"]
    # another account's shipment is not there, as on the live service
    sid = shipments["account-2"][0]["id"]
    ok(Client(srv.base_url, ACCOUNT_2B).get(f"/shipments/{sid}"))
    errors(Client(srv.base_url, FULL_KEY).get(f"/shipments/{sid}"), 404)
    errors(Client(srv.base_url, ACCOUNT_3).get(f"/shipments/{sid}"), 404)
    # reference data is shared: the port an account-2 shipment discharges at reads the same for every key
    pod = shipments["account-2"][0]["relationships"]["port_of_discharge"]["data"]["id"]
    port = ok(Client(srv.base_url, ACCOUNT_2).get(f"/ports/{pod}"))
    assert ok(Client(srv.base_url, FULL_KEY).get(f"/ports/{pod}")) == port
    assert ok(Client(srv.base_url, ACCOUNT_3).get("/shipping_lines")) == ok(
        Client(srv.base_url, FULL_KEY).get("/shipping_lines"))
    health = requests.get(srv.root_url + "/_sandbox/health", timeout=10).json()
    assert set(health["accounts"]) == {"primary", "basic", "account-2", "account-3"}


def test_the_same_seed_gives_the_same_accounts(make_sandbox):
    first = make_sandbox(account_keys=GROUPS)
    # other keys in the same positions: accounts are named by position, never by key
    second = make_sandbox(account_keys=[("sbx_test_other_a",), ("sbx_test_other_b",)])
    assert _rows(Client(first.base_url, ACCOUNT_3), "/shipments") == _rows(
        Client(second.base_url, "sbx_test_other_b"), "/shipments")


def test_each_account_spends_its_own_budget_and_its_keys_share_it(make_sandbox):
    srv = make_sandbox(account_keys=GROUPS, rate_window=600)   # published limits: 100 a window
    a, a2 = Client(srv.base_url, ACCOUNT_2), Client(srv.base_url, ACCOUNT_2B)
    for i in range(100):
        ok((a if i % 2 else a2).get("/shipments?page[size]=1"))
    errors(a.get("/shipments?page[size]=1"), 429)
    errors(a2.get("/shipments?page[size]=1"), 429)       # the second key spends the same budget
    ok(Client(srv.base_url, ACCOUNT_3).get("/shipments?page[size]=1"))
    ok(Client(srv.base_url, FULL_KEY).get("/shipments?page[size]=1"))

    stats = _stats(srv)
    assert stats["requests_by_account"] == {"account-2": {"default": 100}, "account-3": {"default": 1},
                                            "primary": {"default": 1}}
    assert stats["rate_limited_by_account"] == {"account-2": {"default": 2}}
    assert stats["requests_by_key"][fingerprint(ACCOUNT_2)] == {"default": 50}
    assert stats["requests_by_key"][fingerprint(ACCOUNT_2B)] == {"default": 50}
    text = requests.get(srv.root_url + "/_sandbox/stats", timeout=10).text
    assert not any(key in text for key in (ACCOUNT_2, ACCOUNT_2B, ACCOUNT_3, FULL_KEY))


def test_writes_stay_in_their_account(srv):
    a, a2, b = (Client(srv.base_url, k) for k in (ACCOUNT_2, ACCOUNT_2B, ACCOUNT_3))
    primary = Client(srv.base_url, FULL_KEY)
    body = {"data": {"type": "tracking_request", "attributes": {
        "request_type": "bill_of_lading", "request_number": "MAEU221876618", "scac": "MAEU"}}}
    tr = ok(a.post("/tracking_requests", body), 201)["data"]
    assert ok(a2.get(f"/tracking_requests/{tr['id']}"))["data"]["id"] == tr["id"]
    for other in (b, primary):
        errors(other.get(f"/tracking_requests/{tr['id']}"), 404)
        assert ok(other.get("/tracking_requests?filter[request_number]=MAEU221876618"))["data"] == []

    party = ok(b.post("/parties", {"data": {"type": "party", "attributes": {"company_name": "Only Three Ltd"}}}),
               201)["data"]
    assert party["id"] in {p["id"] for p in _rows(b, "/parties")}
    assert party["id"] not in {p["id"] for p in _rows(a, "/parties")}
    errors(a.get(f"/parties/{party['id']}"), 404)

    hook = ok(a.post("/webhooks", {"data": {"type": "webhook", "attributes": {
        "url": "https://example.com/hook", "active": True}}}), 201)["data"]
    assert [h["id"] for h in ok(a2.get("/webhooks"))["data"]] == [hook["id"]]
    assert ok(b.get("/webhooks"))["data"] == [] and ok(primary.get("/webhooks"))["data"] == []


@pytest.mark.slow
def test_webhooks_are_sent_for_their_own_account_only(srv):
    rx2, rx3 = RecordingReceiver(), RecordingReceiver()
    try:
        hooks = {}
        for key, rx in ((ACCOUNT_2, rx2), (ACCOUNT_3, rx3)):
            hooks[key] = ok(Client(srv.base_url, key).post("/webhooks", {"data": {"type": "webhook", "attributes": {
                "url": rx.url, "active": True, "events": ["container.updated"]}}}), 201)["data"]["id"]
        assert requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 2 * DAY}, timeout=10).ok
        tick = requests.post(srv.root_url + "/_sandbox/webhooks/tick", timeout=120).json()
        assert tick["attempted"] == tick["queued"] > 0
        containers = {key: {c["id"] for c in _rows(Client(srv.base_url, key), "/containers")}
                      for key in (ACCOUNT_2, ACCOUNT_3)}
        for key, other, rx in ((ACCOUNT_2, ACCOUNT_3, rx2), (ACCOUNT_3, ACCOUNT_2, rx3)):
            bodies = rx.bodies()
            assert bodies, "each account's own changes are sent to its own webhook"
            for doc in bodies:
                assert doc["data"]["relationships"]["webhook"]["data"]["id"] == hooks[key]
                sent = {r["id"] for r in doc["included"] if r["type"] == "container"}
                assert sent and sent <= containers[key] and sent.isdisjoint(containers[other])
        assert ok(Client(srv.base_url, FULL_KEY).get("/webhook_notifications"))["data"] == []
    finally:
        rx2.close()
        rx3.close()


@pytest.mark.slow
def test_the_launcher_names_the_accounts_of_the_keys_it_was_given():
    with start_sandbox("--seed", str(SEED), "--shipments", str(SHIPMENTS), "--start", SANDBOX_START.isoformat(),
                       "--webhook-tick", "0", "--account-key", f"{ACCOUNT_2},{ACCOUNT_2B}",
                       "--account-key", ACCOUNT_3) as proc:
        assert proc.accounts == {"account-2": (ACCOUNT_2, ACCOUNT_2B), "account-3": (ACCOUNT_3,)}
        assert proc.api_key not in (ACCOUNT_2, ACCOUNT_2B, ACCOUNT_3)   # the generated primary key
        a = ok(Client(proc.base_url, ACCOUNT_2).get("/shipments?page[size]=1"))["data"][0]["id"]
        errors(Client(proc.base_url, proc.api_key).get(f"/shipments/{a}"), 404)


def test_account_keys_from_the_command_line_and_the_environment(monkeypatch):
    assert settings_from_args(["--account-key", "a, b", "--account-key", "c"]).account_keys == [("a", "b"), ("c",)]
    monkeypatch.setenv("SANDBOX_ACCOUNT_KEYS", "x,y; z")
    assert settings_from_args([]).account_keys == [("x", "y"), ("z",)]
    for argv in (["--account-key", "a", "--account-key", "a"], ["--api-key", "a", "--account-key", "a"],
                 ["--account-key", ","]):
        with pytest.raises(SystemExit):
            settings_from_args(argv)
