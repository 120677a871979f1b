"""Custom field store: seeding from the world seed, value validation and display formatting."""

from __future__ import annotations

import pytest

from sandbox.world import ValidationIssue, World
from sandbox.world.custom_fields import SEEDED, CustomFieldStore


def _store(world: World, name: str = "primary") -> CustomFieldStore:
    a = world.account(name)
    return CustomFieldStore(world.seed, name, a.n, world.start_ts, a.shipment_id,
                            lambda i: [a.container_id(i, k) for k in range(int(a.store.counts[i]))])


def test_seeded_definitions_and_values_follow_the_seed(world, start):
    one, two = _store(world), _store(World(world.seed, world.account("primary").n, start))
    assert [d.id for d in one.list_definitions()] == [d.id for d in two.list_definitions()]
    assert [(v.id, v.value) for v in one.list_values()] == [(v.id, v.value) for v in two.list_values()]
    assert [d.api_slug for d in one.list_definitions()] == [row[1] for row in SEEDED]
    other = _store(World(world.seed + 1, 600, start))
    assert {v.id for v in other.list_values()}.isdisjoint(v.id for v in one.list_values())
    n = world.account("primary").n
    shipments = {v.entity_id for v in one.list_values(entity_type="Shipment")}
    assert 0.3 * n < len(shipments) < 0.5 * n
    assert one.list_values(entity_type="Container") == one.list_values(entity_type="cargo")


def test_values_are_checked_against_the_data_type(world):
    store = _store(world)
    by = {d.api_slug: d for d in store.list_definitions()}
    store.check_value(by["declared_weight_kg"], 1.5)
    for slug, bad in (("declared_weight_kg", True), ("hazmat_indicator", "yes"), ("incoterm", "FOB"),
                      ("purchase_order_number", 7), ("purchase_order_number", None)):
        with pytest.raises(ValidationIssue):
            store.check_value(by[slug], bad)
    assert store.display_value(by["incoterm"], "fob") == "FOB"
    assert store.display_value(by["hazmat_indicator"], False) == "No"
    assert store.display_value(by["declared_weight_kg"], 20.0) == "20"


def test_deleting_a_definition_drops_its_values(world):
    store = _store(world)
    po = store.by_slug("Shipment", "purchase_order_number")
    assert store.list_values(definition_id=po.id)
    assert store.delete_definition(po.id)
    assert store.list_values(definition_id=po.id) == []
    assert all(v.definition_id != po.id for vs in store.by_entity.values() for v in vs.values())
