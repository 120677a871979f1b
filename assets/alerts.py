"""Failures reach people outside the UI: a failed run and a failed asset check post a compact JSON message
to a webhook and, when SMTP is configured, send an e-mail.

- `run_failure_alert_sensor` (`@dg.run_failure_sensor`): every failed run of a job of this code location.
- `asset_check_failure_alert_sensor`: every finished run (succeeded or failed) of this code location
  whose checks failed, one message a run: checks that did not pass with severity ERROR (WARN stays in
  the UI) and checks whose execution failed (planned in a step that failed, with no result). Dagster 1.13
  has no sensor for check results, and a storage-id cursor over ASSET_CHECK_EVALUATION events fails on
  the run-sharded SQLite storage of dagster.yaml (ids restart in each run's shard). So it follows the
  RUN_SUCCESS and RUN_FAILURE events (ids from the index shard on every storage, as `run_status_sensor`)
  and reads each finished run's check events: a check is reported once its run ends, and a failed run
  with failed checks gets both sensors' messages.

Both start RUNNING when a webhook URL or an SMTP host is set when the code location loads, else STOPPED
(the UI can still start them). Everything else is read when an alert is sent. The webhook URL (it may
carry a token) and the SMTP password are never logged nor put into an event; error messages are
redacted of them (and of the API key). The webhook is posted with `urllib.request`, which logs nothing:
`requests`' urllib3 logs the URL's path, token included, at DEBUG. A channel is tried `ALERT_ATTEMPTS`
times (not again after a 4xx or an SMTP 5xx); one that failed them all logs one line and rests a
minute, so a dead channel cannot stretch a tick past its time limit. A failure to alert never fails
the sensor: its cursor moves on.
"""

import json
import logging
import os
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import dagster as dg

from pipelines.settings import (
    ALERT_ATTEMPTS,
    ALERT_EMAIL_FROM_ENV,
    ALERT_EMAIL_TO_ENV,
    ALERT_SMTP_HOST_ENV,
    ALERT_SMTP_PASSWORD_ENV,
    ALERT_SMTP_PORT_ENV,
    ALERT_SMTP_SECURITY_ENV,
    ALERT_SMTP_USER_ENV,
    ALERT_TIMEOUT_ENV,
    ALERT_UI_URL_ENV,
    ALERT_WEBHOOK_URL_ENV,
    API_KEY_ENV,
    DEFAULT_ALERT_TIMEOUT_SECONDS,
)

LOGGER = logging.getLogger(__name__)
MAX_ERROR_CHARS = 300
MAX_CHECKS_PER_ALERT = 20
RUNS_PER_TICK = 25  # finished runs read per status and tick; the cursor takes the rest next tick
BACKOFF_SECONDS = 0.5  # before the 2nd attempt; doubles after
CHANNEL_REST_SECONDS = 60.0
SMTP_PORTS = {"ssl": 465, "starttls": 587, "none": 25}
DEFAULT_FROM = "ocean-tracking@localhost"
REDACTED = "***"
Event = dg.DagsterEventType
WATCHED_RUN_EVENTS = {"success": Event.RUN_SUCCESS, "failure": Event.RUN_FAILURE}
CHECK_EVENTS = {Event.ASSET_CHECK_EVALUATION, Event.ASSET_CHECK_EVALUATION_PLANNED, Event.STEP_FAILURE}


def _env(name: str) -> str:
    return (os.environ.get(name) or "").strip()


def alerts_configured() -> bool:
    """Whether a channel is configured: a webhook URL or an SMTP host in the environment."""
    return bool(_env(ALERT_WEBHOOK_URL_ENV) or _env(ALERT_SMTP_HOST_ENV))


def default_status() -> dg.DefaultSensorStatus:
    """RUNNING when a channel is configured, else STOPPED: alerts are off until configured."""
    return dg.DefaultSensorStatus.RUNNING if alerts_configured() else dg.DefaultSensorStatus.STOPPED


# ---- secrets -----------------------------------------------------------------------------------------


def secret_values() -> list[str]:
    """The secret strings an error message could carry, longest first: the webhook URL and the parts a
    token hides in (path, query, long path segments and query values, password), the SMTP password and
    the API key. Read now, so a value changed since the code location loaded is redacted too."""
    values = [_env(ALERT_SMTP_PASSWORD_ENV), _env(API_KEY_ENV)]
    url = _env(ALERT_WEBHOOK_URL_ENV)
    if url:
        parts = urlsplit(url)
        values += [url, parts.path, parts.query, f"{parts.path}?{parts.query}", parts.password or ""]
        values += [segment for segment in parts.path.split("/") if len(segment) >= 8]
        values += [value for _, value in parse_qsl(parts.query) if len(value) >= 8]
    return sorted({value for value in values if len(value) >= 4}, key=len, reverse=True)


def redact(text: str, secrets: Sequence[str] | None = None) -> str:
    """`text` with every secret (`secret_values()` unless given) replaced by `***`."""
    for secret in secret_values() if secrets is None else secrets:
        text = text.replace(secret, REDACTED)
    return text


def first_line(text: str | None, limit: int = MAX_ERROR_CHARS) -> str:
    """The first non-blank line of `text`, at most `limit` characters."""
    line = next((line.strip() for line in (text or "").splitlines() if line.strip()), "")
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(error: BaseException) -> str:
    """One redacted line naming an exception: its class and its message's first line."""
    message = first_line(str(error))
    return redact(f"{type(error).__name__}: {message}" if message else type(error).__name__)


# ---- messages ----------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Alert:
    """One message: `payload` is the webhook's JSON; its `text` is the e-mail's subject."""

    payload: dict[str, Any]

    @property
    def subject(self) -> str:
        """The one-line summary (the e-mail's subject)."""
        return first_line(self.payload["text"], 200)

    def json(self) -> bytes:
        """The compact JSON the webhook receives."""
        return json.dumps(self.payload, separators=(",", ":"), ensure_ascii=False).encode()

    def email_body(self) -> str:
        """The e-mail's text: the summary, the run's link, then the payload indented."""
        link = f"\n{self.payload['url']}\n" if self.payload.get("url") else ""
        return f"{self.payload['text']}\n{link}\n{json.dumps(self.payload, indent=2, ensure_ascii=False)}\n"


def run_url(run_id: str) -> str | None:
    """The run's page in the Dagster UI when $OCEAN_TRACKING_ALERT_UI_URL names the UI, else None."""
    base = _env(ALERT_UI_URL_ENV).rstrip("/")
    return f"{base}/runs/{run_id}" if base else None


def error_line(error: Any) -> str:
    """The first line of a step's error (a `SerializableErrorInfo`), below Dagster's wrappers: the
    user code's own exception, e.g. `ValueError: no rows`, not `Error occurred while executing op`."""
    while error is not None and error.cause is not None and (error.cls_name or "").startswith("Dagster"):
        error = error.cause
    return first_line(error.message) if error is not None else ""


def _with_url(payload: dict[str, Any], run_id: str) -> dict[str, Any]:
    url = run_url(run_id)
    return {**payload, "url": url} if url else payload


def run_failure_alert(
    run: dg.DagsterRun, failure_message: str | None, step_failures: Sequence[dg.DagsterEvent]
) -> Alert:
    """The message for a failed run: its job, id, first failed step and that step's error's first line
    (the run's own failure message when no step failed, e.g. a run worker that died)."""
    secrets = secret_values()
    steps = [event.step_key for event in step_failures if event.step_key]
    error = next((error_line(event.event_specific_data.error) for event in step_failures), "")
    error = redact(error or first_line(failure_message), secrets)
    step = steps[0] if steps else None
    where = f", step {step}" if step else ""
    payload = {
        "event": "run_failure",
        "text": f"Dagster run failed: job {run.job_name} (run {run.run_id[:8]}){where}: {error}",
        "job": run.job_name,
        "run_id": run.run_id,
        "step": step,
        "error": error,
        "failed_steps": steps[:MAX_CHECKS_PER_ALERT],
    }
    return Alert(_with_url(payload, run.run_id))


@dataclass(frozen=True)
class CheckFailure:
    """A check that did not pass with severity ERROR (`failed`) or whose step failed before it reported
    (`execution_failed`)."""

    check: str  # `asset/key:check_name`
    asset: str
    status: str
    step: str | None
    error: str


def check_failures(instance: dg.DagsterInstance, run_id: str) -> list[CheckFailure]:
    """The failed checks of one run, read from its own event log (cheap on every storage)."""
    failures: list[CheckFailure] = []
    evaluated: set[dg.AssetCheckKey] = set()
    planned: dict[dg.AssetCheckKey, str | None] = {}
    failed_steps: dict[str, str] = {}
    cursor = None
    while True:
        connection = instance.get_records_for_run(run_id, cursor=cursor, of_type=CHECK_EVENTS, limit=1000)
        for record in connection.records:
            entry = record.event_log_entry
            event = entry.dagster_event
            if event is None:
                continue
            data = event.event_specific_data
            if event.event_type == Event.STEP_FAILURE:
                failed_steps[entry.step_key or ""] = error_line(data.error)
            elif event.event_type == Event.ASSET_CHECK_EVALUATION_PLANNED:
                planned[data.asset_check_key] = entry.step_key
            else:
                evaluated.add(data.asset_check_key)
                if not data.passed and data.severity == dg.AssetCheckSeverity.ERROR:
                    key, step = data.asset_check_key, entry.step_key
                    failures.append(_failure(key, "failed", step, data.description))
        if not connection.has_more:
            break
        cursor = connection.cursor
    for key, step in planned.items():
        if key not in evaluated and (step or "") in failed_steps:
            failures.append(_failure(key, "execution_failed", step, failed_steps[step or ""]))
    return failures


def _failure(key: dg.AssetCheckKey, status: str, step: str | None, error: str | None) -> CheckFailure:
    fallback = "did not pass" if status == "failed" else "the step failed before the check reported"
    check, asset = key.to_user_string(), key.asset_key.to_user_string()
    return CheckFailure(check, asset, status, step, first_line(error) or fallback)


def check_failure_alert(run: dg.DagsterRun, failures: Sequence[CheckFailure]) -> Alert:
    """The message for one run's failed checks: the first one's step and error at the top (as in a
    run failure), then up to `MAX_CHECKS_PER_ALERT` checks and how many more there were."""
    secrets = secret_values()
    checks = [{**asdict(failure), "error": redact(failure.error, secrets)} for failure in failures]
    first = checks[0]
    summary = f"{first['check']}: {first['error']}"
    others = f" (+{len(checks) - 1} more)" if len(checks) > 1 else ""
    payload = {
        "event": "asset_check_failure",
        "text": f"{len(checks)} asset check(s) failed in job {run.job_name} (run {run.run_id[:8]}): {summary}{others}",
        "job": run.job_name,
        "run_id": run.run_id,
        "run_status": run.status.value,
        "step": first["step"],
        "error": first["error"],
        "checks": checks[:MAX_CHECKS_PER_ALERT],
    }
    if len(checks) > MAX_CHECKS_PER_ALERT:
        payload["more_checks"] = len(checks) - MAX_CHECKS_PER_ALERT
    return Alert(_with_url(payload, run.run_id))


# ---- channels ----------------------------------------------------------------------------------------


class AlertError(Exception):
    """A channel's failure, its message safe to log (it names no secret); another attempt may help."""

    permanent = False


class PermanentAlertError(AlertError):
    """A failure that another attempt would not fix (a 4xx, a refused login, a bad setting)."""

    permanent = True


def timeout_seconds() -> float:
    """Seconds an attempt may take: $OCEAN_TRACKING_ALERT_TIMEOUT_SECONDS, else 5."""
    try:
        return float(_env(ALERT_TIMEOUT_ENV) or DEFAULT_ALERT_TIMEOUT_SECONDS)
    except ValueError:
        return DEFAULT_ALERT_TIMEOUT_SECONDS


def post_webhook(url: str, alert: Alert, timeout: float) -> None:
    """POST the alert's JSON to `url`; raise on a non-2xx answer (a 4xx but 408/429 as permanent)."""
    import urllib.error
    import urllib.request

    if urlsplit(url).scheme not in ("http", "https"):
        raise PermanentAlertError(f"{ALERT_WEBHOOK_URL_ENV} is not an http(s) URL")
    request = urllib.request.Request(
        url,
        data=alert.json(),
        headers={"Content-Type": "application/json", "User-Agent": "ocean-tracking-alerts"},
        method="POST",
    )
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as error:
        error.close()
        if 400 <= error.code < 500 and error.code not in (408, 429):
            raise PermanentAlertError(f"HTTP {error.code}") from None
        raise AlertError(f"HTTP {error.code}") from None


def send_email(alert: Alert, timeout: float) -> None:
    """Send the alert by SMTP (settings from the environment, read now); an SMTP 5xx, a refused
    recipient or a missing STARTTLS is permanent. Certificates are verified for `ssl` and `starttls`."""
    import smtplib
    import ssl
    from email.message import EmailMessage

    security = (_env(ALERT_SMTP_SECURITY_ENV) or "starttls").lower()
    if security not in SMTP_PORTS:
        raise PermanentAlertError(f"{ALERT_SMTP_SECURITY_ENV} must be one of {', '.join(SMTP_PORTS)}")
    try:
        port = int(_env(ALERT_SMTP_PORT_ENV) or SMTP_PORTS[security])
    except ValueError:
        raise PermanentAlertError(f"{ALERT_SMTP_PORT_ENV} is not a port number") from None
    recipients = [address.strip() for address in _env(ALERT_EMAIL_TO_ENV).split(",") if address.strip()]
    if not recipients:
        raise PermanentAlertError(f"{ALERT_EMAIL_TO_ENV} names no recipient")
    user = _env(ALERT_SMTP_USER_ENV)
    message = EmailMessage()
    message["Subject"] = alert.subject
    message["From"] = _env(ALERT_EMAIL_FROM_ENV) or (user if "@" in user else DEFAULT_FROM)
    message["To"] = ", ".join(recipients)
    message.set_content(alert.email_body())
    host = _env(ALERT_SMTP_HOST_ENV)
    try:
        if security == "ssl":
            smtp = smtplib.SMTP_SSL(host, port, timeout=timeout, context=ssl.create_default_context())
        else:
            smtp = smtplib.SMTP(host, port, timeout=timeout)
        with smtp:
            if security == "starttls":
                smtp.starttls(context=ssl.create_default_context())
            if user:
                smtp.login(user, os.environ.get(ALERT_SMTP_PASSWORD_ENV, ""))
            smtp.send_message(message, to_addrs=recipients)
    except (smtplib.SMTPNotSupportedError, smtplib.SMTPRecipientsRefused) as error:
        raise PermanentAlertError(describe(error)) from None
    except smtplib.SMTPResponseException as error:
        if error.smtp_code >= 500:
            raise PermanentAlertError(describe(error)) from None
        raise AlertError(describe(error)) from None


_resting: dict[str, float] = {}  # channel -> monotonic time it may be tried again (shared by both sensors)
_resting_lock = threading.Lock()


class Notifier:
    """Sends alerts over the configured channels, each tried `attempts` times. A channel that failed
    every attempt logs one line and rests `rest_seconds` (alerts meanwhile log one line each)."""

    def __init__(
        self,
        log: logging.Logger | None = None,
        *,
        attempts: int = ALERT_ATTEMPTS,
        backoff_seconds: float = BACKOFF_SECONDS,
        rest_seconds: float = CHANNEL_REST_SECONDS,
    ):
        self.log = log or LOGGER
        self.attempts = max(1, attempts)
        self.backoff_seconds = backoff_seconds
        self.rest_seconds = rest_seconds

    def send(self, alert: Alert) -> dict[str, bool]:
        """Send `alert` to every configured channel; returns each channel's outcome (True: delivered)."""
        timeout = timeout_seconds()
        outcomes: dict[str, bool] = {}
        url = _env(ALERT_WEBHOOK_URL_ENV)
        if url:
            outcomes["webhook"] = self._deliver("webhook", lambda: post_webhook(url, alert, timeout), alert)
        if _env(ALERT_SMTP_HOST_ENV):
            outcomes["email"] = self._deliver("email", lambda: send_email(alert, timeout), alert)
        return outcomes

    def _deliver(self, channel: str, send: Callable[[], None], alert: Alert) -> bool:
        what = f"{alert.payload['event']} alert for run {alert.payload['run_id']}"
        with _resting_lock:
            resting = _resting.get(channel, 0.0) > time.monotonic()
        if resting:
            self.log.warning(f"{what} not sent by {channel}: it failed moments ago and is resting")
            return False
        reason, attempt = "", 0
        while attempt < self.attempts:
            attempt += 1
            try:
                send()
            except AlertError as error:
                reason = redact(str(error))
                if error.permanent:
                    break
            except Exception as error:  # any failure of a channel is logged, never raised into the sensor
                reason = describe(error)
            else:
                return True
            if attempt < self.attempts:
                time.sleep(self.backoff_seconds * 2 ** (attempt - 1))
        with _resting_lock:
            _resting[channel] = time.monotonic() + self.rest_seconds
        self.log.warning(f"{what} not sent by {channel} after {attempt} attempt(s): {reason}")
        return False


def reset_channels() -> None:
    """Let every resting channel be tried again at once (tests; a changed configuration)."""
    with _resting_lock:
        _resting.clear()


# ---- sensors -----------------------------------------------------------------------------------------


@dg.run_failure_sensor(
    name="run_failure_alert_sensor",
    default_status=default_status(),
    description=(
        "Posts every failed run of this code location to $OCEAN_TRACKING_ALERT_WEBHOOK_URL and e-mails it "
        "when $OCEAN_TRACKING_ALERT_SMTP_HOST is set. Running by default only when one of them is set."
    ),
)
def run_failure_alert_sensor(context: dg.RunFailureSensorContext):
    """Alert on a failed run: job, run id, first failed step, its error's first line, a link to the run."""
    run, failure = context.dagster_run, context.failure_event
    Notifier(context.log).send(run_failure_alert(run, failure.message, context.get_step_failure_events()))


def _same_code_location(context: dg.SensorEvaluationContext, run: dg.DagsterRun) -> bool:
    """Whether `run` belongs to the sensor's code location and repository, as `run_status_sensor`
    decides (both None for a run executed in process and a sensor evaluated in a test)."""
    repository = run.remote_job_origin.repository_origin if run.remote_job_origin else None
    run_place = (
        (repository.code_location_origin.location_name, repository.repository_name)
        if repository
        else (None, None)
    )
    location = context.code_location_origin.location_name if context.code_location_origin else None
    return run_place == (location, context.repository_name)


def _latest_storage_id(instance: dg.DagsterInstance, event_type: dg.DagsterEventType) -> int:
    records = instance.fetch_run_status_changes(event_type, limit=1).records
    return records[0].storage_id if records else -1


def _parse_cursor(text: str | None) -> dict[str, int] | None:
    """The storage id of the last RUN_SUCCESS and RUN_FAILURE event read; None when unset or unreadable."""
    try:
        cursor = {name: int(value) for name, value in json.loads(text or "").items()}
    except (ValueError, TypeError, AttributeError):
        return None
    return cursor if set(cursor) == set(WATCHED_RUN_EVENTS) else None


@dg.sensor(
    name="asset_check_failure_alert_sensor",
    minimum_interval_seconds=60,
    default_status=default_status(),
    description=(
        "Posts the failed asset checks (severity ERROR, or whose execution failed) of each finished run of "
        "this code location to $OCEAN_TRACKING_ALERT_WEBHOOK_URL, e-mails them when "
        "$OCEAN_TRACKING_ALERT_SMTP_HOST is set. Running by default only when one of them is set."
    ),
)
def asset_check_failure_alert_sensor(context: dg.SensorEvaluationContext):
    """Alert on the failed checks of runs that finished since the last tick. The first tick only notes
    where the event log ends: alerts start with the runs that finish after the sensor starts."""
    instance = context.instance
    cursor = _parse_cursor(context.cursor)
    if cursor is None:
        cursor = {name: _latest_storage_id(instance, event) for name, event in WATCHED_RUN_EVENTS.items()}
        context.update_cursor(json.dumps(cursor))
        return dg.SkipReason("Watching the asset checks of runs that finish from now on")
    notifier, runs, alerts = Notifier(context.log), 0, 0
    for name, event_type in WATCHED_RUN_EVENTS.items():
        records = instance.fetch_run_status_changes(
            dg.RunStatusChangeRecordsFilter(event_type=event_type, after_storage_id=cursor[name]),
            limit=RUNS_PER_TICK,
            ascending=True,
        ).records
        for record in records:
            cursor[name] = record.storage_id
            run = instance.get_run_by_id(record.event_log_entry.run_id)
            if run is None or not _same_code_location(context, run):
                continue
            runs += 1
            failures = check_failures(instance, run.run_id)
            if failures:
                alerts += 1
                notifier.send(check_failure_alert(run, failures))
    context.update_cursor(json.dumps(cursor))
    return dg.SkipReason(f"{runs} finished run(s) read, {alerts} with failed checks alerted")


alert_sensors = [run_failure_alert_sensor, asset_check_failure_alert_sensor]
