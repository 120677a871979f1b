"""Webhooks end to end over real HTTP: the sandbox delivers signed notifications to the receiver, the journal
keeps them, and a targeted refresh loads what they name, the same rows a full sync loads, for a fraction of the
requests; an older notification applied after a newer one changes nothing; a shipment the service no longer
has fails its notifications loudly."""

from __future__ import annotations

import json
import tomllib
from pathlib import Path

import pytest
import requests

from pipelines.journals import NotificationJournal
from pipelines.settings import webhook_journal_path
from pipelines.sync import refresh_from_notifications, refresh_maps
from pipelines.warehouse.destinations import ducklake_target
from pipelines.webhooks import shipments_named, signature
from pipelines.webhooks.receiver import ReceiverThread, register_webhook
from tests.support.lakes import copy_lake, lake_in
from tests.support.sandboxes import FROZEN_WORLD, FULL_KEY, advance_clock, deliver_webhooks
from tests.support.syncs import SyncResult, make_client, sync_once

HOURS = 3600
# Columns that are the load's, not the service's.
COMPARED_TABLES = {"shipments": "id", "containers": "shipment_id", "transport_events": "shipment_id"}
# When the service last polled the carrier and the terminal for a container: refreshed on every poll of the
# whole shipment, with no notification. A container a payload did not carry keeps its row but these; the
# daily full sync brings them.
POLL_STAMPS = frozenset({"pod_last_tracking_request_at", "shipment_last_tracking_request_at", "terminal_checked_at"})


def rows_of(result, table: str, key: str, shipment_ids: set[str]) -> dict[str, dict]:
    """The service's columns of `table`'s rows that belong to the shipments, by id."""
    ids = ", ".join(f"'{s}'" for s in sorted(shipment_ids))
    with result.store.connect(read_only=True, search_path=("ocean_tracking",)) as con:
        relation = con.sql(f"select * from {table} where {key} in ({ids})")
        columns = [c for c in relation.columns if not c.startswith("_dlt_")]
        return {row[columns.index("id")]: dict(zip(columns, row, strict=True))
                for row in relation.select(*columns).fetchall()}


@pytest.fixture
def world(make_sandbox, synced, tmp_path: Path):
    """A sandbox whose clock moves only when told, a full sync into lake A (a copy of the shared one, of the
    same world), and a receiver registered."""
    server = make_sandbox(**FROZEN_WORLD, webhook_tick_seconds=0)  # deliveries only when the test ticks
    first = SyncResult(synced.stats, copy_lake(synced.workdir / "data", tmp_path / "a" / "data"))
    journal_path = tmp_path / "journal.sqlite"
    with make_client(server, tmp_path / "a") as client:
        registered: dict = {}  # the receiver starts first, to have a URL; the secret comes with the webhook
        with ReceiverThread(journal_path, lambda: registered["secret"], heartbeat_seconds=0.2) as receiver:
            registration = register_webhook(client, receiver.url)
            registered["secret"] = registration.secret
            yield server, first, journal_path, receiver, registration


@pytest.mark.slow
def test_a_targeted_refresh_loads_what_a_full_sync_loads_for_a_fraction_of_the_requests(world, tmp_path):
    server, first, journal_path, _, _ = world
    advance_clock(server, 6 * HOURS)
    delivered = deliver_webhooks(server)
    with NotificationJournal(journal_path) as journal:
        pending = journal.pending()
        assert pending, f"the sandbox delivered nothing: {delivered}"
        named = set().union(*(shipments_named(n.document) for n in pending))
        carried = {resource["id"] for n in pending for resource in n.document.get("included", [])
                   if resource.get("type") == "container"}
        with make_client(server, tmp_path / "a") as client:
            result = refresh_from_notifications(client, ducklake_target(lake_in(tmp_path / "a" / "data")), journal,
                                                pipelines_dir=tmp_path / "a" / "dlt")
        assert journal.pending() == [] and journal.counts()["applied"] == len(pending)
    assert result.failed == {} and result.shipments == len(named)
    with first.store.connect(read_only=True, search_path=("ocean_tracking",)) as con:  # each with its load's commit
        applied = con.execute("select n.id from notifications_applied n join _dlt_loads l on l.load_id = n._dlt_load_id "
                              "where l.inserted_at >= n.received_at").fetchall()
    assert sorted(row[0] for row in applied) == sorted(n.id for n in pending)
    refreshed_requests = sum(result.api_stats["requests"].values())
    second = sync_once(server, tmp_path / "b", include_maps=False)  # the same instant: the clock stands still
    assert refreshed_requests * 10 <= second.requests, (refreshed_requests, second.requests)
    for table, key in COMPARED_TABLES.items():
        targeted, full = rows_of(first, table, key, named), rows_of(second, table, key, named)
        differing = {(row_id, column) for row_id in full for column in full[row_id]
                     if targeted.get(row_id, {}).get(column) != full[row_id][column]
                     and not (table == "containers" and row_id not in carried and column in POLL_STAMPS)}
        assert not differing, f"{table}: the targeted refresh differs from the full sync: {sorted(differing)[:10]}"
        assert targeted.keys() == full.keys()
        assert full, f"{table}: nothing to compare"


def test_an_older_notification_after_a_newer_one_changes_nothing(world, tmp_path):
    server, first, journal_path, receiver, registration = world
    advance_clock(server, 6 * HOURS)
    deliver_webhooks(server)
    target = ducklake_target(lake_in(tmp_path / "a" / "data"))
    with NotificationJournal(journal_path) as journal, make_client(server, tmp_path / "a") as client:
        newest = journal.pending()[-1]
        refresh_from_notifications(client, target, journal, pipelines_dir=tmp_path / "a" / "dlt")
        shipment_id = sorted(shipments_named(newest.document))[0]
        before = rows_of(first, "shipments", "id", {shipment_id})
        stale = json.loads(json.dumps(newest.document))
        stale["data"]["id"] = "stale-" + newest.id
        stale["data"]["attributes"]["created_at"] = "2020-01-01T00:00:00Z"
        for resource in stale["included"]:
            if resource["type"] == "shipment":
                resource["attributes"]["pod_eta_at"] = "2020-02-02T00:00:00Z"
        raw = json.dumps(stale).encode()
        answer = requests.post(receiver.url, data=raw, timeout=10, headers={
            "Content-Type": "application/json", "X-T49-Webhook-Signature": signature(raw, registration.secret)})
        assert answer.status_code == 200
        late = refresh_from_notifications(client, target, journal, pipelines_dir=tmp_path / "a" / "dlt")
    assert (late.applied, late.superseded) == (0, 1)
    assert rows_of(first, "shipments", "id", {shipment_id}) == before


@pytest.mark.slow
def test_register_then_serve_then_refresh_from_the_command_line(make_sandbox, synced_copy, tmp_path, capsys,
                                                                 monkeypatch):
    """The README's three commands: `webhooks register` stores the secret (never printed), a second run
    updates the same webhook, and `refresh` applies what the receiver journaled (into the lake a sync left: a
    copy of the shared one, of the same world)."""
    from pipelines.cli import main

    server = make_sandbox(**FROZEN_WORLD, webhook_tick_seconds=0)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__API_KEY", FULL_KEY)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BASE_URL", server.base_url)
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS", "0.05")
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__LIMITER_PATH", str(tmp_path / "limiter.sqlite"))
    monkeypatch.setenv("OCEAN_TRACKING_PIPELINES_DIR", str(tmp_path / "cli-dlt"))  # restored from the lake
    secrets_file = tmp_path / "secrets.toml"
    registered: dict = {}
    with ReceiverThread(webhook_journal_path(), lambda: registered["secret"]) as receiver:
        for _ in range(2):
            assert main(["webhooks", "register", "--url", receiver.url, "--secrets-file", str(secrets_file)]) == 0
        said = capsys.readouterr().out
        registered["secret"] = tomllib.loads(secrets_file.read_text())["sources"]["ocean_tracking"]["webhook_secret"]
        assert "created" in said and "updated" in said and registered["secret"] not in said
        assert oct(secrets_file.stat().st_mode & 0o777) == "0o600"
        advance_clock(server, 6 * HOURS)
        deliver_webhooks(server)
    assert main(["refresh"]) == 0
    assert "Applied" in capsys.readouterr().out
    with NotificationJournal() as journal:
        assert journal.pending() == [] and journal.counts()["applied"] > 0


def test_a_map_refresh_stops_fetching_when_notifications_wait_and_loads_what_it_has(world, tmp_path):
    server, _, _, _, _ = world
    advance_clock(server, 6 * HOURS)  # maps at sea age: the scheduler has more than the budget to choose from
    asked: list[int] = []

    def notifications_waiting() -> bool:  # the fourth map finds a notification waiting
        asked.append(1)
        return len(asked) > 3

    target = ducklake_target(lake_in(tmp_path / "a" / "data"))
    with make_client(server, tmp_path / "a") as client:
        # a bound of a second: every map at sea is due (the maps were fetched seconds ago by the wall clock)
        result = refresh_maps(client, target, 20, bound_seconds=1, pipelines_dir=tmp_path / "a" / "dlt",
                              yield_to=notifications_waiting)
    assert len(result.plan.chosen) == 20 and len(asked) == 4
    assert (result.maps_fetched, result.yielded) == (3, True)
    assert sum(result.api_stats["requests"].values()) == 3  # one GeoJSON a map, none after yielding
    (load_id,) = result.loaded.load_info.loads_ids
    with lake_in(tmp_path / "a" / "data").connect(read_only=True, search_path=("ocean_tracking",)) as con:
        loaded = con.execute("select count(distinct container_id) from map_features where _dlt_load_id = ?",
                             [load_id]).fetchone()[0]
    assert loaded == 3
