"""The notification journal: idempotent recording, order, applied/failed/retry, versions that never go back,
the heartbeat, writers in several threads and processes losing nothing, and one consumer at a time. Each runs
on both backends (`journal_location`: a SQLite file, a real PostgreSQL database); what only PostgreSQL has
(several hosts creating it at once, accounts as schemas, the password, a dropped connection) is at the end."""

from __future__ import annotations

import itertools
import json
import logging
import os
import subprocess
import sys
import threading
import traceback
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg2
import pytest
from sqlalchemy import event, func, select

from pipelines.errors import ConfigurationError, InputError
from pipelines.journals import POSTGRES_SCHEMA, Notification, NotificationJournal
from pipelines.settings import WEBHOOK_JOURNAL_ENV, Account
from pipelines.warehouse.connections import WarehouseLockedError
from tests.support.holders import start_at_once
from tests.support.notifications import body, notification
from tests.support.postgres import free_port

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def journal(journal_location: Path | str):
    with NotificationJournal(journal_location) as opened:
        yield opened


def test_records_a_notification_once(journal: NotificationJournal):
    document = notification("n-1", event="container.transport.vessel_arrived",
                            reference=("transport_event", "te-1"))
    received = datetime(2026, 5, 11, 18, 31, tzinfo=UTC)
    assert journal.record(body(document), received_at=received) is True
    assert journal.record(body(notification("n-1", event="changed.event")), received_at=received) is False
    [item] = journal.pending()
    assert item == Notification(
        id="n-1", event="container.transport.vessel_arrived", created_at=datetime(2026, 5, 11, 18, 30, tzinfo=UTC),
        received_at=received, reference_type="transport_event", reference_id="te-1", document=document,
        status="pending", error=None,
    )
    assert journal.counts() == {"pending": 1, "applied": 0, "failed": 0}
    assert journal.newest_received_at() == received
    assert journal.newest_created_at() == datetime(2026, 5, 11, 18, 30, tzinfo=UTC)


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        (b"not json", "not UTF-8 JSON"),
        (b"\xff\xfe", "not UTF-8 JSON"),
        (b"[1, 2]", "no `data` object"),
        (body({"data": {"type": "webhook_notification", "attributes": {"event": "x"}}}), "data.id"),
        (body({"data": {"id": "a", "type": "shipment", "attributes": {"event": "x"}}}), "data.type"),
        (body({"data": {"id": "a", "type": "webhook_notification", "attributes": {}}}), "attributes.event"),
        (body(notification("a", created_at="yesterday")), "created_at"),
    ],
)
def test_refuses_what_is_not_a_notification(journal: NotificationJournal, raw: bytes, reason: str):
    with pytest.raises(InputError, match=reason) as caught:
        journal.record(raw)
    assert "\n" not in str(caught.value)
    assert journal.counts()["pending"] == 0


def test_a_notification_without_created_at_or_reference_is_kept(journal: NotificationJournal):
    received = datetime(2026, 1, 2, tzinfo=UTC)
    journal.record(body(notification("n", created_at=None, reference=None)), received_at=received)
    [item] = journal.pending()
    assert (item.created_at, item.reference_type, item.reference_id) == (received, None, None)


def test_pending_is_in_creation_order_then_arrival_order(journal: NotificationJournal):
    for ident, created in [("late", "2026-05-11T18:30:02Z"), ("tie-1", "2026-05-11T18:30:01Z"),
                           ("early", "2026-05-11T20:30:00+02:00"), ("tie-2", "2026-05-11T18:30:01.000Z")]:
        journal.record(body(notification(ident, created_at=created)))
    assert [n.id for n in journal.pending()] == ["early", "tie-1", "tie-2", "late"]
    assert [n.id for n in journal.pending(limit=2)] == ["early", "tie-1"]
    assert all(n.created_at.tzinfo is not None and n.received_at.tzinfo is not None for n in journal.pending())


def test_applied_failed_and_retry(journal: NotificationJournal):
    for ident in ("a", "b", "c"):
        journal.record(body(notification(ident)))
    journal.mark_applied(["a"], run_id="run-1")
    journal.mark_failed("b", "container c-1 not found")
    assert [n.id for n in journal.pending()] == ["c"]
    [failed] = journal.failed()
    assert (failed.id, failed.status, failed.error) == ("b", "failed", "container c-1 not found")
    assert journal.counts() == {"pending": 1, "applied": 1, "failed": 1}
    assert journal.retry_failed() == 1
    assert journal.retry_failed() == 0
    assert [(n.id, n.error) for n in journal.pending()] == [("b", None), ("c", None)]
    journal.mark_applied(iter(["b", "c"]))
    journal.mark_applied([])
    assert journal.counts() == {"pending": 0, "applied": 3, "failed": 0}
    assert journal.record(body(notification("a"))) is False  # an applied notification redelivered
    assert journal.counts()["pending"] == 0


def test_versions_keep_the_newest(journal: NotificationJournal):
    t0 = datetime(2026, 5, 11, 18, 30, tzinfo=UTC)
    journal.record_applied_versions({"container:1": t0, "shipment:9": t0})
    journal.record_applied_versions({"container:1": t0 - timedelta(seconds=1), "shipment:9": t0 + timedelta(hours=1)})
    journal.record_applied_versions({})
    keys = ["container:1", "shipment:9", "container:unknown", *(f"k{i}" for i in range(1200))]
    assert journal.applied_versions(keys) == {"container:1": t0, "shipment:9": t0 + timedelta(hours=1)}
    journal.record_applied_versions({"container:1": t0 + timedelta(microseconds=1)})
    assert journal.applied_versions(["container:1"]) == {"container:1": t0 + timedelta(microseconds=1)}


def test_heartbeat(journal: NotificationJournal):
    assert journal.last_beat() is None
    before = datetime.now(UTC)
    journal.beat("http://127.0.0.1:8765/webhooks/terminal49", 123)
    journal.beat("http://127.0.0.1:9999/hooks", 456)
    at, url = journal.last_beat()
    assert url == "http://127.0.0.1:9999/hooks"
    assert before <= at <= datetime.now(UTC)


def test_survives_reopening(journal_location: Path | str):
    assert NotificationJournal.exists(journal_location) is False
    with NotificationJournal(journal_location) as journal:
        journal.record(body(notification("kept")))
    assert NotificationJournal.exists(journal_location) is True
    with NotificationJournal(journal_location) as journal:
        assert [n.id for n in journal.pending()] == ["kept"]
        assert journal.record(body(notification("kept"))) is False


def test_refuses_a_file_that_is_not_a_journal(tmp_path: Path):
    broken = tmp_path / "broken.sqlite"
    broken.write_bytes(b"this is not a database" * 100)
    with pytest.raises(Exception, match="not a readable webhook journal"):
        NotificationJournal(broken)


def test_concurrent_threads_lose_nothing(journal: NotificationJournal):
    threads, per_thread = 8, 40
    results: list[bool] = []
    lock = threading.Lock()

    def write(worker: int) -> None:
        for i in range(per_thread):
            new = journal.record(body(notification(f"t{worker}-{i}")))
            duplicate = journal.record(body(notification(f"t{(worker + 1) % threads}-{i}")))
            with lock:
                results.extend([new, duplicate])

    workers = [threading.Thread(target=write, args=(w,)) for w in range(threads)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join()
    assert journal.counts()["pending"] == threads * per_thread
    assert results.count(True) == threads * per_thread  # every id recorded exactly once


_WRITER = """
import sys
from datetime import UTC, datetime

from pipelines.journals import NotificationJournal
from tests.support.notifications import body, notification

with NotificationJournal(sys.argv[1]) as journal:
    for i in range(int(sys.argv[3])):
        journal.record(body(notification(f"{sys.argv[2]}-{i}")))
        journal.record(body(notification(f"shared-{i}")))
        journal.record_applied_versions({f"key-{i % 7}": datetime.now(UTC)})
"""


def test_two_processes_and_threads_at_once_lose_nothing(journal_location: Path | str):
    NotificationJournal(journal_location).close()
    per_process = 150
    processes = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(journal_location), name, str(per_process)], cwd=REPO)
        for name in ("p1", "p2")
    ]
    with NotificationJournal(journal_location) as journal:
        for i in range(per_process):
            journal.record(body(notification(f"main-{i}")))
        for process in processes:
            assert process.wait(timeout=120) == 0
        assert journal.counts()["pending"] == 4 * per_process  # p1, p2, main and the shared ids once
        ids = {n.id for n in journal.pending()}
    assert {f"{name}-{i}" for name in ("p1", "p2", "main", "shared") for i in range(per_process)} == ids


def test_naive_times_are_refused(journal: NotificationJournal):
    with pytest.raises(ValueError, match="timezone-aware"):
        journal.record(body(notification("n")), received_at=datetime(2026, 1, 1))
    with pytest.raises(ValueError, match="timezone-aware"):
        journal.record_applied_versions({"k": datetime(2026, 1, 1)})


# ---- one consumer at a time --------------------------------------------------------------------------

_CONSUMER = """
import json, sys, time
from pipelines.journals import NotificationJournal

with NotificationJournal(sys.argv[1]) as journal:
    print("ready", flush=True)
    sys.stdin.readline()  # both start together
    while True:
        with journal.consuming():
            start = time.time()
            batch = [n.id for n in journal.pending(limit=int(sys.argv[2]))]
            time.sleep(0.05)  # applying takes a while: the other consumer tries meanwhile
            journal.mark_applied(batch, run_id=sys.argv[3])
            end = time.time()
        if not batch:
            break
        print(json.dumps({"ids": batch, "start": start, "end": end}), flush=True)
        time.sleep(0.3)  # longer than a waiter's poll, so the other consumer gets its turns
"""


@pytest.mark.slow
def test_two_consumers_in_two_processes_never_apply_one_notification_twice(journal_location: Path | str):
    ids = [f"n-{i:02d}" for i in range(48)]
    with NotificationJournal(journal_location) as journal:
        for ident in ids:
            journal.record(body(notification(ident)))
    consumers = {
        name: subprocess.Popen([sys.executable, "-c", _CONSUMER, str(journal_location), "6", name], cwd=REPO,
                               stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
        for name in ("c1", "c2")
    }
    for process in consumers.values():
        assert process.stdout.readline().strip() == "ready"
    for process in consumers.values():
        process.stdin.write("go\n")
        process.stdin.flush()
    batches = {}
    for name, process in consumers.items():
        out, _ = process.communicate(timeout=120)
        assert process.returncode == 0
        batches[name] = [json.loads(line) for line in out.splitlines()]

    every = [batch for taken in batches.values() for batch in taken]
    assert sorted(ident for batch in every for ident in batch["ids"]) == ids  # each once: none twice, none lost
    assert all(batches.values())  # both consumers took turns
    spans = sorted((batch["start"], batch["end"]) for batch in every)
    assert all(end <= next_start for (_, end), (next_start, _) in itertools.pairwise(spans))  # never at once
    with NotificationJournal(journal_location) as journal:
        assert journal.counts() == {"pending": 0, "applied": len(ids), "failed": 0}


def test_a_second_consumer_waits_then_gives_up_naming_the_first(journal_location: Path | str):
    with NotificationJournal(journal_location) as first, NotificationJournal(journal_location) as second:
        with first.consuming(), pytest.raises(WarehouseLockedError) as info, second.consuming(timeout=0.3):
            pass
        with second.consuming(timeout=0.3):  # released: the next consumer goes at once
            pass
    message = str(info.value)
    assert "consumer lock" in message and f"process {os.getpid()}" in message and "\n" not in message


# ---- accounts, several hosts, secrets ----------------------------------------------------------------


def test_a_named_account_has_a_journal_of_its_own(journal_location: Path | str, monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setenv(WEBHOOK_JOURNAL_ENV, str(journal_location))
    emea = Account("emea")
    with NotificationJournal(account=emea) as theirs, NotificationJournal() as ours:
        assert theirs.record(body(notification("same-id"))) is True
        theirs.beat("http://emea.example/hooks", 1)
        assert (ours.pending(), ours.last_beat()) == ([], None)
        assert ours.record(body(notification("same-id"))) is True  # another account's notification
        theirs.mark_applied(["same-id"])
        assert [n.status for n in ours.pending()] == ["pending"]
        assert theirs.counts() == {"pending": 0, "applied": 1, "failed": 0}
    assert NotificationJournal.exists(account=emea) and not NotificationJournal.exists(account=Account("apac"))


def test_several_hosts_creating_the_journal_at_once_all_succeed(postgres_database):
    starters = 8
    recorded: list[bool] = []

    def start(worker: int) -> None:
        with NotificationJournal(postgres_database.dsn) as journal:
            recorded.append(journal.record(body(notification(f"host-{worker}"))))

    failures = start_at_once(start, starters)
    assert failures == []
    assert recorded == [True] * starters
    tables = postgres_database.query("select tablename from pg_tables where schemaname = %s order by 1",
                                     (POSTGRES_SCHEMA,))
    assert tables == [("applied_versions",), ("heartbeat",), ("notifications",)]


def test_commits_are_synchronous_whatever_the_server_says(postgres_database):
    assert postgres_database.query("show synchronous_commit") == [("off",)]  # the test server's default
    with NotificationJournal(postgres_database.dsn) as journal, journal._db.connect() as connection:
        assert connection.scalar(select(func.current_setting("synchronous_commit"))) == "on"


def test_a_dropped_connection_is_opened_again(postgres_database):
    with NotificationJournal(postgres_database.dsn) as journal:
        journal.record(body(notification("before")))
        postgres_database.query("select pg_terminate_backend(pid) from pg_stat_activity where "
                                "datname = current_database() and application_name = 'ocean-tracking webhook journal'")
        with pytest.raises(journal.errors):
            journal.record(body(notification("again")))  # the receiver answers 503; the service delivers again
        assert journal.record(body(notification("again"))) is True
        assert [n.id for n in journal.pending()] == ["before", "again"]


def test_a_server_still_down_is_one_of_the_journals_errors(postgres_database):
    with NotificationJournal(postgres_database.dsn) as journal:
        journal.record(body(notification("before")))
        journal._db.engine.dispose()  # the server dropped the connection, and refuses new ones

        @event.listens_for(journal._db.engine, "do_connect")
        def still_down(*_: object) -> None:
            raise psycopg2.OperationalError("connection to server at 127.0.0.1 failed: Connection refused")

        with pytest.raises(journal.errors):  # the receiver answers 503 on these, never a 500
            journal.record(body(notification("n")))
        event.remove(journal._db.engine, "do_connect", still_down)
        assert journal.record(body(notification("n"))) is True  # the server is back


def _assert_safe(error: BaseException, password: str, where: str) -> None:
    message = str(error)
    assert isinstance(error, ConfigurationError)
    assert "\n" not in message and where in message and WEBHOOK_JOURNAL_ENV in message, message
    assert password not in message + repr(error) + "".join(traceback.format_exception(error))


def test_the_password_is_in_no_repr_error_log_or_output(postgres_server, postgres_database, tmp_path: Path,
                                                         caplog: pytest.LogCaptureFixture):
    caplog.set_level(logging.DEBUG)
    where = f"{postgres_server.host}:{postgres_server.port}/{postgres_database.name}"
    with NotificationJournal(postgres_database.dsn) as journal:
        journal.record(body(notification("n-1")))
        shown = repr(journal) + str(journal) + repr(vars(journal)) + repr(journal._db) + repr(vars(journal._db))
    assert postgres_server.password not in shown and where in shown

    wrong = "wrong-pass-4b1d"
    with pytest.raises(ConfigurationError) as refused:
        NotificationJournal(postgres_database.dsn.replace(postgres_server.password, wrong))
    _assert_safe(refused.value, wrong, where)
    assert "password authentication failed" in str(refused.value)
    secret, port = "s3cret-unreachable", free_port()
    with pytest.raises(ConfigurationError) as unreachable:
        NotificationJournal(f"postgresql://u:{secret}@127.0.0.1:{port}/journal?connect_timeout=5")
    _assert_safe(unreachable.value, secret, f"127.0.0.1:{port}/journal")
    assert postgres_server.password not in caplog.text and wrong not in caplog.text

    status = subprocess.run([sys.executable, "-m", "pipelines", "webhooks", "status"], cwd=tmp_path,
                            env={**os.environ, WEBHOOK_JOURNAL_ENV: postgres_database.dsn, "PYTHONPATH": str(REPO)},
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert f"Journal postgresql://{where}: pending 1" in status.stdout, status.stdout + status.stderr
    assert postgres_server.password not in status.stdout + status.stderr


def test_without_psycopg2_a_postgresql_journal_is_one_line(monkeypatch: pytest.MonkeyPatch):
    monkeypatch.setitem(sys.modules, "psycopg2", None)
    with pytest.raises(ConfigurationError, match="needs psycopg2") as info:
        NotificationJournal("postgresql://u:hunter2@127.0.0.1:5432/journal")
    assert "\n" not in str(info.value) and "hunter2" not in str(info.value)
