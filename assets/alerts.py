"""Failures reach people outside the UI: a failed run and a failed asset check post a compact JSON message
to a webhook and, when SMTP is configured, send an e-mail.

The sensors are Dagster's own run status sensors: Dagster keeps their cursors, reads only this code
location's runs, notes in each run it handed to a sensor that the sensor acted on it, and starts with the
runs that finish after the sensor starts.

- `run_failure_alert_sensor` (`@dg.run_failure_sensor`): every failed run, then that run's failed checks.
- `asset_check_failure_alert_sensor` (`@dg.run_status_sensor` on SUCCESS): the failed checks of every
  succeeded run. Dagster 1.13 has no sensor for check results (`asset_sensor` and `multi_asset_sensor`
  read materializations only) and a run status sensor watches a single status, so the failed runs' checks
  come from the run-failure sensor: a failed run with failed checks gets both messages.
  A failed check: one that did not pass with severity ERROR (WARN stays in the UI), or one whose
  execution failed (planned in a step that failed, with no result).

Ours is only what `dg.make_email_on_run_failure_sensor` (dagster/_utils/alert.py) lacks. It takes the
password and every SMTP setting when the sensor is defined (a changed password needs a reload), always
logs in, speaks only SSL or STARTTLS (no plain SMTP to a relay on the host), has no timeout (a dead server
hangs the tick) and no retry, puts the run's failure message unredacted in its default body, and is one
more sensor per channel; Dagster has no webhook factory. So this module keeps the messages, the redaction
of secrets, and the delivery: settings read from the environment when an alert is sent, a timeout on each
attempt, `ALERT_ATTEMPTS` attempts (none more after a 4xx or an SMTP 5xx), and a minute's rest for a
channel that failed them all, so a dead channel cannot stretch a tick past its time limit. A failure to
alert is logged in one redacted line and never fails the sensor.

Both sensors start RUNNING when a webhook URL or an SMTP host is set when the code location loads, else
STOPPED (the UI can still start them). The webhook URL (it may carry a token) and the SMTP password are
never logged nor put into an event.
"""

import json
import logging
import os
import smtplib
import ssl
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from email.message import EmailMessage
from typing import Any
from urllib.parse import parse_qsl, urlsplit

import dagster as dg
import tenacity

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
BACKOFF_SECONDS = 0.5  # before the 2nd attempt; doubles after
CHANNEL_REST_SECONDS = 60.0
SMTP_PORTS = {"ssl": 465, "starttls": 587, "none": 25}
DEFAULT_FROM = "ocean-tracking@localhost"
REDACTED = "***"
Event = dg.DagsterEventType
CHECK_EVENTS = {Event.ASSET_CHECK_EVALUATION, Event.ASSET_CHECK_EVALUATION_PLANNED, Event.STEP_FAILURE}


def _env(name: str) -> str:
    return (os.environ.get(name) or "").strip()


def default_status() -> dg.DefaultSensorStatus:
    """RUNNING when a channel (a webhook URL or an SMTP host) is configured, else STOPPED: alerts are off
    until there is somewhere to send them."""
    configured = _env(ALERT_WEBHOOK_URL_ENV) or _env(ALERT_SMTP_HOST_ENV)
    return dg.DefaultSensorStatus.RUNNING if configured else dg.DefaultSensorStatus.STOPPED


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
    """`text` with every secret (`secret_values()` unless given) replaced by `***`, so that an error
    message can be logged or sent."""
    for secret in secret_values() if secrets is None else secrets:
        text = text.replace(secret, REDACTED)
    return text


def first_line(text: str | None, limit: int = MAX_ERROR_CHARS) -> str:
    """The first non-blank line of `text`, redacted, at most `limit` characters: a message stays one line.
    Redacted before it is cut, so a secret across the cut cannot survive as a fragment `redact` misses."""
    line = redact(next((line.strip() for line in (text or "").splitlines() if line.strip()), ""))
    return line if len(line) <= limit else line[: limit - 1] + "…"


def describe(error: BaseException) -> str:
    """One redacted line naming an exception (its class and its message's first line), safe to log."""
    message = first_line(str(error))
    return f"{type(error).__name__}: {message}" if message else type(error).__name__


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
        """The e-mail's plain text: the summary, the run's link, then the payload indented."""
        link = f"\n{self.payload['url']}\n" if self.payload.get("url") else ""
        return f"{self.payload['text']}\n{link}\n{json.dumps(self.payload, indent=2, ensure_ascii=False)}\n"


def _alert(run: dg.DagsterRun, event: str, text: str, **fields: Any) -> Alert:
    """A message about `run`: its job and id, `fields`, and the run's page in the Dagster UI when
    $OCEAN_TRACKING_ALERT_UI_URL names the UI."""
    base = _env(ALERT_UI_URL_ENV).rstrip("/")
    url = {"url": f"{base}/runs/{run.run_id}"} if base else {}
    return Alert({"event": event, "text": text, "job": run.job_name, "run_id": run.run_id, **fields, **url})


def error_line(error: Any) -> str:
    """The first line of a step's error (a `SerializableErrorInfo`), below Dagster's wrappers: the
    user code's own exception, e.g. `ValueError: no rows`, not `Error occurred while executing op`."""
    while error is not None and error.cause is not None and (error.cls_name or "").startswith("Dagster"):
        error = error.cause
    return first_line(error.message) if error is not None else ""


def run_failure_alert(
    run: dg.DagsterRun, failure_message: str | None, step_failures: Sequence[dg.DagsterEvent]
) -> Alert:
    """The message for a failed run: its job, id, first failed step and that step's error's first line
    (the run's own failure message when no step failed, e.g. a run worker that died), redacted."""
    steps = [event.step_key for event in step_failures if event.step_key]
    error = next((error_line(event.event_specific_data.error) for event in step_failures), "")
    error = error or first_line(failure_message)
    step = steps[0] if steps else None
    where = f", step {step}" if step else ""
    text = f"Dagster run failed: job {run.job_name} (run {run.run_id[:8]}){where}: {error}"
    return _alert(run, "run_failure", text, step=step, error=error, failed_steps=steps[:MAX_CHECKS_PER_ALERT])


def check_failures(instance: dg.DagsterInstance, run_id: str) -> list[dict[str, Any]]:
    """The failed checks of one run, read from its own event log (cheap on every storage), each as
    `check` (`asset/key:check_name`), `asset`, `status` (`failed` or `execution_failed`), `step` and
    `error`. Not Dagster's check execution records: they are read check by check (none by run), keep
    no error, and call a check whose step never ran (an upstream step failed) EXECUTION_FAILED too."""
    failures: list[dict[str, Any]] = []
    evaluated: set[dg.AssetCheckKey] = set()
    planned: dict[dg.AssetCheckKey, str | None] = {}
    step_errors: dict[str | None, str] = {}
    for record in instance.get_records_for_run(run_id, of_type=CHECK_EVENTS).records:
        entry = record.event_log_entry
        event, step = entry.dagster_event, entry.step_key
        data = event.event_specific_data if event else None
        if event is None or data is None:
            continue
        if event.event_type == Event.STEP_FAILURE:
            step_errors[step] = error_line(data.error)
        elif event.event_type == Event.ASSET_CHECK_EVALUATION_PLANNED:
            planned[data.asset_check_key] = step
        else:
            evaluated.add(data.asset_check_key)
            if not data.passed and data.severity == dg.AssetCheckSeverity.ERROR:
                failures.append(_check(data.asset_check_key, "failed", step, data.description))
    for key, step in planned.items():
        if key not in evaluated and step in step_errors:
            failures.append(_check(key, "execution_failed", step, step_errors[step]))
    return failures


def _check(key: dg.AssetCheckKey, status: str, step: str | None, error: str | None) -> dict[str, Any]:
    fallback = "did not pass" if status == "failed" else "the step failed before the check reported"
    check, asset, error = key.to_user_string(), key.asset_key.to_user_string(), first_line(error) or fallback
    return {"check": check, "asset": asset, "status": status, "step": step, "error": error}


def check_failure_alert(run: dg.DagsterRun, failures: Sequence[dict[str, Any]]) -> Alert:
    """The message for one run's failed checks: the first one's step and error at the top (as in a
    run failure), then up to `MAX_CHECKS_PER_ALERT` checks and how many more there were."""
    first = failures[0]
    others = f" (+{len(failures) - 1} more)" if len(failures) > 1 else ""
    extra = len(failures) - MAX_CHECKS_PER_ALERT
    more = {"more_checks": extra} if extra > 0 else {}
    text = (
        f"{len(failures)} asset check(s) failed in job {run.job_name} (run {run.run_id[:8]}): "
        f"{first['check']}: {first['error']}{others}"
    )
    checks = list(failures[:MAX_CHECKS_PER_ALERT])
    status, step, error = run.status.value, first["step"], first["error"]
    return _alert(
        run, "asset_check_failure", text, run_status=status, step=step, error=error, checks=checks, **more
    )


# ---- channels ----------------------------------------------------------------------------------------


class AlertError(Exception):
    """A channel's failure whose message names no secret; `permanent` when another attempt would not fix
    it (a 4xx, a refused login or recipient, a bad setting)."""

    def __init__(self, message: str, permanent: bool = False):
        super().__init__(message)
        self.permanent = permanent


def timeout_seconds() -> float:
    """Seconds an attempt may take: $OCEAN_TRACKING_ALERT_TIMEOUT_SECONDS, else 5."""
    try:
        return float(_env(ALERT_TIMEOUT_ENV) or DEFAULT_ALERT_TIMEOUT_SECONDS)
    except ValueError:
        return DEFAULT_ALERT_TIMEOUT_SECONDS


def post_webhook(url: str, alert: Alert, timeout: float) -> None:
    """POST the alert's JSON to `url`; raise on a non-2xx answer (a 4xx but 408/429 as permanent).
    `urllib.request` because it logs nothing: `requests`' urllib3 logs the URL's path, a token included,
    at DEBUG. Only http(s): urlopen would read a `file:` URL."""
    if urlsplit(url).scheme not in ("http", "https"):
        raise AlertError(f"{ALERT_WEBHOOK_URL_ENV} is not an http(s) URL", permanent=True)
    headers = {"Content-Type": "application/json", "User-Agent": "ocean-tracking-alerts"}
    request = urllib.request.Request(url, data=alert.json(), headers=headers, method="POST")
    try:
        with urllib.request.urlopen(request, timeout=timeout) as response:
            response.read()
    except urllib.error.HTTPError as error:
        error.close()
        permanent = 400 <= error.code < 500 and error.code not in (408, 429)
        raise AlertError(f"HTTP {error.code}", permanent) from None


def send_email(alert: Alert, timeout: float) -> None:
    """Send the alert as plain text by SMTP, every setting and the password read now; log in only when a
    user is set. An SMTP 5xx, a refused recipient or a missing STARTTLS is permanent. Certificates are
    verified for `ssl` and `starttls`; `none` is plain SMTP (a relay on the host)."""
    security = (_env(ALERT_SMTP_SECURITY_ENV) or "starttls").lower()
    if security not in SMTP_PORTS:
        raise AlertError(f"{ALERT_SMTP_SECURITY_ENV} must be one of {', '.join(SMTP_PORTS)}", permanent=True)
    try:
        port = int(_env(ALERT_SMTP_PORT_ENV) or SMTP_PORTS[security])
    except ValueError:
        raise AlertError(f"{ALERT_SMTP_PORT_ENV} is not a port number", permanent=True) from None
    recipients = [address.strip() for address in _env(ALERT_EMAIL_TO_ENV).split(",") if address.strip()]
    if not recipients:
        raise AlertError(f"{ALERT_EMAIL_TO_ENV} names no recipient", permanent=True)
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
        raise AlertError(describe(error), permanent=True) from None
    except smtplib.SMTPResponseException as error:
        raise AlertError(describe(error), permanent=error.smtp_code >= 500) from None


_resting: dict[str, float] = {}  # channel -> monotonic time it may be tried again (shared by both sensors)
_resting_lock = threading.Lock()


def notify(
    alert: Alert,
    log: logging.Logger | None = None,
    *,
    attempts: int = ALERT_ATTEMPTS,
    backoff_seconds: float = BACKOFF_SECONDS,
) -> dict[str, bool]:
    """Send `alert` over every configured channel; returns each channel's outcome (True: delivered).
    Never raises, so a failure to alert cannot fail a sensor's tick: see `_deliver`."""
    timeout, url = timeout_seconds(), _env(ALERT_WEBHOOK_URL_ENV)
    channels: dict[str, Callable[[], None]] = {}
    if url:
        channels["webhook"] = lambda: post_webhook(url, alert, timeout)
    if _env(ALERT_SMTP_HOST_ENV):
        channels["email"] = lambda: send_email(alert, timeout)
    log = log or LOGGER
    return {
        name: _deliver(name, send, alert, log, attempts, backoff_seconds) for name, send in channels.items()
    }


def _deliver(
    channel: str, send: Callable[[], None], alert: Alert, log: logging.Logger, attempts: int, backoff: float
) -> bool:
    """Try `send` up to `attempts` times with exponential backoff (tenacity), not again after a permanent
    failure. A channel that failed them all logs one redacted line and rests `CHANNEL_REST_SECONDS`
    (alerts meanwhile log one line each instead of waiting on it)."""
    what = f"{alert.payload['event']} alert for run {alert.payload['run_id']}"
    with _resting_lock:
        resting = _resting.get(channel, 0.0) > time.monotonic()
    if resting:
        log.warning(f"{what} not sent by {channel}: it failed moments ago and is resting")
        return False
    retrying = tenacity.Retrying(
        stop=tenacity.stop_after_attempt(max(1, attempts)),
        wait=tenacity.wait_exponential(multiplier=backoff),
        retry=tenacity.retry_if_exception(lambda error: not getattr(error, "permanent", False)),
        reraise=True,
    )
    attempt = None
    try:
        for attempt in retrying:
            with attempt:
                send()
        return True
    except Exception as error:  # whatever a channel raises is logged, never raised into the sensor
        reason = redact(str(error)) if isinstance(error, AlertError) else describe(error)
    with _resting_lock:
        _resting[channel] = time.monotonic() + CHANNEL_REST_SECONDS
    tried = attempt.retry_state.attempt_number if attempt else 1
    log.warning(f"{what} not sent by {channel} after {tried} attempt(s): {reason}")
    return False


def reset_channels() -> None:
    """Let every resting channel be tried again at once (tests; a changed configuration)."""
    with _resting_lock:
        _resting.clear()


# ---- sensors -----------------------------------------------------------------------------------------


def _alert_failed_checks(context: dg.RunStatusSensorContext) -> None:
    """Send one message for the failed checks of the run the sensor is looking at, if any failed."""
    failures = check_failures(context.instance, context.dagster_run.run_id)
    if failures:
        notify(check_failure_alert(context.dagster_run, failures), context.log)


@dg.run_failure_sensor(
    name="run_failure_alert_sensor",
    default_status=default_status(),
    description=(
        "Posts every failed run of this code location, then its failed asset checks, to "
        "$OCEAN_TRACKING_ALERT_WEBHOOK_URL and e-mails them when $OCEAN_TRACKING_ALERT_SMTP_HOST is set. "
        "Running by default only when one of them is set."
    ),
)
def run_failure_alert_sensor(context: dg.RunFailureSensorContext) -> None:
    """Alert on a failed run (job, run id, first failed step, its error's first line, a link to the run),
    then on its failed checks: the check sensor watches succeeded runs only (a run status sensor watches
    one status)."""
    failure_message, steps = context.failure_event.message, context.get_step_failure_events()
    notify(run_failure_alert(context.dagster_run, failure_message, steps), context.log)
    _alert_failed_checks(context)


@dg.run_status_sensor(
    run_status=dg.DagsterRunStatus.SUCCESS,
    name="asset_check_failure_alert_sensor",
    default_status=default_status(),
    description=(
        "Posts the failed asset checks (severity ERROR) of each succeeded run of this code location to "
        "$OCEAN_TRACKING_ALERT_WEBHOOK_URL, e-mails them when $OCEAN_TRACKING_ALERT_SMTP_HOST is set (a "
        "failed run's checks come with its run_failure_alert_sensor message). Running by default only "
        "when one of them is set."
    ),
)
def asset_check_failure_alert_sensor(context: dg.RunStatusSensorContext) -> None:
    """Alert on the failed checks of a run that succeeded (a failed ERROR check does not fail its run)."""
    _alert_failed_checks(context)


alert_sensors = [run_failure_alert_sensor, asset_check_failure_alert_sensor]
