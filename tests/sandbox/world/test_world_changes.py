"""The world's change feed (`sandbox.world.changes`): windows, agreement with what the API shows, overlays."""

from __future__ import annotations

import itertools
from datetime import UTC, datetime

import pytest

from sandbox.world import World
from sandbox.world.changes import changes_between, latest_change, terminal_state
from sandbox.world.identifiers import container_number
from sandbox.world.timeutil import DAY, HOUR, iso, to_epoch

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T0 = to_epoch(START)


@pytest.fixture(scope="module")
def world() -> World:
    return World(seed=4242, shipments=300, start=START)


def _event_ids(account, t: int) -> set[str]:
    out = set()
    for seq_row in account.containers(t)[:]:
        out |= {e["id"] for e in account.transport_events(seq_row["id"], t)}
    return out


def test_consecutive_windows_give_each_change_exactly_once(world):
    acc = world.account("primary")
    whole = changes_between(acc, T0, T0 + 4 * DAY)
    assert len(whole) > 100
    pieces = []
    edges = [T0 + k * 7919 for k in range(4 * DAY // 7919 + 1)] + [T0 + 4 * DAY]
    for a, b in itertools.pairwise(edges):
        part = changes_between(acc, a, b)
        assert all(a < c.at <= b for c in part)
        pieces.extend(part)
    assert [c.key for c in pieces] == [c.key for c in whole]
    assert len({c.key for c in whole}) == len(whole)
    assert [c.at for c in whole] == sorted(c.at for c in whole)
    assert changes_between(acc, T0 + DAY, T0 + DAY) == [] and changes_between(acc, T0 + DAY, T0) == []


def test_transport_event_changes_match_the_events_the_api_shows(world):
    acc = world.account("primary")
    t0, t1 = T0 + HOUR, T0 + 3 * DAY
    fed = {acc.store.event_id(c.shipment, c.slot, c.seq) for c in changes_between(acc, t0, t1)
           if c.kind == "transport_event"}
    names = {c.event for c in changes_between(acc, t0, t1) if c.kind == "transport_event"}
    assert fed == _event_ids(acc, t1) - _event_ids(acc, t0)
    assert {n.split(".")[0] for n in names} == {"container"}
    assert any(n.startswith("container.transport.") for n in names)


def test_eta_and_container_changes_agree_with_rendered_resources(world):
    acc = world.account("primary")
    changes = changes_between(acc, T0, T0 + 3 * DAY)
    etas = [c for c in changes if c.event == "shipment.estimated.arrival"]
    updates = [c for c in changes if c.event == "container.updated"]
    assert etas and updates
    for c in etas[:40]:
        sid = acc.store.shipment_id(c.shipment)
        now, before = acc.get("shipment", sid, c.at), acc.get("shipment", sid, c.at - 1)
        assert now["attributes"]["pod_eta_at"] == iso(c.estimate) != before["attributes"]["pod_eta_at"]
    for c in updates[:80]:
        cid = acc.store.container_id(c.shipment, c.slot)
        now, before = acc.get("container", cid, c.at)["attributes"], acc.get("container", cid, c.at - 1)["attributes"]
        assert c.changeset
        for field, (old, new) in c.changeset.items():
            assert (before[field], now[field]) == (old, new)
        cp = acc.plan(c.shipment).containers[c.slot].detail()
        assert terminal_state(cp, c.at) == {k: now[k] for k in terminal_state(cp, c.at)}


def test_lfd_becoming_known_is_an_update_and_an_lfd_event(world):
    acc = world.account("primary")
    changes = changes_between(acc, T0, T0 + 5 * DAY)
    lfd = [c for c in changes if c.event == "container.pickup_lfd.changed"]
    assert lfd
    for c in lfd[:20]:
        assert any(u.event == "container.updated" and (u.shipment, u.slot, u.at) == (c.shipment, c.slot, c.at)
                   and "pickup_lfd" in u.changeset for u in changes)


def test_seeded_failures_resolve_in_the_feed(world):
    acc = world.account("primary")
    changes = changes_between(acc, T0, T0 + 8 * DAY)
    failed = [c for c in changes if c.event == "tracking_request.failed"]
    assert failed
    for c in failed:
        tr = acc.get("tracking_request", acc.store.tr_id(c.tracking_request), c.at)
        assert tr["attributes"]["status"] == "failed"
        assert acc.get("tracking_request", tr["id"], c.at - 1)["attributes"]["status"] != "failed"


def test_api_created_request_and_user_stop_are_read_live():
    w = World(seed=77, shipments=80, start=START)
    acc = w.account("primary")
    number = container_number("MSCU", 424242)
    tr = acc.create_tracking_request({"request_type": "container", "request_number": number, "scac": "MSCU"},
                                     None, T0 + 10)
    req = acc.store.api_requests[0]
    feed = changes_between(acc, T0, T0 + 200)
    (ok,) = [c for c in feed if c.kind == "tracking_request"]
    assert (ok.event, ok.at, ok.shipment) == ("tracking_request.succeeded", req.resolve_at, req.shipment_index)
    assert acc.get("tracking_request", tr["id"], ok.at)["attributes"]["status"] == "created"
    # its shipment's later changes appear too, and only after it exists
    later = changes_between(acc, T0, T0 + 60 * DAY)
    assert any(c.shipment == req.shipment_index and c.kind == "transport_event" for c in later)
    assert all(c.at > req.resolve_at for c in later if c.shipment == req.shipment_index and c.kind != "tracking_request")
    # a user stop: tracking_stopped once, and nothing more learnt about that shipment afterwards
    stop_at = T0 + 2 * DAY
    sid = acc.store.shipment_id(3)
    acc.set_tracking(sid, stop_at, stop=True)
    after = changes_between(acc, T0, T0 + 30 * DAY)
    stops = [c for c in after if c.event == "tracking_request.tracking_stopped" and c.shipment == 3]
    assert [c.at for c in stops] == [stop_at]
    assert not [c for c in after if c.shipment == 3 and c.kind != "tracking_request" and c.at > stop_at]


def test_deterministic_and_latest_change():
    a = World(seed=5, shipments=120, start=START).account("primary")
    b = World(seed=5, shipments=120, start=START).account("primary")
    assert [c.key for c in changes_between(a, T0, T0 + 2 * DAY)] == \
        [c.key for c in changes_between(b, T0, T0 + 2 * DAY)]
    last = latest_change(a, "container.transport.vessel_departed", T0)
    assert last is not None and last.at <= T0 and last.event == "container.transport.vessel_departed"
    assert latest_change(a, "document.extracted", T0) is None
