"""Webhook-driven freshness in Dagster: the notifications sensor, the map-freshness sensor, the feed check,
and a real materialization in `notifications` mode against a sandbox that delivers to a real receiver."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from pathlib import Path

import dagster as dg
import pytest
import requests
from sqlalchemy import update

from assets.ingest import KEY_PREFIX, asset_key, ocean_tracking_assets
from assets.webhooks import (
    NOTIFICATION_TABLES,
    apply_notifications_job,
    route_map_freshness_sensor,
    route_maps_job,
    webhook_feed_is_live,
    webhook_notifications_sensor,
)
from pipelines.journals import NotificationJournal, heartbeat
from pipelines.settings import webhook_journal_path
from pipelines.webhooks.receiver import ReceiverThread, register_webhook
from tests.support.dagster import sandbox_resources
from tests.support.notifications import body, notification
from tests.support.sandboxes import FROZEN_WORLD, advance_clock
from tests.support.syncs import make_client


def _evaluate(sensor, instance) -> dg.SensorResult | dg.SkipReason | dg.RunRequest:
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
    return result


def test_the_notifications_sensor_waits_for_a_journal_then_requests_one_refresh_at_a_time(dagster_instance):
    assert "no webhook journal" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.record(body(notification("n-1")))
    tick = _evaluate(webhook_notifications_sensor, dagster_instance)
    assert [request.run_key for request in tick.run_requests] == ["notifications-n-1"]
    dagster_instance.add_run(dg.DagsterRun(job_name=apply_notifications_job.name, run_id="running-refresh",
                                           status=dg.DagsterRunStatus.STARTED))
    assert "already queued or running" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.mark_applied(["n-1"])
    assert "no pending notifications" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message


def test_the_map_sensor_runs_only_with_a_live_receiver_and_gives_maps_what_the_hour_left(dagster_instance):
    assert "no live webhook receiver" in _evaluate(route_map_freshness_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.beat("http://127.0.0.1:1/webhooks", 1)
    dagster_instance.add_run(dg.DagsterRun(job_name="full_sync", run_id="spent-run",
                                           tags={f"{KEY_PREFIX}/api_requests": "4000"}))
    tick = _evaluate(route_map_freshness_sensor, dagster_instance)
    (request,) = tick.run_requests
    config = request.run_config["ops"]["ocean_tracking_ingest"]["config"]
    assert config == {"mode": "maps", "map_budget": 200}  # (4800 - 4000) / 4 for 15 minutes
    assert route_maps_job.name == "refresh_route_maps"


def test_the_feed_check_passes_without_webhooks_and_warns_when_the_receiver_is_down():
    assert webhook_feed_is_live(dg.build_asset_check_context()).passed
    with NotificationJournal() as journal:
        journal.record(body(notification("n-1", created_at="2026-11-20T00:00:00Z")),
                       received_at=datetime.now(UTC) - timedelta(hours=7))
        journal.beat("http://127.0.0.1:1/webhooks", 1)
    result = webhook_feed_is_live(dg.build_asset_check_context())
    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert "receiver is down" not in result.description and "no notification received for over 6 h" in result.description
    with NotificationJournal() as journal:
        with journal._db.connect() as connection:  # a receiver that stopped beating long ago
            connection.execute(update(heartbeat).values(beat_at="2020-01-01T00:00:00+00:00"))
        journal.mark_failed("n-1", "shipment x is not found at the service")
    result = webhook_feed_is_live(dg.build_asset_check_context())
    assert "receiver is down" in result.description and "1 notification(s) could not be applied" in result.description
    assert webhook_journal_path().exists()


@pytest.mark.slow
def test_a_notifications_run_applies_the_journal_through_dagster(make_sandbox, synced_copy, dagster_instance,
                                                                   tmp_path: Path):
    server = make_sandbox(**FROZEN_WORLD, webhook_tick_seconds=0)  # the lake the resources below point at: the copy
    resources = sandbox_resources(server, tmp_path)
    registered: dict = {}
    with ReceiverThread(webhook_journal_path(), lambda: registered["secret"]) as receiver:
        with make_client(server, tmp_path) as client:
            registered["secret"] = register_webhook(client, receiver.url).secret
        advance_clock(server, 4 * 3600)
        requests.post(f"{server.root_url}/_sandbox/webhooks/tick", timeout=60).raise_for_status()
    with NotificationJournal() as journal:
        pending = len(journal.pending())
    assert pending > 0
    run = dg.materialize(
        [ocean_tracking_assets], resources=resources, instance=dagster_instance,
        selection=dg.AssetSelection.assets(*(asset_key(table) for table in NOTIFICATION_TABLES)),
        run_config={"ops": {"ocean_tracking_ingest": {"config": {"mode": "notifications"}}}},
    )
    assert run.success
    tags = dagster_instance.get_run_by_id(run.run_id).tags
    assert tags[f"{KEY_PREFIX}/notifications_applied"] == str(pending)
    assert tags[f"{KEY_PREFIX}/notifications_failed"] == "0"
    with NotificationJournal() as journal:
        assert journal.counts()["applied"] == pending and journal.pending() == []
    materialized = {event.asset_key for event in run.get_asset_materialization_events()}
    assert asset_key("shipments") in materialized
    assert registered["secret"].reveal() not in json.dumps(dict(tags))
