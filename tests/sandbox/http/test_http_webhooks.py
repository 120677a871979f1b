"""Webhooks over real HTTP: subscriptions (CRUD, validation), notifications made from the world's changes,
signed deliveries to a real receiver on 127.0.0.1, retries on the sim clock, and the notification log.
Servers run with speed 0 and no tick thread (`webhook_tick_seconds=0`): the tests move the sim clock and
tick through `POST /_sandbox/webhooks/tick`, which answers once the deliveries it queued were attempted."""

from __future__ import annotations

import hashlib
import hmac
import json
import socket
import time

import pytest
import requests

from tests.support.sandbox_http import Client, RecordingReceiver, errors, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY

DAY = 86_400


@pytest.fixture
def receiver():
    made: list[RecordingReceiver] = []

    def make(script: list[int] | None = None) -> RecordingReceiver:
        made.append(RecordingReceiver(script))
        return made[-1]

    yield make
    for r in made:
        r.close()


@pytest.fixture
def srv(make_sandbox):
    return make_sandbox(speed=0.0, webhook_tick_seconds=0)


def _create(cl: Client, url: str, events: list[str] | None = None, **extra) -> dict:
    attrs = {"url": url, "active": True, **extra}
    if events is not None:
        attrs["events"] = events
    return ok(cl.post("/webhooks", {"data": {"type": "webhook", "attributes": attrs}}), 201)["data"]


def _advance(srv, seconds: float) -> None:
    assert requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": seconds}, timeout=10).ok


def _tick(srv) -> dict:
    body = requests.post(srv.root_url + "/_sandbox/webhooks/tick", timeout=120).json()
    assert body["attempted"] == body["queued"]
    return body


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def test_crud_and_listing(srv):
    cl = Client(srv.base_url, FULL_KEY)
    empty = ok(cl.get("/webhooks"))
    assert empty["data"] == [] and set(empty["links"]) == {"self", "current"} and "meta" not in empty
    hook = _create(cl, "https://example.com/t49", ["tracking_request.succeeded", "container.updated"],
                   headers=[{"name": "x-secret-sauce", "value": "sriracha"}])
    a = hook["attributes"]
    assert a["url"] == "https://example.com/t49" and a["active"] is True and len(a["secret"]) >= 32
    assert a["events"] == ["tracking_request.succeeded", "container.updated"] and a["created_at"].endswith("Z")
    assert a["headers"] == [{"name": "X-Secret-Sauce", "value": "sriracha"}]
    other = _create(cl, "http://localhost:9/x")
    assert len(other["attributes"]["events"]) == 43 and other["attributes"]["secret"] != a["secret"]
    assert [h["id"] for h in ok(cl.get("/webhooks"))["data"]] == [other["id"], hook["id"]]
    assert ok(cl.get(f"/webhooks/{hook['id']}"))["data"] == hook
    patched = ok(cl.patch(f"/webhooks/{hook['id']}", {"data": {"type": "webhook", "attributes": {
        "active": False, "events": ["container.updated"]}}}))["data"]["attributes"]
    assert patched["active"] is False and patched["events"] == ["container.updated"]
    assert patched["secret"] == a["secret"] and patched["url"] == a["url"]
    assert ok(Client(srv.base_url, BASIC_KEY).get("/webhooks"))["data"] == []   # per account
    errors(Client(srv.base_url, BASIC_KEY).get(f"/webhooks/{hook['id']}"), 404)
    assert cl.s.delete(cl.url(f"/webhooks/{hook['id']}"), timeout=10).status_code == 200
    errors(cl.get(f"/webhooks/{hook['id']}"), 404)
    cats = ok(cl.get("/webhooks/events"))["data"]
    assert {c["type"] for c in cats} == {"webhook_event_category"}
    assert sum(len(c["attributes"]["events"]) for c in cats) == 43
    assert ok(cl.get("/webhooks/ips"))["webhook_notification_ips"]


@pytest.mark.parametrize(("attrs", "pointer"), [
    ({"active": True}, "/data/attributes/url"),
    ({"url": "https://example.com"}, "/data/attributes/active"),
    ({"url": "http://example.com/hook", "active": True}, "/data/attributes/url"),
    ({"url": "ftp://127.0.0.1/x", "active": True}, "/data/attributes/url"),
    ({"url": "not a url", "active": True}, "/data/attributes/url"),
    ({"url": "https://example.com", "active": "yes"}, "/data/attributes/active"),
    ({"url": "https://example.com", "active": True, "events": []}, "/data/attributes/events"),
    ({"url": "https://example.com", "active": True, "events": ["container.exploded"]}, "/data/attributes/events"),
    ({"url": "https://example.com", "active": True, "events": ["container.updated", "container.updated"]},
     "/data/attributes/events"),
    ({"url": "https://example.com", "active": True, "headers": [{"name": "bad header", "value": "x"}]},
     "/data/attributes/headers/0/name"),
    ({"url": "https://example.com", "active": True, "headers": [{"name": "X-A", "value": "a\r\nb"}]},
     "/data/attributes/headers/0/value"),
])
def test_invalid_bodies_are_422(sandbox, attrs, pointer):
    cl = Client(sandbox.base_url, FULL_KEY)
    errs = errors(cl.post("/webhooks", {"data": {"type": "webhook", "attributes": attrs}}), 422)
    assert pointer in [e["source"]["pointer"] for e in errs]


def test_bad_envelopes_and_examples(sandbox):
    cl = Client(sandbox.base_url, FULL_KEY)
    errors(cl.post("/webhooks", {"data": {"type": "shipment", "attributes": {}}}), 409)
    errors(cl.post("/webhooks", {"nope": 1}), 400)
    (err,) = errors(cl.get("/webhook_notifications/examples?event=container.exploded"), 400)
    assert err["source"] == {"parameter": "event"}
    errors(cl.get("/webhook_notifications/examples"), 400)
    ex = ok(cl.get("/webhook_notifications/examples?event=container.transport.vessel_departed"))
    (note,) = ex["data"]
    assert note["type"] == "webhook_notification" and note["attributes"]["event"] == "container.transport.vessel_departed"
    ref = note["relationships"]["reference_object"]["data"]
    assert ref["type"] == "transport_event" and ref["id"] in {r["id"] for r in ex["included"]}
    errors(cl.get("/webhook_notifications/00000000-0000-0000-0000-000000000000"), 404)


def test_signed_deliveries_of_subscribed_events_only(srv, receiver):
    rx = receiver()
    cl = Client(srv.base_url, FULL_KEY)
    wanted = ["container.updated", "shipment.estimated.arrival", "container.transport.vessel_arrived"]
    hook = _create(cl, rx.url, wanted, headers=[{"name": "x-tenant", "value": "acme"}])
    secret = hook["attributes"]["secret"]
    _advance(srv, 2 * DAY)
    tick = _tick(srv)
    assert tick["queued"] == len(rx.received) > 0
    for path, headers, body in rx.received:
        assert path == "/hook"
        assert headers["Content-Type"] == "application/json" and headers["User-Agent"] == "Terminal49 Webhook Bot"
        assert headers["X-Tenant"] == "acme"
        expected = hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()
        assert hmac.compare_digest(headers["X-T49-Webhook-Signature"], expected)
        doc = json.loads(body)
        assert body == json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        assert doc["data"]["attributes"]["event"] in wanted
        assert doc["data"]["relationships"]["webhook"]["data"] == {"id": hook["id"], "type": "webhook"}
    events = {d["data"]["attributes"]["event"] for d in rx.bodies()}
    assert "container.updated" in events
    # the log: every notification succeeded, newest first, with includes resolved
    log = ok(cl.get("/webhook_notifications?page[size]=100&include=reference_object,webhook"))
    assert log["meta"]["total"] == len(rx.received) and log["meta"]["pagination"]["records"] == len(rx.received)
    assert {n["attributes"]["delivery_status"] for n in log["data"]} == {"succeeded"}
    stamps = [n["attributes"]["created_at"] for n in log["data"]]
    assert stamps == sorted(stamps, reverse=True)
    kinds = {r["type"] for r in log["included"]}
    assert "webhook" in kinds and kinds & {"container_updated_event", "estimated_event", "transport_event"}
    one = ok(cl.get(f"/webhook_notifications/{log['data'][0]['id']}"))["data"]
    assert one == log["data"][0]
    # nothing happens again for the same window; a second tick without time passing sends nothing
    assert _tick(srv)["queued"] == 0
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=10).json()["webhook_deliveries"]
    assert stats["sent"] == stats["succeeded"] == len(rx.received) and stats["failed"] == 0


def _next_change(srv, kind: str, minimal: bool = False):
    from sandbox.webhooks import MINIMAL
    from sandbox.world.changes import changes_between
    from sandbox.world.timeutil import to_epoch

    now = to_epoch(srv.state.clock.now())
    account = srv.state.world.account("primary")
    return next(c for c in changes_between(account, now, now + 10 * DAY)
                if c.kind == kind and (c.event in MINIMAL) == minimal), now


def test_payload_included_resources_equal_the_rest_api_at_the_change_time(srv, receiver):
    rx = receiver()
    cl = Client(srv.base_url, FULL_KEY)
    change, now = _next_change(srv, "transport_event")
    _create(cl, rx.url, [change.event])
    _advance(srv, change.at - now)          # the clock stands still exactly at the change
    _tick(srv)
    from sandbox.world.timeutil import iso

    doc = next(d for d in rx.bodies() if d["data"]["attributes"]["created_at"] == iso(change.at))
    included = {(r["type"], r["id"]): r for r in doc["included"]}
    ref = doc["data"]["relationships"]["reference_object"]["data"]
    assert ref["type"] == "transport_event" and (ref["type"], ref["id"]) in included
    event = included[(ref["type"], ref["id"])]
    assert event["attributes"]["event"] == change.event
    ship_id = event["relationships"]["shipment"]["data"]["id"]
    cont_id = event["relationships"]["container"]["data"]["id"]
    assert included[("shipment", ship_id)] == ok(cl.get(f"/shipments/{ship_id}"))["data"]
    assert included[("container", cont_id)] == ok(cl.get(f"/containers/{cont_id}"))["data"]
    assert event in ok(cl.get(f"/containers/{cont_id}/transport_events"))["data"]
    port = event["relationships"]["location"]["data"]
    assert included[("port", port["id"])] == ok(cl.get(f"/ports/{port['id']}"))["data"]


def test_container_updated_and_estimated_payloads(srv, receiver):
    rx = receiver()
    cl = Client(srv.base_url, FULL_KEY)
    _create(cl, rx.url, ["container.updated", "shipment.estimated.arrival", "container.transport.available"])
    _advance(srv, 3 * DAY)
    _tick(srv)
    by_event: dict[str, list[dict]] = {}
    for d in rx.bodies():
        by_event.setdefault(d["data"]["attributes"]["event"], []).append(d)
    upd = by_event["container.updated"][0]
    ref = upd["data"]["relationships"]["reference_object"]["data"]
    (cue,) = [r for r in upd["included"] if r["id"] == ref["id"]]
    assert cue["type"] == "container_updated_event" and cue["attributes"]["changeset"]
    assert cue["attributes"]["data_source"] == "terminal"
    assert all(len(v) == 2 for v in cue["attributes"]["changeset"].values())
    assert {r["type"] for r in upd["included"]} >= {"shipment", "container", "terminal", "container_updated_event"}
    eta = by_event["shipment.estimated.arrival"][0]
    (est,) = [r for r in eta["included"] if r["type"] == "estimated_event"]
    ship = next(r for r in eta["included"] if r["type"] == "shipment")
    assert est["attributes"]["estimated_timestamp"] == ship["attributes"]["pod_eta_at"]
    assert est["relationships"]["shipment"]["data"]["id"] == ship["id"]
    assert {r["type"] for r in eta["included"]} >= {"shipment", "container", "estimated_event"}
    for minimal in by_event.get("container.transport.available", []):
        assert [r["type"] for r in minimal["included"]] == ["transport_event"]


def test_failed_delivery_is_retried_on_the_sim_clock(srv, receiver):
    rx = receiver([500, 200])
    cl = Client(srv.base_url, FULL_KEY)
    _create(cl, rx.url, ["container.updated"])
    _advance(srv, 2 * DAY)
    first = _tick(srv)
    n = first["queued"]
    assert n > 0 and len(rx.received) == n
    log = ok(cl.get("/webhook_notifications?page[size]=100"))["data"]
    assert {x["attributes"]["delivery_status"] for x in log} == {"pending"}
    assert _tick(srv)["queued"] == 0            # the backoff runs on the sim clock, which stands still
    _advance(srv, 30)
    assert _tick(srv)["queued"] == 0
    _advance(srv, 31)                            # first retry after 60 sim seconds
    second = _tick(srv)
    assert second["queued"] >= n and len(rx.received) >= 2 * n
    ids = [x["id"] for x in log]
    statuses = {ok(cl.get(f"/webhook_notifications/{i}"))["data"]["attributes"]["delivery_status"] for i in ids}
    assert statuses == {"succeeded"}
    stats = second["deliveries"]
    assert stats["retried"] >= n and stats["succeeded"] >= n and stats["failed"] == 0


@pytest.mark.slow
def test_receiver_that_never_accepts_ends_failed_after_12_retries(srv, receiver):
    rx = receiver([500])
    cl = Client(srv.base_url, FULL_KEY)
    hook = _create(cl, rx.url, ["container.updated"])
    _advance(srv, DAY)
    assert _tick(srv)["queued"] > 0
    # no new notifications from here on: only the retries of those made
    ok(cl.patch(f"/webhooks/{hook['id']}", {"data": {"type": "webhook", "attributes": {
        "events": ["document.extracted"]}}}))
    ids = {d["data"]["id"] for d in rx.bodies()}
    for _ in range(14):
        _advance(srv, 4 * DAY)
        _tick(srv)
    per_id = {i: sum(1 for d in rx.bodies() if d["data"]["id"] == i) for i in ids}
    assert set(per_id.values()) == {13}          # the first attempt and 12 retries
    for i in ids:
        assert ok(cl.get(f"/webhook_notifications/{i}"))["data"]["attributes"]["delivery_status"] == "failed"
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=10).json()["webhook_deliveries"]
    assert stats["failed"] == len(ids) and stats["retried"] == 12 * len(ids)


def test_unreachable_url_is_harmless(srv):
    cl = Client(srv.base_url, FULL_KEY)
    _create(cl, f"http://127.0.0.1:{_closed_port()}/hook", ["container.updated"])
    _create(cl, f"https://127.0.0.1:{_closed_port()}/hook", ["container.updated"])
    _advance(srv, DAY)
    started = time.monotonic()
    tick = _tick(srv)
    assert tick["queued"] > 0 and time.monotonic() - started < 30
    assert tick["deliveries"]["succeeded"] == 0 and tick["deliveries"]["pending_retries"] == tick["queued"]
    assert ok(cl.get("/shipments?page[size]=1"))["data"]
    assert requests.get(srv.root_url + "/_sandbox/health", timeout=10).json()["status"] == "ok"


def test_api_created_tracking_request_sends_succeeded(srv, receiver):
    rx = receiver()
    cl = Client(srv.base_url, FULL_KEY)
    _create(cl, rx.url, ["tracking_request.succeeded"])
    created = ok(cl.post("/tracking_requests", {"data": {"type": "tracking_request", "attributes": {
        "request_type": "bill_of_lading", "request_number": "TEST-TR-SUCCEEDED", "scac": "TEST"}}}), 201)["data"]
    assert _tick(srv)["queued"] == 0             # still pending
    _advance(srv, 120)
    _tick(srv)
    (doc,) = [d for d in rx.bodies() if d["data"]["relationships"]["reference_object"]["data"]["id"] == created["id"]]
    assert doc["data"]["attributes"]["event"] == "tracking_request.succeeded"
    tr = next(r for r in doc["included"] if r["type"] == "tracking_request")
    assert tr["attributes"]["status"] == "created"
    ship_id = tr["relationships"]["tracked_object"]["data"]["id"]
    ship = next(r for r in doc["included"] if r["type"] == "shipment")
    assert ship["id"] == ship_id and ship == ok(cl.get(f"/shipments/{ship_id}"))["data"]
    conts = {r["id"] for r in doc["included"] if r["type"] == "container"}
    assert conts == {c["id"] for c in ship["relationships"]["containers"]["data"]}


@pytest.mark.slow
def test_tick_thread_delivers_without_the_control_endpoint(make_sandbox, receiver):
    srv = make_sandbox(speed=0.0, webhook_tick_seconds=0.2)
    rx = receiver()
    _create(Client(srv.base_url, FULL_KEY), rx.url, ["container.updated"])
    _advance(srv, DAY)
    deadline = time.monotonic() + 20
    while not rx.received and time.monotonic() < deadline:
        time.sleep(0.1)
    assert rx.received
