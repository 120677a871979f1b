"""The failure alerts against real receivers on loopback (an HTTP server and a small SMTP server, each in a
thread) and real Dagster: tiny jobs and asset checks executed in process on a throwaway instance (the
run-sharded SQLite storage of dagster.yaml), the sensors (Dagster's run status sensors) evaluated tick by
tick on its event log."""

from __future__ import annotations

import base64
import json
import logging
import os
import socket
import socketserver
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from email import message_from_bytes, policy
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import dagster as dg
import pytest

from assets import alerts
from assets.alerts import Alert, asset_check_failure_alert_sensor, notify, redact, run_failure_alert_sensor
from pipelines import settings

REPO = Path(__file__).resolve().parents[2]
TOKEN = "T0K3N-s3cr3t-9f8e7d6c5b4a"
QUERY_SECRET = "qs-secret-0123456789"
SMTP_PASSWORD = "smtp-pa55word-xyz"
ALERT_ENVS = [
    value for name, value in vars(settings).items() if name.startswith("ALERT_") and name.endswith("_ENV")
]


# ---- receivers ----------------------------------------------------------------------------------------


class WebhookReceiver:
    """An HTTP server on loopback recording every POST; answers the queued statuses, then 200."""

    def __init__(self) -> None:
        self.posts: list[dict] = []
        self.statuses: list[int] = []
        self.delay = 0.0
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self):
                body = self.rfile.read(int(self.headers["Content-Length"]))
                receiver.posts.append(
                    {
                        "path": self.path,
                        "content_type": self.headers["Content-Type"],
                        "json": json.loads(body),
                    }
                )
                time.sleep(receiver.delay)
                try:
                    self.send_response(receiver.statuses.pop(0) if receiver.statuses else 200)
                    self.end_headers()
                    self.wfile.write(b"ok")
                except OSError:  # the client gave up waiting (the timeout test)
                    pass

            def log_message(self, *args):  # the path carries the token: keep it off stderr
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def url(self, path: str) -> str:
        return f"http://127.0.0.1:{self.server.server_address[1]}{path}"

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


class SmtpReceiver:
    """A minimal SMTP server on loopback (EHLO, AUTH PLAIN, MAIL, RCPT, DATA, QUIT) keeping each message;
    it offers no STARTTLS."""

    def __init__(self) -> None:
        self.messages: list[dict] = []
        receiver = self

        class Handler(socketserver.StreamRequestHandler):
            def reply(self, *lines: str) -> None:
                self.wfile.write("".join(f"{line}\r\n" for line in lines).encode())

            def handle(self):
                mail: dict = {"to": [], "auth": None}
                self.reply("220 localhost test SMTP")
                while line := self.rfile.readline():
                    command = line.decode().strip()
                    verb = command.split(" ", 1)[0].upper()
                    if verb == "EHLO":
                        self.reply("250-localhost", "250-AUTH PLAIN", "250 8BITMIME")
                    elif verb == "AUTH":
                        mail["auth"] = base64.b64decode(command.split()[2]).split(b"\0")
                        self.reply("235 2.7.0 accepted")
                    elif verb == "MAIL":
                        mail["from"] = command
                        self.reply("250 ok")
                    elif verb == "RCPT":
                        mail["to"].append(command.split(":", 1)[1].strip(" <>"))
                        self.reply("250 ok")
                    elif verb == "DATA":
                        self.reply("354 go on")
                        data = b""
                        while (chunk := self.rfile.readline()) != b".\r\n":
                            data += chunk
                        mail["message"] = message_from_bytes(data, policy=policy.default)
                        receiver.messages.append(mail)
                        mail = {"to": [], "auth": mail["auth"]}
                        self.reply("250 queued")
                    elif verb == "QUIT":
                        self.reply("221 bye")
                        return
                    else:
                        self.reply("502 not implemented")

        self.server = socketserver.ThreadingTCPServer(("127.0.0.1", 0), Handler)
        self.server.daemon_threads = True
        self.port = self.server.server_address[1]
        threading.Thread(target=self.server.serve_forever, daemon=True).start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def webhook() -> Iterator[WebhookReceiver]:
    receiver = WebhookReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def smtp() -> Iterator[SmtpReceiver]:
    receiver = SmtpReceiver()
    yield receiver
    receiver.close()


@pytest.fixture
def alert_env(monkeypatch, webhook) -> Iterator[str]:
    """No alert setting but the webhook (its URL with a token in the path and the query) and the UI's
    URL; channels not resting. Returns the webhook URL."""
    for name in [*ALERT_ENVS, settings.API_KEY_ENV]:
        monkeypatch.delenv(name, raising=False)
    url = webhook.url(f"/hooks/{TOKEN}?token={QUERY_SECRET}")
    monkeypatch.setenv(settings.ALERT_WEBHOOK_URL_ENV, url)
    monkeypatch.setenv(settings.ALERT_UI_URL_ENV, "http://dagster.local:3000/")
    alerts.reset_channels()
    yield url
    alerts.reset_channels()


@pytest.fixture
def with_email(monkeypatch, smtp) -> SmtpReceiver:
    monkeypatch.setenv(settings.ALERT_SMTP_HOST_ENV, "127.0.0.1")
    monkeypatch.setenv(settings.ALERT_SMTP_PORT_ENV, str(smtp.port))
    monkeypatch.setenv(settings.ALERT_SMTP_SECURITY_ENV, "none")
    monkeypatch.setenv(settings.ALERT_SMTP_USER_ENV, "alerts@example.com")
    monkeypatch.setenv(settings.ALERT_SMTP_PASSWORD_ENV, SMTP_PASSWORD)
    monkeypatch.setenv(settings.ALERT_EMAIL_TO_ENV, "ops@example.com, oncall@example.com")
    return smtp


def logged(caplog, capfd) -> str:
    """Everything logged: Python logging, and what Dagster's loggers (a sensor's `context.log`) wrote to
    the process's stdout and stderr."""
    captured = capfd.readouterr()
    return caplog.text + captured.out + captured.err


def assert_no_secret(*texts: str) -> None:
    for text in texts:
        for secret in (TOKEN, QUERY_SECRET, SMTP_PASSWORD):
            assert secret not in text


# ---- Dagster: a failing job, an asset and its checks ----------------------------------------------------


@dg.op
def explode():
    raise ValueError(f"the feed is down (it answered {TOKEN})\nsecond line")


@dg.job
def failing_job():
    explode()


@dg.op
def fine():
    return 1


@dg.job
def fine_job():
    fine()


@dg.asset
def shipments():
    return 1


@dg.asset_check(asset=shipments)
def has_rows():
    return dg.AssetCheckResult(passed=False, description="0 rows in shipments\nsee the load")


@dg.asset_check(asset=shipments)
def few_issues():
    return dg.AssetCheckResult(passed=False, severity=dg.AssetCheckSeverity.WARN, description="3 issues")


@dg.asset_check(asset=shipments)
def keys_unique():
    return dg.AssetCheckResult(passed=True)


@dg.asset_check(asset=shipments)
def query_runs():
    raise RuntimeError(f"the check's query failed ({TOKEN})")


def first_tick(sensor, instance) -> str:
    """The first tick only notes where the event log ends; returns the cursor it set."""
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance))
    assert not result.run_requests and result.cursor
    return result.cursor


def tick(sensor, instance, cursor: str):
    """One tick from `cursor`; asserts the sensor failed on no run (a failure to alert is no error)."""
    result = sensor.evaluate_tick(dg.build_sensor_context(instance=instance, cursor=cursor))
    assert all(reaction.error is None for reaction in result.dagster_run_reactions)
    return result


# ---- the run-failure sensor ---------------------------------------------------------------------------


@pytest.mark.slow
def test_a_secret_across_the_cut_of_a_long_line_is_redacted_whole(monkeypatch):
    monkeypatch.setenv(settings.ALERT_WEBHOOK_URL_ENV, f"http://127.0.0.1:9/hooks/{TOKEN}")
    line = alerts.first_line("x" * (alerts.MAX_ERROR_CHARS - 10) + TOKEN + " and more")
    assert TOKEN[:8] not in line and line.endswith("…") and len(line) == alerts.MAX_ERROR_CHARS


def test_a_failed_run_is_posted_and_mailed_once(
    dagster_instance, webhook, alert_env, with_email, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    cursor = first_tick(run_failure_alert_sensor, dagster_instance)
    fine_job.execute_in_process(instance=dagster_instance)
    run = failing_job.execute_in_process(instance=dagster_instance, raise_on_error=False)
    assert not run.success
    logged(caplog, capfd)  # the op's own error (with the token in it) as Dagster logged it: not ours
    caplog.clear()

    result = tick(run_failure_alert_sensor, dagster_instance, cursor)

    [post] = webhook.posts
    assert post["path"] == f"/hooks/{TOKEN}?token={QUERY_SECRET}"  # the receiver gets the URL as configured
    assert post["content_type"] == "application/json"
    payload = post["json"]
    assert payload == {
        "event": "run_failure",
        "text": f"Dagster run failed: job failing_job (run {run.run_id[:8]}), step explode: "
        "ValueError: the feed is down (it answered ***)",
        "job": "failing_job",
        "run_id": run.run_id,
        "step": "explode",
        "error": "ValueError: the feed is down (it answered ***)",
        "failed_steps": ["explode"],
        "url": f"http://dagster.local:3000/runs/{run.run_id}",
    }
    [mail] = with_email.messages
    assert mail["to"] == ["ops@example.com", "oncall@example.com"]
    assert mail["auth"] == [b"", b"alerts@example.com", SMTP_PASSWORD.encode()]
    message = mail["message"]
    assert message["Subject"] == payload["text"]
    assert message["From"] == "alerts@example.com"
    body = message.get_content()
    assert payload["url"] in body and run.run_id in body

    # the next tick has nothing new
    tick(run_failure_alert_sensor, dagster_instance, result.cursor)
    assert len(webhook.posts) == 1 and len(with_email.messages) == 1
    assert_no_secret(logged(caplog, capfd), json.dumps(payload), str(message), result.cursor or "")


@pytest.mark.slow
def test_without_a_ui_url_the_message_has_no_link(dagster_instance, webhook, alert_env, monkeypatch):
    monkeypatch.delenv(settings.ALERT_UI_URL_ENV)
    cursor = first_tick(run_failure_alert_sensor, dagster_instance)
    failing_job.execute_in_process(instance=dagster_instance, raise_on_error=False)
    tick(run_failure_alert_sensor, dagster_instance, cursor)
    [post] = webhook.posts
    assert "url" not in post["json"]


# ---- the asset-check sensor ----------------------------------------------------------------------------


@pytest.mark.slow
def test_failed_checks_are_posted_once_a_run(dagster_instance, webhook, alert_env):
    """Succeeded runs' checks by the check sensor; a failed run's by the run-failure sensor, after the
    run's own message (a run status sensor watches one status)."""
    check_cursor = first_tick(asset_check_failure_alert_sensor, dagster_instance)
    run_cursor = first_tick(run_failure_alert_sensor, dagster_instance)
    passed = dg.materialize([shipments, has_rows, few_issues, keys_unique], instance=dagster_instance)
    assert passed.success  # a failed check does not fail its run
    crashed = dg.materialize([shipments, query_runs], instance=dagster_instance, raise_on_error=False)
    assert not crashed.success
    # nothing to report
    fine = dg.materialize([shipments, keys_unique, few_issues], instance=dagster_instance)

    result = tick(asset_check_failure_alert_sensor, dagster_instance, check_cursor)

    assert {reaction.dagster_run.run_id for reaction in result.dagster_run_reactions} == {
        passed.run_id,
        fine.run_id,
    }  # both succeeded runs read, the failed one left to the run-failure sensor
    [post] = webhook.posts
    failed = post["json"]
    assert failed["event"] == "asset_check_failure"
    assert failed["run_id"] == passed.run_id
    assert failed["run_status"] == "SUCCESS"
    assert failed["checks"] == [
        {
            "check": "shipments:has_rows",
            "asset": "shipments",
            "status": "failed",
            "step": "shipments_has_rows",
            "error": "0 rows in shipments",
        }
    ]  # the WARN check and the passing one are not there
    assert (failed["step"], failed["error"]) == ("shipments_has_rows", "0 rows in shipments")
    assert failed["url"] == f"http://dagster.local:3000/runs/{passed.run_id}"
    assert failed["text"].startswith("1 asset check(s) failed in job __ephemeral_asset_job__")

    tick(run_failure_alert_sensor, dagster_instance, run_cursor)

    run_message, execution = (post["json"] for post in webhook.posts[1:])
    assert (run_message["event"], run_message["run_id"]) == ("run_failure", crashed.run_id)
    assert run_message["step"] == "shipments_query_runs"
    assert execution["event"] == "asset_check_failure"
    assert execution["run_id"] == crashed.run_id
    assert execution["run_status"] == "FAILURE"
    assert execution["checks"] == [
        {
            "check": "shipments:query_runs",
            "asset": "shipments",
            "status": "execution_failed",
            "step": "shipments_query_runs",
            "error": "RuntimeError: the check's query failed (***)",
        }
    ]

    assert_no_secret(json.dumps(run_message), json.dumps(execution))

    again = tick(asset_check_failure_alert_sensor, dagster_instance, result.cursor)
    assert not again.dagster_run_reactions and len(webhook.posts) == 3


# ---- failing channels ----------------------------------------------------------------------------------


def sample_alert() -> Alert:
    return Alert({"event": "run_failure", "run_id": "r1", "text": "Dagster run failed: job j (run r1)"})


def test_a_5xx_is_retried_and_a_dead_webhook_logs_one_line_and_rests(webhook, alert_env, caplog):
    caplog.set_level(logging.DEBUG)
    webhook.statuses = [503]
    assert notify(sample_alert(), backoff_seconds=0.01) == {"webhook": True}
    assert len(webhook.posts) == 2

    webhook.statuses = [500, 502, 503]
    assert notify(sample_alert(), backoff_seconds=0.01) == {"webhook": False}
    assert len(webhook.posts) == 5  # three attempts, then it gives up
    [line] = [record.getMessage() for record in caplog.records if record.name == alerts.__name__]
    assert line == "run_failure alert for run r1 not sent by webhook after 3 attempt(s): HTTP 503"

    caplog.clear()
    assert notify(sample_alert()) == {"webhook": False}
    assert len(webhook.posts) == 5  # resting: not tried again at once
    assert "resting" in caplog.text
    assert_no_secret(caplog.text)


def test_a_4xx_is_not_retried(webhook, alert_env, caplog):
    webhook.statuses = [404]
    assert notify(sample_alert(), backoff_seconds=0.01) == {"webhook": False}
    assert len(webhook.posts) == 1
    assert "after 1 attempt(s): HTTP 404" in caplog.text


def test_a_webhook_that_times_out_logs_one_line_without_its_secret(webhook, alert_env, monkeypatch, caplog):
    caplog.set_level(logging.DEBUG)
    monkeypatch.setenv(settings.ALERT_TIMEOUT_ENV, "0.2")
    webhook.delay = 1.0
    started = time.monotonic()
    assert notify(sample_alert(), attempts=2, backoff_seconds=0) == {"webhook": False}
    assert time.monotonic() - started < 2.0
    [line] = [record.getMessage() for record in caplog.records if record.name == alerts.__name__]
    assert "after 2 attempt(s)" in line and "timed out" in line
    assert_no_secret(caplog.text)


@pytest.mark.slow
def test_an_unreachable_webhook_fails_the_sensor_tick_never(
    dagster_instance, alert_env, monkeypatch, caplog, capfd
):
    caplog.set_level(logging.DEBUG)
    # nothing listens on port 9 (discard) of the loopback
    monkeypatch.setenv(
        settings.ALERT_WEBHOOK_URL_ENV, f"http://127.0.0.1:9/hooks/{TOKEN}?token={QUERY_SECRET}"
    )
    cursor = first_tick(asset_check_failure_alert_sensor, dagster_instance)
    dg.materialize([shipments, has_rows], instance=dagster_instance)
    result = tick(asset_check_failure_alert_sensor, dagster_instance, cursor)  # no run's reaction failed
    assert len(result.dagster_run_reactions) == 1
    logs = logged(caplog, capfd)
    assert "not sent by webhook after 3 attempt(s): URLError" in logs
    assert_no_secret(logs, result.cursor)


@pytest.mark.slow
def test_smtp_without_starttls_is_a_permanent_failure_logged_without_the_password(
    alert_env, with_email, monkeypatch, caplog
):
    monkeypatch.delenv(settings.ALERT_WEBHOOK_URL_ENV)
    monkeypatch.setenv(settings.ALERT_SMTP_SECURITY_ENV, "starttls")
    assert notify(sample_alert(), backoff_seconds=0.01) == {"email": False}
    assert not with_email.messages
    assert "not sent by email after 1 attempt(s): SMTPNotSupportedError" in caplog.text
    assert_no_secret(caplog.text)


def test_smtp_is_read_when_sent_logs_in_only_with_a_user_and_times_out(
    alert_env, with_email, monkeypatch, caplog
):
    """Unlike Dagster's e-mail factory: the password as it is at send time, plain SMTP without a login
    when no user is set, and a server that never answers costs the timeout, not the tick."""
    monkeypatch.delenv(settings.ALERT_WEBHOOK_URL_ENV)
    monkeypatch.setenv(settings.ALERT_SMTP_PASSWORD_ENV, "rotated-pa55word")
    assert notify(sample_alert()) == {"email": True}
    monkeypatch.delenv(settings.ALERT_SMTP_USER_ENV)
    assert notify(sample_alert()) == {"email": True}
    assert [mail["auth"] for mail in with_email.messages] == [
        [b"", b"alerts@example.com", b"rotated-pa55word"],
        None,
    ]
    assert with_email.messages[1]["message"]["From"] == alerts.DEFAULT_FROM

    with socket.create_server(("127.0.0.1", 0)) as silent:  # accepts connections, never greets
        monkeypatch.setenv(settings.ALERT_SMTP_PORT_ENV, str(silent.getsockname()[1]))
        monkeypatch.setenv(settings.ALERT_TIMEOUT_ENV, "0.2")
        started = time.monotonic()
        assert notify(sample_alert(), attempts=2, backoff_seconds=0) == {"email": False}
    assert time.monotonic() - started < 2.0
    [line] = [record.getMessage() for record in caplog.records if record.name == alerts.__name__]
    assert "not sent by email after 2 attempt(s)" in line and line.endswith("timed out")


@pytest.mark.slow
def test_email_without_recipients_says_so(alert_env, with_email, monkeypatch, caplog):
    monkeypatch.delenv(settings.ALERT_EMAIL_TO_ENV)
    assert notify(sample_alert()) == {"webhook": True, "email": False}
    assert f"{settings.ALERT_EMAIL_TO_ENV} names no recipient" in caplog.text


# ---- secrets and loading -------------------------------------------------------------------------------


def test_redact_hides_the_webhook_url_and_its_parts(alert_env, monkeypatch):
    monkeypatch.setenv(settings.ALERT_SMTP_PASSWORD_ENV, SMTP_PASSWORD)
    text = (
        f"POST {alert_env} failed; url: /hooks/{TOKEN}; token {TOKEN}; q={QUERY_SECRET}; pw {SMTP_PASSWORD}"
    )
    redacted = redact(text)
    assert_no_secret(redacted)
    assert redacted.startswith("POST *** failed")


LOAD = """
import importlib, json, os, sys
import assets.alerts as alerts
statuses = [[sensor.default_status.value for sensor in alerts.alert_sensors]]
for name, value in json.loads(sys.argv[1]):
    os.environ[name] = value
    statuses.append([sensor.default_status.value for sensor in importlib.reload(alerts).alert_sensors])
    del os.environ[name]
print(json.dumps(statuses))
"""


def test_sensors_are_off_until_configured():
    """Loaded without a channel they are STOPPED; a webhook URL or an SMTP host makes them RUNNING."""
    env = {name: value for name, value in os.environ.items() if name not in ALERT_ENVS}
    settings_to_try = [
        (settings.ALERT_WEBHOOK_URL_ENV, "http://127.0.0.1:9/x"),
        (settings.ALERT_SMTP_HOST_ENV, "127.0.0.1"),
    ]
    out = subprocess.run(
        [sys.executable, "-c", LOAD, json.dumps(settings_to_try)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=120, check=True,
    ).stdout  # fmt: skip
    assert json.loads(out) == [["STOPPED", "STOPPED"], ["RUNNING", "RUNNING"], ["RUNNING", "RUNNING"]]
    assert [sensor.name for sensor in alerts.alert_sensors] == [
        "run_failure_alert_sensor",
        "asset_check_failure_alert_sensor",
    ]
    dg.Definitions.validate_loadable(dg.Definitions(sensors=alerts.alert_sensors))
