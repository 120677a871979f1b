"""From webhook notifications to a targeted refresh's documents (`pipelines.webhooks`): complete
payloads become documents, incomplete ones a GET, newer wins, older never regresses. The resources are the
sandbox world's renders, the same the REST API and the sandbox's webhooks send."""

from __future__ import annotations

import copy
from datetime import UTC, datetime, timedelta

import pytest

from pipelines.api import flatten_resource, rows_by_type
from pipelines.webhooks import Notice, is_complete, plan_batch, shipments_named, version_key
from sandbox.world import World

NOW = datetime(2026, 11, 20, tzinfo=UTC)


@pytest.fixture(scope="module")
def account():
    return World(11, 40, NOW).account("primary")


def _bundle(account, index: int, at: datetime) -> tuple[dict, list[dict], list[dict]]:
    shipment = account.get("shipment", account.shipment_id(index), at)
    containers = [account.get("container", ref["id"], at) for ref in shipment["relationships"]["containers"]["data"]]
    events = account.transport_events(containers[0]["id"], at)
    return shipment, containers, events


def _notice(notice_id: str, at: datetime, included: list[dict], reference: dict | None = None) -> Notice:
    data = {"id": notice_id, "type": "webhook_notification",
            "attributes": {"event": "container.transport.vessel_departed", "created_at": at.isoformat()},
            "relationships": {"reference_object": {"data": reference}}}
    return Notice(notice_id, at, {"data": data, "included": included})


def _shipment_with_events(account, at: datetime) -> tuple[int, dict, list[dict], list[dict]]:
    for index in range(account.n):
        shipment, containers, events = _bundle(account, index, at)
        if events:
            return index, shipment, containers, events
    raise AssertionError("no shipment with events in the test world")


def test_sandbox_renders_are_complete_and_a_missing_attribute_is_not(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    assert is_complete(shipment, "shipments")
    assert all(is_complete(container, "containers") for container in containers)
    assert is_complete(events[0], "transport_events")
    partial = copy.deepcopy(containers[0])
    del partial["attributes"]["pickup_lfd"]
    assert not is_complete(partial, "containers")
    no_relationship = copy.deepcopy(shipment)
    del no_relationship["relationships"]["pod_terminal"]
    assert not is_complete(no_relationship, "shipments")


def test_a_complete_payload_becomes_the_page_the_listing_would_give(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    batch = plan_batch([_notice("n1", NOW, [shipment, *containers, events[-1]])], {})
    assert batch.to_fetch == set() and batch.applied == ["n1"]
    rows = rows_by_type(batch.documents[shipment["id"]])
    assert rows["shipment"] == [flatten_resource(shipment)]
    assert sorted(r["id"] for r in rows["container"]) == sorted(c["id"] for c in containers)
    assert [r["id"] for r in rows["transport_event"]] == [events[-1]["id"]]
    assert batch.versions == {version_key("shipment", shipment["id"]): NOW}


def test_an_incomplete_payload_asks_for_one_get_per_shipment(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    thin = [copy.deepcopy(c) for c in containers]
    del thin[0]["attributes"]["current_status"]
    notices = [_notice("a", NOW, [shipment, *thin, events[0]]),
               _notice("b", NOW + timedelta(minutes=1), [shipment, *thin, events[-1]])]
    batch = plan_batch(notices, {})
    assert batch.to_fetch == {shipment["id"]} and batch.documents == {}
    assert batch.applied == ["a", "b"]


def _shipment_with_containers(account, at: datetime, count: int = 2) -> tuple[dict, list[dict]]:
    for index in range(account.n):
        shipment, containers, _ = _bundle(account, index, at)
        if len(containers) >= count:
            return shipment, containers
    raise AssertionError(f"no shipment with {count} containers in the test world")


def test_a_payload_with_one_container_of_its_shipment_loads_that_one_and_costs_no_request(account):
    shipment, containers = _shipment_with_containers(account, NOW)
    batch = plan_batch([_notice("n", NOW, [shipment, containers[0]])], {})
    assert batch.to_fetch == set()
    rows = rows_by_type(batch.documents[shipment["id"]])
    assert [r["id"] for r in rows["container"]] == [containers[0]["id"]]  # the other keeps its row


def test_payloads_about_different_containers_of_one_shipment_all_land(account):
    shipment, containers = _shipment_with_containers(account, NOW)
    notices = [_notice("a", NOW, [shipment, containers[0]]),
               _notice("b", NOW + timedelta(minutes=1), [shipment, containers[1]])]
    batch = plan_batch(notices, {})
    rows = rows_by_type(batch.documents[shipment["id"]])
    assert {r["id"] for r in rows["container"]} == {containers[0]["id"], containers[1]["id"]}


def test_a_minimal_event_is_covered_only_by_its_own_container_at_least_as_new(account):
    for index in range(account.n):
        shipment, containers, events = _bundle(account, index, NOW)  # events of containers[0]
        if events and len(containers) > 1:
            break
    else:
        raise AssertionError("no shipment with events and two containers in the test world")
    minimal = _notice("minimal", NOW, [events[-1]])
    assert plan_batch([minimal, _notice("own", NOW, [shipment, containers[0]])], {}).to_fetch == set()
    # a rendering of another container says nothing of the event's own
    assert plan_batch([minimal, _notice("other", NOW, [shipment, containers[1]])], {}).to_fetch == {shipment["id"]}


def test_the_newest_notification_of_a_shipment_wins_and_events_accumulate(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    older = copy.deepcopy(shipment)
    older["attributes"]["pod_eta_at"] = "2020-01-01T00:00:00Z"
    late = NOW + timedelta(minutes=5)
    notices = [_notice("new", late, [shipment, *containers, events[-1]]),
               _notice("old", NOW, [older, *containers, events[0]])]  # delivered out of order
    batch = plan_batch(notices, {})
    rows = rows_by_type(batch.documents[shipment["id"]])
    assert rows["shipment"][0]["pod_eta_at"] == shipment["attributes"]["pod_eta_at"]
    assert {r["id"] for r in rows["transport_event"]} == {events[0]["id"], events[-1]["id"]}
    assert batch.versions[version_key("shipment", shipment["id"])] == late


def test_a_notification_older_than_what_was_applied_is_superseded(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    applied = {version_key("shipment", shipment["id"]): NOW + timedelta(hours=1)}
    batch = plan_batch([_notice("late", NOW, [shipment, *containers, events[0]])], applied)
    assert batch.superseded == ["late"] and batch.applied == [] and batch.documents == {}
    newer = plan_batch([_notice("newer", NOW + timedelta(hours=2), [shipment, *containers])], applied)
    assert newer.applied == ["newer"]


def test_shipments_are_found_through_the_included_resources(account):
    _, shipment, _, events = _shipment_with_events(account, NOW)
    event_only = {"data": {"id": "x", "type": "webhook_notification"}, "included": [events[0]]}
    assert shipments_named(event_only) == {shipment["id"]}
    assert shipments_named({"data": {"id": "y"}, "included": []}) == set()


def test_a_notification_naming_nothing_is_unresolved_and_a_tracking_request_is_loaded(account):
    request = account.tracking_requests(NOW)[0]
    batch = plan_batch([
        _notice("nothing", NOW, []),
        _notice("tr", NOW, [request], reference={"id": request["id"], "type": "tracking_request"}),
    ], {})
    assert batch.unresolved == {"nothing": "names no shipment or tracking request"}
    assert list(batch.tracking_requests) == [request["id"]] and batch.tracking_requests_to_fetch == set()
    assert batch.applied == ["tr"]
    thin = copy.deepcopy(request)
    del thin["attributes"]["status"]
    fetched = plan_batch([_notice("thin", NOW, [thin], reference={"id": request["id"], "type": "tracking_request"})], {})
    assert fetched.tracking_requests_to_fetch == {request["id"]} and fetched.tracking_requests == {}


def test_a_minimal_notification_is_covered_by_a_complete_one_at_least_as_new(account):
    _, shipment, containers, events = _shipment_with_events(account, NOW)
    complete = _notice("complete", NOW, [shipment, *containers, events[0]])
    minimal = _notice("minimal", NOW, [events[-1]])  # the vendor's `container.transport.available` shape
    covered = plan_batch([minimal, complete], {})
    assert covered.to_fetch == set() and shipment["id"] in covered.documents
    assert {r["id"] for r in rows_by_type(covered.documents[shipment["id"]])["transport_event"]} == {
        events[0]["id"], events[-1]["id"]}
    later = _notice("later", NOW + timedelta(minutes=1), [events[-1]])
    assert plan_batch([complete, later], {}).to_fetch == {shipment["id"]}  # something changed since the bundle
