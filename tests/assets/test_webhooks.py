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

from assets.ingest import (
    KEY_PREFIX,
    MAPS_YIELDED_TAG,
    NOTIFICATIONS_APPLIED_TAG,
    asset_key,
    ocean_tracking_assets,
)
from assets.models import model_assets
from assets.webhooks import (
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
from tests.support.lakes import copy_lake, lake_in
from tests.support.notifications import body, notification
from tests.support.sandboxes import FROZEN_WORLD, advance_clock
from tests.support.syncs import make_client


def _evaluate(sensor, instance) -> dg.SensorResult | dg.SkipReason | dg.RunRequest:
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
    return result


def test_the_notifications_sensor_waits_for_a_journal_then_requests_one_refresh_a_batch(dagster_instance):
    assert "no webhook journal" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.record(body(notification("n-1")))
    tick = _evaluate(webhook_notifications_sensor, dagster_instance)
    assert [request.run_key for request in tick.run_requests] == ["notifications-n-1"]
    assert tick.run_requests[0].tags["dagster/priority"] == "10"  # ahead of the map and page runs in the queue
    for status in (dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTED):  # it will apply what is pending
        dagster_instance.add_run(dg.DagsterRun(job_name=apply_notifications_job.name, run_id=f"refresh-{status.value}",
                                               status=status))
        assert "a refresh that will apply them" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message
        dagster_instance.delete_run(f"refresh-{status.value}")
    # a running refresh that has applied its batch (it builds the models now): the next one is launched beside it
    dagster_instance.add_run(dg.DagsterRun(job_name=apply_notifications_job.name, run_id="building-refresh",
                                           status=dg.DagsterRunStatus.STARTED,
                                           tags={NOTIFICATIONS_APPLIED_TAG: "1"}))
    with NotificationJournal() as journal:
        journal.mark_applied(["n-1"])
        journal.record(body(notification("n-2")))
    tick = _evaluate(webhook_notifications_sensor, dagster_instance)
    assert [request.run_key for request in tick.run_requests] == ["notifications-n-2"]
    dagster_instance.add_run(dg.DagsterRun(job_name=apply_notifications_job.name, run_id="launched-beside",
                                           status=dg.DagsterRunStatus.STARTING))
    assert "a refresh that will apply them" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.mark_applied(["n-2"])
    assert "no pending notifications" in _evaluate(webhook_notifications_sensor, dagster_instance).skip_message


def test_the_map_sensor_runs_only_with_a_live_receiver_and_gives_maps_what_the_hour_left(dagster_instance):
    assert "no live webhook receiver" in _evaluate(route_map_freshness_sensor, dagster_instance).skip_message
    with NotificationJournal() as journal:
        journal.beat("http://127.0.0.1:1/webhooks", 1)
    dagster_instance.add_run(dg.DagsterRun(job_name="full_sync", run_id="spent-run",
                                           tags={f"{KEY_PREFIX}/api_requests": "4000"}))

    def map_run(run_id: str, spent: int, *, yielded: bool) -> None:
        dagster_instance.add_run(dg.DagsterRun(job_name=route_maps_job.name, run_id=run_id,
                                               status=dg.DagsterRunStatus.SUCCESS,
                                               tags={f"{KEY_PREFIX}/api_requests": str(spent),
                                                     MAPS_YIELDED_TAG: str(yielded).lower()}))

    def budget() -> int:
        (request,) = _evaluate(route_map_freshness_sensor, dagster_instance).run_requests
        return request.run_config["ops"]["ocean_tracking_ingest"]["config"]["map_budget"]

    with NotificationJournal() as journal:  # the maps wait while a notification waits
        journal.record(body(notification("n-waiting")))
        assert "notifications are waiting" in _evaluate(route_map_freshness_sensor, dagster_instance).skip_message
        journal.mark_applied(["n-waiting"])
    assert budget() == 200  # a quarter of the hour's 4800 less the others' 4000
    map_run("maps-cut-short", 300, yielded=True)  # it stopped for notifications: resumed at the next tick
    assert budget() == 200
    map_run("maps-cut-shorter", 450, yielded=True)
    assert budget() == 50  # the hour's 800, less the maps' 750
    map_run("maps-spent-the-rest", 50, yielded=True)
    assert "no budget left for maps" in _evaluate(route_map_freshness_sensor, dagster_instance).skip_message
    map_run("maps-done", 0, yielded=False)  # one that ran its course: the next waits for the quarter hour
    assert "the next is due 15 minutes after it" in _evaluate(route_map_freshness_sensor, dagster_instance).skip_message


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


def test_the_feed_check_reports_the_lag_behind_the_service_and_warns_when_changes_arrive_late():
    now = datetime.now(UTC)
    with NotificationJournal() as journal:
        journal.beat("http://127.0.0.1:1/webhooks", 1)
        for number, lag in enumerate((2, 3, 4, 50)):
            created = (now - timedelta(seconds=lag)).isoformat()
            journal.record(body(notification(f"n-{number}", created_at=created)), received_at=now)
        journal.mark_applied(["n-0", "n-1", "n-2"])
    result = webhook_feed_is_live(dg.build_asset_check_context())
    assert result.passed, result.description
    assert result.metadata["applied_last_hour"].value == 3
    assert 2 <= result.metadata["last_lag_seconds"].value < 2 + 60  # n-0: of the last applied, the newest made
    assert 3.9 <= result.metadata["lag_p95_last_hour_seconds"].value < 4 + 60
    with NotificationJournal() as journal:
        journal.mark_applied(["n-3"])
    result = webhook_feed_is_live(dg.build_asset_check_context())
    assert not result.passed and "reached the raw tables" in result.description
    assert result.metadata["lag_p95_last_hour_seconds"].value > 30


@pytest.mark.slow
def test_a_notifications_run_applies_the_journal_then_builds_the_models_it_changed(make_sandbox, built, dagster_instance,
                                                                                  tmp_path: Path):
    server = make_sandbox(**FROZEN_WORLD, webhook_tick_seconds=0)  # the lake the resources below point at: the copy
    copy_lake(built.folder / "data", tmp_path / "data")
    resources = sandbox_resources(server, tmp_path)
    registered: dict = {}
    with ReceiverThread(webhook_journal_path(), lambda: registered["secret"]) as receiver:
        with make_client(server, tmp_path) as client:
            registered["secret"] = register_webhook(client, receiver.url).secret
        advance_clock(server, 4 * 3600)
        requests.post(f"{server.root_url}/_sandbox/webhooks/tick", timeout=60).raise_for_status()
    with NotificationJournal() as journal:
        pending = {notification.id: notification for notification in journal.pending()}
    assert pending
    run = dg.materialize(
        [ocean_tracking_assets, *model_assets, webhook_feed_is_live], resources=resources, instance=dagster_instance,
        selection=apply_notifications_job.selection,
        run_config={"ops": {"ocean_tracking_ingest": {"config": {"mode": "notifications"}}}},
    )
    assert run.success
    tags = dagster_instance.get_run_by_id(run.run_id).tags
    assert tags[f"{KEY_PREFIX}/notifications_applied"] == str(len(pending))
    assert tags[f"{KEY_PREFIX}/notifications_failed"] == "0"
    with NotificationJournal() as journal:
        assert journal.counts()["applied"] == len(pending) and journal.pending() == []
        applied = {notification.id: notification for notification in journal.applied_since(datetime.min.replace(tzinfo=UTC))}
    materialized = {event.asset_key for event in run.get_asset_materialization_events()}
    # the same run built what the load changed: the marts of the containers and the freshness mart
    assert {asset_key("shipments"), asset_key("notifications_applied"), dg.AssetKey(["analytics", "container_status"]),
            dg.AssetKey(["analytics", "webhook_freshness"])} <= materialized
    # the models it left as they were are reported current too: the automation sensor requests none of them again
    assert {key for assets in model_assets for key in assets.keys} <= materialized
    rebuilt = {event.asset_key for event in run.get_asset_materialization_events()
               if event.materialization.metadata.get("rebuilt") is None}
    assert dg.AssetKey(["analytics", "webhook_freshness"]) in rebuilt
    assert registered["secret"].reveal() not in json.dumps(dict(tags))
    with lake_in(tmp_path / "data").connect(read_only=True) as con:
        (last_id, last_created, count), = con.execute(
            "select last_notification_id, last_created_at, applied_last_hour from analytics.webhook_freshness").fetchall()
        committed = con.execute("select max(inserted_at) from ocean_tracking._dlt_loads").fetchone()[0]
    newest = max(applied.values(), key=lambda notification: (notification.created_at, notification.id))
    assert count == len(pending) and last_created == max(n.created_at for n in applied.values())
    assert last_id in pending and pending[last_id].created_at == newest.created_at
    # the feed check ran in the same run, after the load: it counts what the load applied
    (check,) = [evaluation for evaluation in run.get_asset_check_evaluations()
                if evaluation.check_name == "webhook_feed_is_live"]
    assert check.metadata["applied_last_hour"].value == len(pending)
    assert committed <= max(n.applied_at for n in applied.values())
