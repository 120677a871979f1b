"""Determinism from the seed, laziness at scale, list ordering and shapes."""

from datetime import UTC, datetime

from sandbox.world import World

START = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)


def _fingerprint(world: World) -> list:
    acct = world.account("primary")
    ships = acct.shipments(START)[:20]
    conts = acct.containers(START)[:20]
    trs = acct.tracking_requests(START)[:20]
    return ([(s["id"], s["attributes"]["bill_of_lading_number"], s["attributes"]["pod_eta_at"]) for s in ships]
            + [(c["id"], c["attributes"]["number"]) for c in conts] + [t["id"] for t in trs]
            + [p["id"] for p in acct.parties()])


def test_same_seed_same_world_different_seed_different():
    a, b, c = World(42, 300, START), World(42, 300, START), World(43, 300, START)
    assert _fingerprint(a) == _fingerprint(b)
    fa, fc = _fingerprint(a), _fingerprint(c)
    assert not set(map(str, fa)) & set(map(str, fc))
    assert a.fleet.vessels[0][0].imo == b.fleet.vessels[0][0].imo


def test_accounts_and_sizes():
    w = World(1, 1000, START)
    assert set(w.accounts) == {"primary", "basic"}
    assert len(w.account("primary").shipments(START)) == 1000
    assert len(w.account("basic").shipments(START)) == 50
    assert len(World(1, 4000, START).account("basic").shipments(START)) == 200
    ids_p = {s["id"] for s in w.account("primary").shipments(START)[:50]}
    ids_b = {s["id"] for s in w.account("basic").shipments(START)[:50]}
    assert not ids_p & ids_b
    # ids of one account are not visible in the other
    sid = next(iter(ids_p))
    assert w.account("primary").get("shipment", sid, START) is not None
    assert w.account("basic").get("shipment", sid, START) is None


def test_hundred_thousand_is_lazy_and_pages():
    w = World(7, 100_000, START)
    acct = w.account("primary")
    ships = acct.shipments(START)
    assert len(ships) == 100_000
    page = ships[50_000:50_100]
    assert len(page) == 100
    created = [s["attributes"]["created_at"] for s in page]
    assert created == sorted(created, reverse=True)
    last = ships[-1]
    assert acct.get("shipment", last["id"], START) == last
    conts = acct.containers(START)
    assert 100_000 <= len(conts) <= 400_000
    tail = conts[len(conts) - 5:]
    assert all(acct.get("container", c["id"], START) == c for c in tail)
    assert len(acct._idents) < 2_000, "a page must not generate the whole account"


def test_shapes_like_live_fixtures(world, start):
    acct = world.account("primary")
    s = acct.shipments(start)[3]
    for key in ("pol_original_etd_at", "destination_original_eta_at", "pod_original_eta_at", "normalized_number",
                "line_tracking_last_attempted_at", "pod_vessel_imo", "tags", "ref_numbers"):
        assert key in s["attributes"]
    assert isinstance(s["attributes"]["pod_vessel_imo"], str)
    assert s["links"]["self"] == f"/v2/shipments/{s['id']}"
    assert s["attributes"]["created_at"].endswith("Z")
    c = acct.get("container", s["relationships"]["containers"]["data"][0]["id"], start)
    for key in ("pol_full_in_at", "pol_vessel_loaded_at", "ssl_lfd", "import_deadlines", "empty_out_at",
                "holds_at_pod_terminal", "fees_at_pod_terminal", "availability_known", "current_status"):
        assert key in c["attributes"]
    tr = acct.tracking_requests(start)[0]
    for key in ("shipment_tags", "is_retrying", "retry_count", "failed_reason", "updated_at"):
        assert key in tr["attributes"]
    parties = acct.parties()
    assert 5 <= len(parties) <= 12
    assert len({p["attributes"]["company_name"] for p in parties}) == len(parties)


def test_lists_newest_first_and_seeded_mix(world, start):
    acct = world.account("primary")
    trs = acct.tracking_requests(start)
    created = [t["attributes"]["created_at"] for t in trs[:]]
    assert created == sorted(created, reverse=True)
    statuses = {t["attributes"]["status"] for t in trs[:]}
    assert statuses == {"created", "failed", "pending", "awaiting_manifest", "tracking_stopped"}
    failed = acct.tracking_requests(start, status="failed")[:]
    assert failed and all(t["attributes"]["failed_reason"] for t in failed)
    assert all(t["relationships"]["tracked_object"]["data"] is None for t in failed)
    created_trs = acct.tracking_requests(start, status="created")[:]
    stopped_trs = acct.tracking_requests(start, status="tracking_stopped")[:]
    assert len(created_trs) + len(stopped_trs) == 600 and stopped_trs  # every seeded shipment's request
    assert all(t["relationships"]["tracked_object"]["data"] for t in stopped_trs)
    for t in created_trs[:30]:
        assert t["relationships"]["customer"]["data"]["type"] == "party"
        sid = t["relationships"]["tracked_object"]["data"]["id"]
        ship = acct.get("shipment", sid, start)
        assert ship["attributes"]["bill_of_lading_number"] == t["attributes"]["request_number"]
        assert ship["attributes"]["customer_name"]
    pend = acct.tracking_requests(start, status="pending")[:]
    assert pend and all(t["attributes"]["is_retrying"] for t in pend)
