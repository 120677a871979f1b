"""The write-back journal itself, on both backends (a SQLite file, a real PostgreSQL database): a row replaced
whole, publishing into the lake (from PostgreSQL too), the journal the configuration names, two processes given
the same batch at once creating each row once; and what only PostgreSQL has: several hosts creating it at once,
a role without CREATE using the tables made for it, the password in no repr, error or output."""

from __future__ import annotations

import csv
import multiprocessing
import multiprocessing.synchronize
import os
import subprocess
import sys
import traceback
from pathlib import Path
from urllib.parse import urlsplit

import pytest
import requests
from sqlalchemy import inspect
from sqlalchemy.schema import DropIndex

from pipelines.errors import ConfigurationError
from pipelines.journals import NotificationJournal
from pipelines.journals.writes import (
    POSTGRES_SCHEMA,
    WritebackStore,
    tracking_request_outcomes,
    writeback_session,
)
from pipelines.settings import WRITEBACK_JOURNAL_ENV
from tests.support.holders import start_at_once
from tests.support.notifications import body, notification
from tests.support.sandboxes import GENEROUS_LIMITS, SANDBOX_START, routes, tracking_count
from tests.support.syncs import cli_env

CREATE = "POST /v2/tracking_requests"


def _row(key: str, **extra) -> dict:
    return {"row_key": key, "row_index": 0, "request_number": f"N-{key}", "request_type": "bill_of_lading",
            "scac": "MAEU", **extra}


def test_an_upsert_replaces_the_whole_row(store: WritebackStore):
    store.record_tracking_outcome(_row("k1"), "pending", intent_at="2026-01-01T00:00:00+00:00")
    store.record_tracking_outcome(_row("k1", row_index=4), "accepted", tracking_request_id="tr-1", http_status=201)
    assert store.tracking_outcome("k1") | {"updated_at": None} == {
        "row_key": "k1", "row_index": 4, "request_number": "N-k1", "request_type": "bill_of_lading", "scac": "MAEU",
        "status": "accepted", "tracking_request_id": "tr-1", "http_status": 201, "errors": "[]",
        "updated_at": None, "intent_at": None}  # fmt: skip
    store.save_upload({"file_key": "f1", "name": "a.pdf", "step": "blob_requested", "byte_size": 2**40,
                       "upload_url": "https://storage/put?sig=1", "upload_headers": {"Content-MD5": "x"}})
    store.save_upload({"file_key": "f1", "name": "a.pdf", "step": "stored", "byte_size": 2**40})
    entry = store.upload("f1")
    assert (entry["step"], entry["upload_url"], entry["upload_headers"], entry["byte_size"]) == (
        "stored", None, None, 2**40)  # the short-lived URL is gone; sizes are 64-bit on both
    assert [e["file_key"] for e in store.uploads_at("stored", "created")] == ["f1"]
    assert store.claimed_tracking_ids() == {"tr-1"} and store.claimed_document_ids() == set()


def test_publishing_copies_the_journal_into_the_lake(journal_location: Path | str, lake, monkeypatch):
    if isinstance(journal_location, str):  # the configured journal, as a pod's run finds it
        monkeypatch.setenv(WRITEBACK_JOURNAL_ENV, journal_location)
        journal = None
    else:
        journal = journal_location
    with writeback_session(lake, dry_run=False, journal=journal) as (lookups, store):
        assert lookups is None  # no sync yet
        store.audit("create_tracking_request", "tracking_request:bill_of_lading:N-k1", "accepted", http_status=201)
        store.record_tracking_outcome(_row("k1"), "accepted", tracking_request_id="tr-1",
                                      errors=[{"detail": "fine"}])
        store.save_upload({"file_key": "f1", "name": "a.pdf", "step": "blob_requested",
                           "upload_url": "https://storage/put?sig=secret-ish"})
    if isinstance(journal_location, str):
        assert not lake.journal_path.exists()  # nothing went to a SQLite file beside the lake
    with lake.connect(read_only=True) as con:
        audit = con.execute("select action, http_status, typeof(logged_at) from writeback.audit_log").fetchall()
        outcome = con.execute("select status, errors->>'$[0].detail' from writeback.tracking_request_outcomes").fetchall()
        columns = [c[0] for c in con.execute("select * from writeback.document_uploads").description]
    assert audit == [("create_tracking_request", 201, "TIMESTAMP WITH TIME ZONE")]
    assert outcome == [("accepted", "fine")]
    assert "upload_url" not in columns and "upload_headers" not in columns and "step" in columns


_BATCH = [("WBTWO0001", ""), ("WBTWO0002", ""), ("WBTWO0003", ""), ("WBTWO0004", ""),
          ("WBTWO0005", "00000000-0000-4000-8000-000000000000")]  # the last one the service refuses (422)


@pytest.mark.slow
def test_two_processes_given_the_same_batch_at_once_create_each_row_once(make_sandbox, tmp_path: Path,
                                                                           journal_location: Path | str):
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0)
    requests.post(f"{server.root_url}/_sandbox/faults",  # slow answers, so the two batches overlap
                  json={"profile": "slow", "rate": 1.0, "seed": 0, "delay": 0.15}, timeout=10).raise_for_status()
    batch = tmp_path / "batch.csv"
    with batch.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["request_number", "request_type", "scac", "customer_id"])
        writer.writerows([number, "bill_of_lading", "MAEU", party] for number, party in _BATCH)
    env = cli_env(server.base_url, tmp_path, **{WRITEBACK_JOURNAL_ENV: str(journal_location)})
    command = [sys.executable, "-m", "pipelines", "create-tracking-requests", str(batch)]
    processes = [subprocess.Popen(command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
                 for _ in range(2)]
    outputs = [process.communicate(timeout=240)[0] for process in processes]

    assert [process.returncode for process in processes] == [1, 1], outputs  # 1: the refused row is reported
    assert {number: tracking_count(server, number) for number, _ in _BATCH} == {
        "WBTWO0001": 1, "WBTWO0002": 1, "WBTWO0003": 1, "WBTWO0004": 1, "WBTWO0005": 0}
    assert routes(server)[CREATE] == 6  # four created once, the refused row sent by each batch
    assert sum("skipped: 4" in output for output in outputs) == 1  # the second found the first's outcomes
    assert not [o for o in outputs if "unknown" in o or "failed" in o]  # neither settled the other's intents
    if isinstance(journal_location, str):
        assert all(urlsplit(journal_location).password not in output for output in outputs)


def test_several_hosts_creating_the_journals_at_once_all_succeed(postgres_database):
    def start(worker: int) -> None:
        if worker % 2:  # both journals in one database at once, as the receiver's and a run's pods start
            with NotificationJournal(postgres_database.dsn):
                pass
        else:
            store = WritebackStore(postgres_database.dsn)
            store.audit("start", f"host:{worker}", "ok")
            store.close()

    starters = 8
    failures = start_at_once(start, starters)
    assert failures == []
    assert postgres_database.query("select tablename from pg_tables where schemaname = %s order by 1",
                                   (POSTGRES_SCHEMA,)) == [("audit_log",), ("document_uploads",),
                                                           ("tracking_request_outcomes",)]  # fmt: skip
    assert postgres_database.query(f"select count(*) from {POSTGRES_SCHEMA}.audit_log") == [(starters // 2,)]


def _open_new_journals_together(directory: Path, rounds: int, together: multiprocessing.synchronize.Barrier,
                                failures: multiprocessing.Queue) -> None:
    """One process's part: open each round's new journal file at the instant the others do, and write a row."""
    for attempt in range(rounds):
        together.wait(timeout=60)
        try:
            store = WritebackStore(directory / f"journal-{attempt}.sqlite")
            store.audit("start", f"process:{os.getpid()}", "ok")
            store.close()
        except Exception as error:  # sent to the test, which asserts there is none
            failures.put(f"{type(error).__name__}: {error}")


def test_processes_opening_one_new_journal_file_at_once_all_succeed(tmp_path: Path):
    """Making a new SQLite file WAL answers "database is locked" at once, without waiting, to a second process
    doing the same: two batches started together used to fail one of them on the journal they both created."""
    processes, rounds = 3, 6
    context = multiprocessing.get_context("fork")  # forked from this one: no second import of the pipelines
    together, failures = context.Barrier(processes), context.Queue()
    workers = [context.Process(target=_open_new_journals_together, args=(tmp_path, rounds, together, failures))
               for _ in range(processes)]
    for worker in workers:
        worker.start()
    for worker in workers:
        worker.join(120)
    assert [worker.exitcode for worker in workers] == [0] * processes
    assert [failures.get() for _ in range(failures.qsize())] == []
    for attempt in range(rounds):
        assert WritebackStore(tmp_path / f"journal-{attempt}.sqlite").rows("select count(*) from audit_log") == [
            (processes,)]


def test_the_password_is_in_no_repr_or_error(postgres_server, postgres_database, caplog):
    where = f"{postgres_server.host}:{postgres_server.port}/{postgres_database.name}"
    store = WritebackStore(postgres_database.dsn)
    shown = repr(store) + str(store) + repr(vars(store))
    store.close()
    assert postgres_server.password not in shown and where in shown
    wrong = "wrong-pass-77"
    with pytest.raises(ConfigurationError) as info:
        WritebackStore(postgres_database.dsn.replace(postgres_server.password, wrong))
    message = str(info.value)
    assert "\n" not in message and where in message and WRITEBACK_JOURNAL_ENV in message
    assert wrong not in message + repr(info.value) + "".join(traceback.format_exception(info.value))
    assert wrong not in caplog.text and postgres_server.password not in caplog.text


def test_a_journal_made_before_the_index_of_numbers_gains_it(journal_location: Path | str):
    index = next(iter(tracking_request_outcomes.indexes))
    store = WritebackStore(journal_location)
    with store._db.connect() as connection:
        connection.execute(DropIndex(index))  # as a journal made before `held_numbers` had its index
    store.close()
    store = WritebackStore(journal_location)
    try:
        indexes = inspect(store._db.engine).get_indexes(tracking_request_outcomes.name, schema=store._db.schema)
        assert [(i["name"], i["column_names"]) for i in indexes] == [(index.name, ["request_number"])]
    finally:
        store.close()


def test_a_role_without_create_uses_journals_made_for_it(postgres_server, postgres_database, caplog):
    NotificationJournal(postgres_database.dsn).close()
    WritebackStore(postgres_database.dsn).close()
    index = f"{POSTGRES_SCHEMA}.{next(iter(tracking_request_outcomes.indexes)).name}"
    postgres_database.query(f"drop index {index}")  # made before `held_numbers` had its index
    postgres_database.query(
        "create role journal_user login password 'user-pass-9'; "
        f"grant usage on schema {POSTGRES_SCHEMA}, ocean_tracking_webhooks to journal_user; "
        f"grant select, insert, update on all tables in schema {POSTGRES_SCHEMA}, ocean_tracking_webhooks "
        "to journal_user; "
        "grant usage on all sequences in schema ocean_tracking_webhooks to journal_user")
    url = (f"postgresql://journal_user:user-pass-9@{postgres_server.host}:{postgres_server.port}/"
           f"{postgres_database.name}")
    try:
        with NotificationJournal(url) as journal:  # no DDL: its tables are found, nothing is created
            assert journal.record(body(notification("n-1"))) is True
        store = WritebackStore(url)
        store.audit("check", "role", "ok")
        assert store.rows("select action from audit_log") == [("check",)]
        store.close()
        assert f"has no index {index.partition('.')[2]} and this role cannot add it" in caplog.text  # slower, works
    finally:
        postgres_database.query("drop owned by journal_user; drop role journal_user")  # roles outlive databases
    WritebackStore(postgres_database.dsn).close()  # its owner adds it
    assert postgres_database.query("select to_regclass(%s) is not null", (index,)) == [(True,)]
