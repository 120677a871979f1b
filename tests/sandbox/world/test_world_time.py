"""State is a pure function of `now`: milestones, ETAs, statuses and events evolve with the clock."""

from collections import Counter
from datetime import timedelta

import pytest

from sandbox.world.render import latest_estimate
from sandbox.world.timeutil import to_epoch

STATUSES = {"new", "on_ship", "available", "not_available", "grounded", "on_rail", "picked_up", "off_dock",
            "delivered", "dropped", "loaded", "empty_returned", "awaiting_inland_transfer"}


def test_same_now_same_output(world, start):
    acct = world.account("primary")
    a = acct.shipments(start)[:40] + acct.containers(start)[:40]
    acct.factory._cache.clear()
    acct._idents.clear()
    b = acct.shipments(start)[:40] + acct.containers(start)[:40]
    assert a == b


def test_statuses_varied_and_from_enum(world, start):
    acct = world.account("primary")
    counts = Counter(c["attributes"]["current_status"] for c in acct.containers(start)[:])
    assert set(counts) <= STATUSES
    for status in ("new", "on_ship", "not_available", "available", "picked_up", "empty_returned"):
        assert counts[status] > 0, counts


@pytest.mark.slow
def test_advancing_changes_state(world, start):
    acct = world.account("primary")
    later = start + timedelta(days=20)
    before = {c["id"]: c["attributes"]["current_status"] for c in acct.containers(start)[:]}
    after = {c["id"]: c["attributes"]["current_status"] for c in acct.containers(later)[:]}
    order = ["new", "on_ship", "awaiting_inland_transfer", "on_rail", "not_available", "available", "picked_up",
             "empty_returned"]
    changed = 0
    for cid, st in before.items():
        assert order.index(after[cid]) >= order.index(st), "statuses never go backwards"
        changed += after[cid] != st
    assert changed > 50
    for c in acct.containers(start)[:50]:
        n0 = len(acct.transport_events(c["id"], start))
        n1 = len(acct.transport_events(c["id"], later))
        assert n1 >= n0


def test_eta_revisions_and_original_eta(world, start):
    acct = world.account("primary")
    revised = 0
    for i in range(acct.n):
        plan = acct.plan(i)
        last = plan.legs[-1]
        if not (start.timestamp() < last.atd):
            continue
        sid = acct.shipment_id(i)
        seen = []
        t = last.atd - 3 * 86400
        while t < last.ata + 86400:
            s = acct.get("shipment", sid, t)
            a = s["attributes"]
            assert a["pod_original_eta_at"] == seen[0][1] if seen else True
            seen.append((a["pod_eta_at"], a["pod_original_eta_at"]))
            t += 6 * 3600
        etas = {e for e, _ in seen}
        originals = {o for _, o in seen}
        assert len(originals) == 1
        if len(etas) >= 3:
            revised += 1
        final = acct.get("shipment", sid, last.ata + 3600)["attributes"]
        assert final["pod_ata_at"] is not None
        assert abs(to_epoch_iso(final["pod_eta_at"]) - last.ata) <= 3600
        if revised >= 10:
            break
    assert revised >= 10


def to_epoch_iso(text):
    from sandbox.world.timeutil import parse_iso

    return parse_iso(text)


def test_holds_clear_and_availability(world, start):
    acct = world.account("primary")
    seen_hold_names, cleared = set(), 0
    for i in range(acct.n):
        if acct.store.early_kind[i]:
            continue  # tracking stopped early (booking cancelled / by the user): frozen
        plan = acct.plan(i)
        for cp in plan.containers:
            if not cp.holds:
                continue
            cid = acct.container_id(i, cp.ident.slot)
            at_discharge = acct.get("container", cid, cp.discharged + 60)["attributes"]
            names = {h["name"] for h in at_discharge["holds_at_pod_terminal"]}
            seen_hold_names |= names
            assert at_discharge["available_for_pickup"] is False
            t_ready = max(cp.available + 3 * 3600 + 60, plan.ident.created_at)
            if t_ready >= cp.full_out:
                continue
            ready = acct.get("container", cid, t_ready)["attributes"]
            assert ready["holds_at_pod_terminal"] == []
            assert ready["available_for_pickup"] is True and ready["current_status"] == "available"
            assert ready["pickup_lfd"] is not None
            cleared += 1
        if cleared > 40:
            break
    assert {"customs", "freight"} <= seen_hold_names
    assert seen_hold_names <= {"freight", "customs", "USDA", "VACIS", "TMF", "other"}


def test_demurrage_after_lfd(world):
    acct = world.account("primary")
    found = 0
    for i in range(acct.n):
        if acct.store.early_kind[i]:
            continue  # tracking stopped early: frozen
        plan = acct.plan(i)
        for cp in plan.containers:
            cp.detail()
            if cp.rail is not None:
                continue  # inland: the rail ramp's LFD, no pod-terminal demurrage
            lfd = cp.lfd_line or cp.lfd_terminal
            if cp.full_out > lfd + 2 * 86400 and cp.available < lfd:
                cid = acct.container_id(i, cp.ident.slot)
                a = acct.get("container", cid, lfd + 2 * 86400 - 60)["attributes"]
                fees = [f for f in a["fees_at_pod_terminal"] if f["type"] == "demurrage"]
                assert fees and fees[0]["amount"] == 2 * cp.demurrage_rate and fees[0]["currency_code"] == "USD"
                after = acct.get("container", cid, cp.full_out + 3 * 3600 + 60)["attributes"]  # max report lag 3 h
                assert after["fees_at_pod_terminal"] == [] and after["current_status"] == "picked_up"
                found += 1
    assert found >= 3


def test_events_prefix_ids_and_invalidation(world, start):
    acct = world.account("primary")
    far = start + timedelta(days=150)
    invalidated = 0
    for c in acct.containers(far)[:400]:
        events = acct.transport_events(c["id"], far)
        ids = [e["id"] for e in events]
        assert len(ids) == len(set(ids))
        assert {r["id"] for r in c["relationships"]["transport_events"]["data"]} == set(ids)
        for e in events:
            assert e["attributes"]["event"].startswith(("container.transport.", "container.pickup_lfd"))
            assert acct.get("transport_event", e["id"], far) == e
            prev = e["relationships"]["previous_version"]["data"]
            if prev:
                old = acct.get("transport_event", prev["id"], far)
                assert old["attributes"]["invalidated_at"] is not None
                assert old["attributes"]["event"] == e["attributes"]["event"]
                assert e["attributes"]["created_at"] == old["attributes"]["invalidated_at"]
                invalidated += 1
                # before the correction only the old version exists and it is still valid
                t_before = to_epoch_iso(old["attributes"]["invalidated_at"]) - 1
                earlier = acct.transport_events(c["id"], t_before)
                assert e["id"] not in {x["id"] for x in earlier}
                assert next(x for x in earlier if x["id"] == old["id"])["attributes"]["invalidated_at"] is None
        names = [e["attributes"]["event"] for e in events]
        if "container.transport.empty_in" in names:
            assert names.index("container.transport.vessel_departed") < names.index("container.transport.empty_in")
    assert invalidated >= 5


def test_vessel_position_matches_map_and_moves(world, start):
    acct = world.account("primary")
    checked = moved = 0
    for c in acct.containers(start)[:300]:
        fc = acct.map_geojson(c["id"], start)
        cur = [f for f in fc["features"] if f["properties"]["feature_type"] == "current_vessel"]
        if not cur:
            continue
        props = cur[0]["properties"]
        v = world.get_vessel(props["vessel_imo"], start)
        assert v["id"] == props["vessel_id"] == world.get_vessel(v["id"], start)["id"]
        lon, lat = cur[0]["geometry"]["coordinates"]
        assert abs(v["attributes"]["longitude"] - lon) < 1e-4 and abs(v["attributes"]["latitude"] - lat) < 1e-4
        assert v["attributes"]["position_timestamp"] == props["vessel_location_timestamp"]
        later = world.get_vessel(v["id"], start + timedelta(hours=2))
        if v["attributes"]["nautical_speed_knots"] > 0 and later["attributes"]["nautical_speed_knots"] > 0:
            assert (later["attributes"]["longitude"], later["attributes"]["latitude"]) != (
                v["attributes"]["longitude"], v["attributes"]["latitude"])
            assert 5 <= v["attributes"]["nautical_speed_knots"] <= 30
            moved += 1
        checked += 1
    assert checked >= 10 and moved >= 5


def test_latest_estimate_helper():
    revs = [(10, 100), (20, 110), (30, 105)]
    assert latest_estimate(revs, 5) is None
    assert latest_estimate(revs, 20) == 110
    assert latest_estimate(revs, 99) == 105
    assert to_epoch  # keep import used
