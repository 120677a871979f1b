"""Webhook-driven freshness: apply notifications as they arrive, spend the rest of the budget on route maps.

- `webhook_notifications_sensor` reads the receiver's journal (`pipelines.webhooks`) and, when notifications
  are pending and no refresh is queued or running, launches `apply_webhook_notifications`: an ingest run in
  `notifications` mode that loads only what they name (`pipelines.sync`). It reports the notifications
  that could not be applied.
- `route_map_freshness_sensor` runs `refresh_route_maps` every 15 minutes while the receiver is alive: an
  ingest run in `maps` mode with the budget the last hour's runs left (`pipelines.source.map_schedule.map_budget`).
  While it is alive the hourly polling refresh stands down (`assets.schedules`); the daily full sync stays
  the safety net.
- `webhook_feed_is_live` (an asset check on the shipments) warns when the receiver's heartbeat stopped or
  the newest notification is older than expected.

Definitions only read the journal at a tick, never at import. With several accounts (`assets.accounts`) each
account has its own receiver and journal (`webhook_journal_<account>.sqlite`): both sensors evaluate each account
on its own (one run request per account, for its partition) and the check is partitioned by account.
"""

from datetime import UTC, datetime, timedelta

import dagster as dg

from assets.accounts import SINGLE_ACCOUNT, account_of, account_partitions, account_runs_filter, per_account
from assets.ingest import KEY_PREFIX, asset_key
from pipelines.settings import Account
from pipelines.source import TABLES
from pipelines.source.map_schedule import map_budget

NOTIFICATION_TABLES = tuple(name for name, table in TABLES.items() if table.notified)
INGEST_OP = "ocean_tracking_ingest"
MAP_INTERVAL_MINUTES = 15
DEFAULT_MANUAL_MAP_BUDGET = 300  # a refresh launched by hand; the sensor sets the budget the hour left
# The receiver beats every 10 s; three missed beats and it is down.
RECEIVER_DOWN_AFTER = timedelta(seconds=30)
# A live account sends notifications all day; none for this long is worth a look.
QUIET_FEED_AFTER = timedelta(hours=6)
RUNNING_STATUSES = [dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                    dg.DagsterRunStatus.STARTED]


def _ingest_config(**config: object) -> dict:
    return {"ops": {INGEST_OP: {"config": config}}}


apply_notifications_job = dg.define_asset_job(
    "apply_webhook_notifications",
    selection=dg.AssetSelection.assets(*(asset_key(table) for table in NOTIFICATION_TABLES)),
    config=_ingest_config(mode="notifications"),
    description="Loads what the journaled webhook notifications name: no listing, no request for complete payloads.",
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


def busy(context: dg.SensorEvaluationContext, job_name: str, account: Account = SINGLE_ACCOUNT) -> bool:
    """A run of `job_name` for `account` is queued or running: the next one waits for it."""
    runs = context.instance.get_run_records(
        dg.RunsFilter(job_name=job_name, statuses=RUNNING_STATUSES, tags=account_runs_filter(account)), limit=1)
    return bool(runs)


@dg.sensor(
    name="webhook_notifications_sensor",
    job=apply_notifications_job,
    minimum_interval_seconds=30,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="Applies journaled webhook notifications as they arrive (one refresh at a time).",
)
def webhook_notifications_sensor(context: dg.SensorEvaluationContext):
    """Launch a refresh when notifications are pending; report those that could not be applied (per account)."""
    return per_account(context, lambda account: notifications_request(context, account))


def notifications_request(context: dg.SensorEvaluationContext, account: Account) -> dg.RunRequest | dg.SkipReason:
    """The notifications sensor for one account: a refresh when its journal holds pending notifications and none
    of its refreshes is queued or running."""
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
    if busy(context, apply_notifications_job.name, account):
        return dg.SkipReason(f"{counts['pending']} pending; a refresh is already queued or running")
    return dg.RunRequest(run_key=f"notifications-{pending[0].id}",
                         tags={f"{KEY_PREFIX}/notifications_pending": str(counts["pending"])})


def spent_last_hour(instance: dg.DagsterInstance, now: datetime, exclude_job: str, account: Account = SINGLE_ACCOUNT) -> int:
    """Requests the runs of `account` spent in the last hour (their `api_requests` tags), but those of
    `exclude_job`: each account has its own budget."""
    records = instance.get_run_records(dg.RunsFilter(created_after=now - timedelta(hours=1),
                                                     tags=account_runs_filter(account)))
    return sum(int(record.dagster_run.tags.get(f"{KEY_PREFIX}/api_requests", "0"))
               for record in records if record.dagster_run.job_name != exclude_job)


@dg.sensor(
    name="route_map_freshness_sensor",
    job=route_maps_job,
    minimum_interval_seconds=MAP_INTERVAL_MINUTES * 60,
    default_status=dg.DefaultSensorStatus.RUNNING,
    description="While the webhook receiver is alive: every 15 minutes, the route maps the budget left allows.",
)
def route_map_freshness_sensor(context: dg.SensorEvaluationContext):
    """Give the maps what the last hour's runs left of the budget, for the next 15 minutes (per account)."""
    now = datetime.now(UTC)
    return per_account(context, lambda account: maps_request(context, now, account))


def maps_request(context: dg.SensorEvaluationContext, now: datetime, account: Account) -> dg.RunRequest | dg.SkipReason:
    """The map-freshness sensor for one account: a map refresh with what its last hour left of its budget,
    while its receiver is alive and none of its map refreshes is queued or running."""
    if not receiver_alive(now, account):
        return dg.SkipReason("no live webhook receiver: the hourly refresh schedule fetches the maps")
    if busy(context, route_maps_job.name, account):
        return dg.SkipReason("a map refresh is already queued or running")
    spent = spent_last_hour(context.instance, now, route_maps_job.name, account)
    budget = map_budget(MAP_INTERVAL_MINUTES, spent)
    if budget <= 0:
        return dg.SkipReason(f"no budget left for maps: the last hour's runs spent {spent} requests")
    return dg.RunRequest(run_key=f"maps-{now:%Y%m%dT%H%M}", run_config=_ingest_config(mode="maps", map_budget=budget),
                         tags={f"{KEY_PREFIX}/map_budget": str(budget)})


@dg.asset_check(asset=asset_key("shipments"), name="webhook_feed_is_live", blocking=False,
                partitions_def=account_partitions)
def webhook_feed_is_live(context: dg.AssetCheckExecutionContext) -> dg.AssetCheckResult:
    """Warn when a webhook receiver ran here but its heartbeat stopped, when the newest notification is older
    than expected, or when notifications could not be applied (the partition's account's journal). Passes
    (saying so) without webhooks."""
    from pipelines.journals import NotificationJournal

    account = account_of(context)
    if not NotificationJournal.exists(account=account):
        return dg.AssetCheckResult(passed=True, metadata={"webhooks": "not in use (no journal)"})
    now = datetime.now(UTC)
    with NotificationJournal(account=account) as journal:
        beat, newest, counts = journal.last_beat(), journal.newest_received_at(), journal.counts()
    problems = []
    if beat is None or now - beat[0] > RECEIVER_DOWN_AFTER:
        problems.append("the webhook receiver is down (no heartbeat for "
                        f"{'ever' if beat is None else f'{(now - beat[0]).total_seconds():.0f} s'})")
    if newest is None or now - newest > QUIET_FEED_AFTER:
        problems.append("no notification received for over "
                        f"{QUIET_FEED_AFTER.total_seconds() / 3600:.0f} h" if newest else "no notification received yet")
    if counts["failed"]:
        problems.append(f"{counts['failed']} notification(s) could not be applied (see `python -m pipelines webhooks status`)")
    return dg.AssetCheckResult(
        passed=not problems,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(problems) or "the receiver is alive and notifications arrive",
        metadata={
            "pending": counts["pending"], "applied": counts["applied"], "failed": counts["failed"],
            "newest_received_at": newest.isoformat() if newest else "never",
            "last_heartbeat": beat[0].isoformat() if beat else "never",
        },
    )
