"""Extra accounts of a world (`World.add_account`): seeded from the world's seed and their own name, their ids
foreign to every other account, the primary unchanged by them, and as lazy as the primary."""

from sandbox.world import World


def test_an_added_account_is_its_own_deterministic_and_lazy_world(start):
    world = World(seed=1234, shipments=600, start=start)
    acct = world.add_account("account-2")
    assert world.add_account("account-2") is acct and world.account("account-2") is acct
    assert 300 <= acct.n < 900 and not acct.store.idents, "50 % to 149 % of the primary, no row built yet"

    again = World(seed=1234, shipments=600, start=start).add_account("account-2")
    assert [s["id"] for s in acct.shipments(start)[:20]] == [s["id"] for s in again.shipments(start)[:20]]
    assert acct.shipments(start)[:20] == again.shipments(start)[:20]


def test_added_accounts_share_reference_data_but_no_ids(start):
    world = World(seed=1234, shipments=600, start=start)
    alone = World(seed=1234, shipments=600, start=start).account("primary")
    primary, two, three = world.account("primary"), world.add_account("account-2"), world.add_account("account-3")
    assert primary.shipments(start)[:50] == alone.shipments(start)[:50], "adding accounts changes no other"
    seen: dict[str, set[str]] = {}
    for acct in (primary, two, three):
        rows = acct.shipments(start)[:]
        seen[acct.name] = {s["id"] for s in rows}
        for other in (primary, two, three):
            if other is not acct:
                assert other.get("shipment", rows[0]["id"], start) is None   # foreign ids do not decode
        pod = rows[0]["relationships"]["port_of_discharge"]["data"]["id"]
        assert acct.get("port", pod, start) == primary.get("port", pod, start)   # shared reference data
    assert not seen["primary"] & seen["account-2"] and not seen["primary"] & seen["account-3"]
    assert not seen["account-2"] & seen["account-3"]
