"""Webhook-driven freshness: apply notifications as they arrive, spend the rest of the budget on route maps.

- `webhook_notifications_sensor` reads the receiver's journal (`pipelines.webhooks`) every 5 s and, when
  notifications are pending that no queued or running refresh will apply, launches `apply_webhook_notifications`
  (beside a run that has applied its batch and builds the models: its launch overlaps them): an
  ingest run in `notifications` mode that loads only what they name (`pipelines.sync`), then builds the models
  in the same run (what changed only: `plan_build`), so a change reaches the marts without waiting for the
  automation sensor's tick and a second run's launch. A burst of notifications becomes one run. It reports
  the notifications that could not be applied.
- `route_map_freshness_sensor` runs `refresh_route_maps` every 15 minutes while the receiver is alive and the
  maps have budget left: an ingest run in `maps` mode with what the last hour's runs left of the hour's budget
  (`pipelines.source.map_schedule.map_budget`), less what the maps spent in that hour, at most a quarter of it.
  A map refresh stops fetching when notifications arrive (they would otherwise wait minutes for its pool
  slot); the sensor, looking every minute, resumes it with the budget it did not spend once no notification
  waits (it never starts one while a notification run is queued or running, or notifications wait).
  While it is alive the hourly polling refresh stands down (`assets.schedules`); the daily full sync stays
  the safety net.
- `webhook_feed_is_live` (an asset check on the shipments, run by every refresh) warns when the receiver's
  heartbeat stopped, the newest notification is older than expected, or the last hour's changes reached the
  warehouse late; its metadata holds the lag behind the service (the warehouse's own figure is the
  `webhook_freshness` mart).

Definitions only read the journal at a tick, never at import. With several accounts (`assets.accounts`) each
account has its own receiver and journal (`webhook_journal_<account>.sqlite`): both sensors evaluate each account
on its own (one run request per account, for its partition) and the check is partitioned by account.
"""

import statistics
from datetime import UTC, datetime, timedelta

import dagster as dg

from assets.accounts import SINGLE_ACCOUNT, account_of, account_partitions, account_runs_filter, per_account
from assets.ingest import KEY_PREFIX, MAPS_YIELDED_TAG, NOTIFICATIONS_APPLIED_TAG, asset_key
from assets.models import ANALYTICS_GROUP, STAGING_GROUP
from pipelines.settings import Account
from pipelines.source import TABLES
from pipelines.source.map_schedule import map_budget

NOTIFICATION_TABLES = tuple(name for name, table in TABLES.items() if table.notified)
INGEST_OP = "ocean_tracking_ingest"
# A tick is two small queries on the journal, so 5 s instead of 30 s costs nothing worth counting and takes up
# to 25 s off a change's way to the marts (bench/realtime_freshness.py).
NOTIFICATIONS_INTERVAL_SECONDS = 5
NOTIFICATIONS_PRIORITY = "10"  # Dagster's run priority (default 0)
# A map refresh yields to notifications (`assets.ingest.targeted_load`), so the sensor looks every minute to
# resume one cut short once none waits; otherwise one refresh every quarter of an hour, each spending what the
# hour still allows the maps (at most a quarter of it), so the hour's budget holds.
MAP_INTERVAL_SECONDS = 60
MAP_CADENCE_MINUTES = 15
DEFAULT_MANUAL_MAP_BUDGET = 300  # a refresh launched by hand; the sensor sets the budget the hour left
# The receiver beats every 10 s; three missed beats and it is down.
RECEIVER_DOWN_AFTER = timedelta(seconds=30)
# A live account sends notifications all day; none for this long is worth a look.
QUIET_FEED_AFTER = timedelta(hours=6)
# The promise of the webhook path: a change in the service is in the raw tables within this, at the 95th
# percentile of the last hour's changes.
RAW_LAG_BOUND = timedelta(seconds=30)
RUNNING_STATUSES = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                    dg.DagsterRunStatus.STARTED]


def _ingest_config(**config: object) -> dict:
    return {"ops": {INGEST_OP: {"config": config}}}


apply_notifications_job = dg.define_asset_job(
    "apply_webhook_notifications",
    # every model: the models step then builds what the load changed only (`plan_build`), as after any ingest
    selection=dg.AssetSelection.assets(*(asset_key(table) for table in NOTIFICATION_TABLES))
    | dg.AssetSelection.groups(STAGING_GROUP, ANALYTICS_GROUP),
    config=_ingest_config(mode="notifications"),
    description="Loads what the journaled webhook notifications name (no listing, no request for complete "
                "payloads), then builds the models that read what changed.",
)
route_maps_job = dg.define_asset_job(
    "refresh_route_maps",
    selection=dg.AssetSelection.assets(asset_key("map_features")),
    config=_ingest_config(mode="maps", map_budget=DEFAULT_MANUAL_MAP_BUDGET),
    description="Fetches the route maps the map-freshness scheduler ranks first within the budget left.",
)


def receiver_alive(now: datetime | None = None, account: Account = SINGLE_ACCOUNT) -> bool:
    """Whether a webhook receiver beat recently on this host's journal of `account` (False when there is no
    journal)."""
    from pipelines.journals import NotificationJournal

    if not NotificationJournal.exists(account=account):
        return False
    with NotificationJournal(account=account) as journal:
        beat = journal.last_beat()
    return beat is not None and (now or datetime.now(UTC)) - beat[0] <= RECEIVER_DOWN_AFTER


def active_runs(context: dg.SensorEvaluationContext, job_name: str, account: Account = SINGLE_ACCOUNT,
                limit: int | None = None) -> list[dg.RunRecord]:
    """The runs of `job_name` for `account` that are queued, launching or running (at most `limit`)."""
    return list(context.instance.get_run_records(
        dg.RunsFilter(job_name=job_name, statuses=RUNNING_STATUSES, tags=account_runs_filter(account)), limit=limit))


def busy(context: dg.SensorEvaluationContext, job_name: str, account: Account = SINGLE_ACCOUNT) -> bool:
    """A run of `job_name` for `account` is queued or running: the next one waits for it."""
    return bool(active_runs(context, job_name, account, limit=1))


@dg.sensor(
    name="webhook_notifications_sensor",
    job=apply_notifications_job,
    minimum_interval_seconds=NOTIFICATIONS_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Applies journaled webhook notifications as they arrive, with the models (one refresh at a time).",
)
def webhook_notifications_sensor(context: dg.SensorEvaluationContext):
    """Launch a refresh when notifications are pending; report those that could not be applied (per account)."""
    return per_account(context, lambda account: notifications_request(context, account))


def notifications_request(context: dg.SensorEvaluationContext, account: Account) -> dg.RunRequest | dg.SkipReason:
    """The notifications sensor for one account: a refresh when its journal holds pending notifications that no
    queued or running refresh of it will apply (`batch_in_flight`)."""
    from pipelines.journals import NotificationJournal

    if not NotificationJournal.exists(account=account):
        return dg.SkipReason("no webhook journal: no receiver has run on this host")
    with NotificationJournal(account=account) as journal:
        counts = journal.counts()
        failed = journal.failed(limit=5) if counts["failed"] else []
        pending = journal.pending(limit=1)
    whose = "" if account.name is None else f"{account.label}: "
    for notification in failed:
        context.log.warning(f"{whose}Notification {notification.id} ({notification.event}) could not be applied: "
                            f"{notification.error}")
    if not pending:
        return dg.SkipReason(f"no pending notifications ({counts['applied']} applied, {counts['failed']} failed)")
    if batch_in_flight(context, account):
        return dg.SkipReason(f"{counts['pending']} pending; a refresh that will apply them is queued or running")
    return dg.RunRequest(run_key=f"notifications-{pending[0].id}",
                         tags={f"{KEY_PREFIX}/notifications_pending": str(counts["pending"]),
                               # first in the queue and first to the pool's slot: a change waits for no page or map
                               "dagster/priority": NOTIFICATIONS_PRIORITY})


def batch_in_flight(context: dg.SensorEvaluationContext, account: Account = SINGLE_ACCOUNT) -> bool:
    """Whether a notification refresh of `account` is queued, launching, or running without having applied its
    batch yet: the notifications pending now will be its. A run that applied its batch (the `notifications_applied`
    tag, set once its load committed) is building the models or reporting: the next refresh is launched beside it,
    so that its launch overlaps those models and its load starts as soon as they free the pool's slot, instead of a
    change that arrived meanwhile waiting for the sensor's tick and a launch after them."""
    runs = active_runs(context, apply_notifications_job.name, account)
    return any(NOTIFICATIONS_APPLIED_TAG not in record.dagster_run.tags for record in runs)


def notifications_waiting(context: dg.SensorEvaluationContext, account: Account) -> bool:
    """Whether a notification refresh of `account` is queued or running, or notifications wait for one."""
    from pipelines.journals import NotificationJournal

    if busy(context, apply_notifications_job.name, account):
        return True
    with NotificationJournal(account=account) as journal:
        return bool(journal.pending(limit=1))


def spent_last_hour(instance: dg.DagsterInstance, now: datetime, job: str, account: Account = SINGLE_ACCOUNT) -> tuple[int, int]:
    """Requests the runs of `account` spent in the last hour (their `api_requests` tags): by the runs of `job`,
    and by all the others. Each account has its own budget."""
    records = instance.get_run_records(dg.RunsFilter(created_after=now - timedelta(hours=1),
                                                     tags=account_runs_filter(account)))
    spent = [(record.dagster_run.job_name == job, int(record.dagster_run.tags.get(f"{KEY_PREFIX}/api_requests", "0")))
             for record in records]
    return sum(count for own, count in spent if own), sum(count for own, count in spent if not own)


@dg.sensor(
    name="route_map_freshness_sensor",
    job=route_maps_job,
    minimum_interval_seconds=MAP_INTERVAL_SECONDS,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="While the webhook receiver is alive: every 15 minutes, the route maps the hour's budget still "
                "allows, yielding to notifications (resumed once none waits).",
)
def route_map_freshness_sensor(context: dg.SensorEvaluationContext):
    """Give the maps what the last hour's runs left of the hour's budget (per account)."""
    now = datetime.now(UTC)
    return per_account(context, lambda account: maps_request(context, now, account))


def maps_request(context: dg.SensorEvaluationContext, now: datetime, account: Account) -> dg.RunRequest | dg.SkipReason:
    """The map-freshness sensor for one account: a map refresh with what its last hour left of its budget,
    while its receiver is alive and none of its map refreshes is queued or running."""
    if not receiver_alive(now, account):
        return dg.SkipReason("no live webhook receiver: the hourly refresh schedule fetches the maps")
    if busy(context, route_maps_job.name, account):
        return dg.SkipReason("a map refresh is already queued or running")
    if notifications_waiting(context, account):  # a map run would hold the pool's slot while it plans and loads
        return dg.SkipReason("webhook notifications are waiting: the maps wait for their refresh")
    last = context.instance.get_run_records(dg.RunsFilter(job_name=route_maps_job.name,
                                                          tags=account_runs_filter(account)), limit=1)
    if last and last[0].dagster_run.tags.get(MAPS_YIELDED_TAG) != "true" \
            and now - last[0].create_timestamp < timedelta(minutes=MAP_CADENCE_MINUTES):
        return dg.SkipReason(f"the last map refresh ran at {last[0].create_timestamp:%H:%M} UTC; the next is due "
                             f"{MAP_CADENCE_MINUTES} minutes after it")
    maps, others = spent_last_hour(context.instance, now, route_maps_job.name, account)
    budget = min(map_budget(MAP_CADENCE_MINUTES, others), map_budget(60, others) - maps)
    if budget <= 0:
        return dg.SkipReason(f"no budget left for maps: the last hour's map runs spent {maps} requests, the others "
                             f"{others}")
    return dg.RunRequest(run_key=f"maps-{now:%Y%m%dT%H%M}", run_config=_ingest_config(mode="maps", map_budget=budget),
                         tags={f"{KEY_PREFIX}/map_budget": str(budget)})


@dg.asset_check(asset=asset_key("shipments"), name="webhook_feed_is_live", blocking=False,
                partitions_def=account_partitions)
def webhook_feed_is_live(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Warn when a webhook receiver ran here but its heartbeat stopped, when the newest notification is older
    than expected, when notifications could not be applied, or when the last hour's changes reached the raw
    tables later than `RAW_LAG_BOUND` (the partition's account's journal); the lag is in the metadata. Passes
    (saying so) without webhooks."""
    from pipelines.journals import NotificationJournal

    account = account_of(context)
    if not NotificationJournal.exists(account=account):
        return dg.AssetCheckResult(passed=True, metadata={"webhooks": "not in use (no journal)"})
    now = datetime.now(UTC)
    with NotificationJournal(account=account) as journal:
        beat, newest, counts = journal.last_beat(), journal.newest_received_at(), journal.counts()
        last_hour = journal.applied_since(now - timedelta(hours=1))
    # the lag behind the service: from the service creating a notification to the load that applied it committing
    lags = sorted((n.applied_at - n.created_at).total_seconds() for n in last_hour)
    lag_p95 = statistics.quantiles(lags, n=20, method="inclusive")[-1] if len(lags) > 1 else (lags or [None])[0]
    problems = []
    if beat is None or now - beat[0] > RECEIVER_DOWN_AFTER:
        problems.append("the webhook receiver is down (no heartbeat for "
                        f"{'ever' if beat is None else f'{(now - beat[0]).total_seconds():.0f} s'})")
    if newest is None or now - newest > QUIET_FEED_AFTER:
        problems.append("no notification received for over "
                        f"{QUIET_FEED_AFTER.total_seconds() / 3600:.0f} h" if newest else "no notification received yet")
    if counts["failed"]:
        problems.append(f"{counts['failed']} notification(s) could not be applied (see `python -m pipelines webhooks status`)")
    if lag_p95 is not None and lag_p95 > RAW_LAG_BOUND.total_seconds():
        problems.append(f"the last hour's changes reached the raw tables {lag_p95:.0f} s after the service made them "
                        f"(95th percentile; bound {RAW_LAG_BOUND.total_seconds():.0f} s)")
    last = max(last_hour, key=lambda notification: (notification.applied_at, notification.created_at), default=None)
    return dg.AssetCheckResult(
        passed=not problems,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(problems) or "the receiver is alive, notifications arrive and are applied in time",
        metadata={
            "pending": counts["pending"], "applied": counts["applied"], "failed": counts["failed"],
            "newest_received_at": newest.isoformat() if newest else "never",
            "last_heartbeat": beat[0].isoformat() if beat else "never",
            "applied_last_hour": len(lags),
            "lag_p95_last_hour_seconds": dg.MetadataValue.float(round(lag_p95, 1)) if lag_p95 is not None else "none",
            "last_lag_seconds": dg.MetadataValue.float(round((last.applied_at - last.created_at).total_seconds(), 1))
            if last else "none",
            "last_applied_at": last.applied_at.isoformat() if last else "none in the last hour",
        },
    )
