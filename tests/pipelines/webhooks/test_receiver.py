"""The webhook receiver over real HTTP: uvicorn on a loopback port (in a thread, and as the CLI's own process),
deliveries sent with `requests` and signed like the service signs them; its journal a SQLite file, or a real
PostgreSQL database (the receiver's pod and the runs' pods sharing it)."""

from __future__ import annotations

import json
import logging
import os
import signal
import socket
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests

from pipelines.journals import NotificationJournal
from pipelines.settings import (
    WEBHOOK_JOURNAL_ENV,
    WEBHOOK_MAX_BODY_BYTES,
    WEBHOOK_PATH,
    WEBHOOK_SECRET_ENV,
    WEBHOOK_SIGNATURE_HEADER,
)
from pipelines.webhooks import signature
from pipelines.webhooks.receiver import ReceiverThread
from tests.support.notifications import body, notification
from tests.support.receivers import SECRET, Receiver, wait_until_up

REPO = Path(__file__).resolve().parents[3]
@pytest.fixture
def receiver(tmp_path: Path) -> Iterator[Receiver]:
    journal = tmp_path / "journal.sqlite"
    with ReceiverThread(journal, SECRET, heartbeat_seconds=0.1) as running:
        yield Receiver(running.root_url, journal)


def rows(journal: Path | str) -> list[tuple]:
    with NotificationJournal(journal) as opened:
        return [(n.id, n.status, n.document) for n in [*opened.pending(), *opened.failed()]]


def test_a_signed_notification_is_journaled(receiver: Receiver):
    document = notification("n-1")
    answer = receiver.post(body(document))
    assert (answer.status_code, answer.json()) == (200, {"status": "accepted"})
    assert rows(receiver.journal) == [("n-1", "pending", document)]
    health = requests.get(receiver.url + "/healthz", timeout=5)
    assert health.status_code == 200
    assert health.json()["counts"] == {"pending": 1, "applied": 0, "failed": 0}


@pytest.mark.parametrize("headers", [{}, {WEBHOOK_SIGNATURE_HEADER: ""}, {WEBHOOK_SIGNATURE_HEADER: "0" * 64}, {WEBHOOK_SIGNATURE_HEADER: "é-not-hex"}],
                         ids=["missing", "empty", "wrong", "not-ascii"])
def test_a_delivery_without_a_valid_signature_is_refused(receiver: Receiver, headers: dict[str, str]):
    answer = receiver.post(body(notification("n-1")), sign=None, **headers)
    assert answer.status_code == 401
    assert rows(receiver.journal) == []


def test_a_signature_with_another_secret_or_of_another_body_is_refused(receiver: Receiver):
    raw = body(notification("n-1"))
    assert receiver.post(raw, sign="another-secret").status_code == 401
    forged = requests.post(receiver.url + WEBHOOK_PATH, data=raw, timeout=5,
                           headers={WEBHOOK_SIGNATURE_HEADER: signature(body(notification("n-2")), SECRET)})
    assert forged.status_code == 401
    assert rows(receiver.journal) == []


def test_an_oversized_body_is_refused(receiver: Receiver):
    document = notification("big")
    document["included"] = [{"padding": "x" * WEBHOOK_MAX_BODY_BYTES}]
    raw = body(document)
    assert receiver.post(raw).status_code == 413  # declared by Content-Length

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(raw), 64 * 1024):
            yield raw[start:start + 64 * 1024]

    streamed = requests.post(receiver.url + WEBHOOK_PATH, data=chunks(), timeout=10,
                             headers={WEBHOOK_SIGNATURE_HEADER: signature(raw, SECRET)})  # chunked: no Content-Length
    assert streamed.status_code == 413
    assert rows(receiver.journal) == []


def test_a_signed_body_that_is_not_a_notification_is_a_400(receiver: Receiver):
    answer = receiver.post(json.dumps({"data": {"id": "x", "type": "shipment"}}).encode())
    assert answer.status_code == 400
    assert "\n" not in answer.json()["error"]
    assert receiver.post(b"not json").status_code == 400
    assert rows(receiver.journal) == []


DEPTH = 100_000  # 200 kB, well under the body limit; Python's `json` recurses once a level


@pytest.mark.parametrize("raw", [b"[" * DEPTH + b"]" * DEPTH,
                                 b'{"data":' * DEPTH + b"{}" + b"}" * DEPTH,
                                 json.dumps(notification("deep")).encode()[:-1] + b', "x": ' + b"[" * DEPTH
                                 + b"]" * DEPTH + b"}"],
                         ids=["array", "object", "inside-a-notification"])
def test_a_signed_body_nested_deeper_than_json_allows_is_a_400(receiver: Receiver, raw: bytes):
    answer = receiver.post(raw)
    assert answer.status_code == 400, answer.text
    assert "depth" in answer.json()["error"] and "\n" not in answer.json()["error"]
    assert rows(receiver.journal) == []


def test_a_redelivery_is_answered_200_and_changes_nothing(receiver: Receiver):
    first = notification("n-1", event="container.updated")
    assert receiver.post(body(first)).status_code == 200
    with NotificationJournal(receiver.journal) as journal:
        journal.mark_applied(["n-1"], run_id="run-1")
    again = receiver.post(body(notification("n-1", event="container.created")))
    assert (again.status_code, again.json()) == (200, {"status": "duplicate"})
    assert rows(receiver.journal) == []  # neither pending nor failed: still applied
    with NotificationJournal(receiver.journal) as journal:
        assert journal.counts() == {"pending": 0, "applied": 1, "failed": 0}
        assert journal.record(body(first)) is False


def test_the_heartbeat_is_written(receiver: Receiver):
    deadline = time.monotonic() + 5
    with NotificationJournal(receiver.journal) as journal:
        while journal.last_beat() is None:
            assert time.monotonic() < deadline
            time.sleep(0.05)
        first, url = journal.last_beat()
        assert url == receiver.url + WEBHOOK_PATH
        time.sleep(0.3)
        assert journal.last_beat()[0] > first


def test_the_secret_is_in_no_log_and_no_file(receiver: Receiver, caplog: pytest.LogCaptureFixture, tmp_path: Path):
    caplog.set_level(logging.DEBUG)
    raw = body(notification("n-1"))
    receiver.post(raw)
    receiver.post(raw, sign="wrong")
    receiver.post(raw, sign=None)
    receiver.post(b"[]")
    refused = [r for r in caplog.records if r.name == "pipelines.webhooks.receiver"]
    assert len(refused) == 3
    assert all("\n" not in r.getMessage() for r in refused)
    logged = "\n".join(r.getMessage() + repr(r.args) for r in caplog.records)
    assert SECRET not in logged
    assert signature(raw, SECRET) not in logged and "n-1" not in logged
    written = b"".join(p.read_bytes() for p in tmp_path.rglob("*") if p.is_file())
    assert rows(receiver.journal)
    assert SECRET.encode() not in written
    assert signature(raw, SECRET).encode() not in written


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def start_serving(tmp_path: Path, journal: Path | str, port: int, **extra_env: str) -> subprocess.Popen:
    """`webhooks serve` as its own process: a SQLite journal given by --journal (which wins over the variable),
    a PostgreSQL one by the variable (a password stays off the command line)."""
    env = {**os.environ, WEBHOOK_SECRET_ENV: SECRET, WEBHOOK_JOURNAL_ENV: str(tmp_path / "unused.sqlite"),
           "PYTHONPATH": str(REPO), **extra_env}
    where = ["--journal", str(journal)]
    if isinstance(journal, str):
        env[WEBHOOK_JOURNAL_ENV], where = journal, []
    return subprocess.Popen(
        [sys.executable, "-m", "pipelines", "webhooks", "serve", "--port", str(port), *where],
        cwd=tmp_path, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
    )  # fmt: skip


@pytest.mark.slow
def test_a_kill_right_after_the_2xx_loses_nothing(tmp_path: Path, journal_location: Path | str):
    journal, port = journal_location, free_port()
    process = start_serving(tmp_path, journal, port)
    try:
        receiver = Receiver(f"http://127.0.0.1:{port}", journal)
        wait_until_up(process, receiver.url)
        documents = [notification(f"n-{i}") for i in range(5)]
        for document in documents:
            assert receiver.post(body(document)).status_code == 200
        os.kill(process.pid, signal.SIGKILL)
    finally:
        process.kill()
        output = process.communicate(timeout=30)[0]
    assert process.returncode == -signal.SIGKILL
    assert [(i, s, d) for i, s, d in rows(journal)] == [(d["data"]["id"], "pending", d) for d in documents]
    assert SECRET.encode() not in output
    assert not (tmp_path / "unused.sqlite").exists()  # --journal wins over the environment
    if isinstance(journal, str):
        password = urlsplit(journal).password
        assert password.encode() not in output and f"{urlsplit(journal).port}/".encode() in output


def test_a_postgresql_journal_receives_over_http(postgres_database):
    with ReceiverThread(postgres_database.dsn, SECRET, heartbeat_seconds=0.1) as running:
        receiver = Receiver(running.root_url, postgres_database.dsn)
        documents = [notification(f"n-{i}") for i in range(3)]
        for document in documents:
            assert receiver.post(body(document)).json() == {"status": "accepted"}
        assert receiver.post(body(documents[0])).json() == {"status": "duplicate"}
        assert receiver.post(body(documents[0]), sign="wrong").status_code == 401
        assert requests.get(receiver.url + "/healthz", timeout=5).json()["counts"] == {
            "pending": 3, "applied": 0, "failed": 0}
        deadline = time.monotonic() + 5
        with NotificationJournal(postgres_database.dsn) as journal:  # as a run's pod reads it
            while journal.last_beat() is None:
                assert time.monotonic() < deadline
                time.sleep(0.05)
            assert journal.last_beat()[1] == running.url
    assert rows(postgres_database.dsn) == [(d["data"]["id"], "pending", d) for d in documents]
    stored = postgres_database.query("select body from ocean_tracking_webhooks.notifications")
    assert SECRET not in repr(stored)


def test_serve_without_a_secret_is_a_one_line_error(tmp_path: Path):
    env = {k: v for k, v in os.environ.items() if k != WEBHOOK_SECRET_ENV}
    done = subprocess.run(
        [sys.executable, "-m", "pipelines", "webhooks", "serve", "--journal", str(tmp_path / "j.sqlite")],
        cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 2
    assert WEBHOOK_SECRET_ENV in done.stderr and len(done.stderr.strip().splitlines()) == 1
    assert "Traceback" not in done.stderr
