"""The notification journal: idempotent recording, order, applied/failed/retry, versions that never go back,
the heartbeat, and writers in several threads and processes losing nothing."""

from __future__ import annotations

import subprocess
import sys
import threading
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from pipelines.errors import InputError
from pipelines.webhooks.journal import Notification, NotificationJournal
from tests.pipelines.webhooks.helpers import body, notification

REPO = Path(__file__).resolve().parents[3]


@pytest.fixture
def journal(tmp_path: Path):
    with NotificationJournal(tmp_path / "journal.sqlite") as opened:
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


def test_survives_reopening_and_refuses_a_file_that_is_not_a_journal(tmp_path: Path):
    path = tmp_path / "journal.sqlite"
    with NotificationJournal(path) as journal:
        journal.record(body(notification("kept")))
    with NotificationJournal(path) as journal:
        assert [n.id for n in journal.pending()] == ["kept"]
        assert journal.record(body(notification("kept"))) is False
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

from pipelines.webhooks.journal import NotificationJournal
from tests.pipelines.webhooks.helpers import body, notification

with NotificationJournal(sys.argv[1]) as journal:
    for i in range(int(sys.argv[3])):
        journal.record(body(notification(f"{sys.argv[2]}-{i}")))
        journal.record(body(notification(f"shared-{i}")))
        journal.record_applied_versions({f"key-{i % 7}": datetime.now(UTC)})
"""


def test_two_processes_and_threads_at_once_lose_nothing(tmp_path: Path):
    path = tmp_path / "journal.sqlite"
    NotificationJournal(path).close()
    per_process = 150
    processes = [
        subprocess.Popen([sys.executable, "-c", _WRITER, str(path), name, str(per_process)], cwd=REPO)
        for name in ("p1", "p2")
    ]
    with NotificationJournal(path) as journal:
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
