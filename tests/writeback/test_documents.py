"""Document uploads over HTTP against the real sandbox: streaming, per-file failures, faults between
steps (via the step hook), interruptions between the intent and the outcome, expired URLs, reruns that
never upload twice or create two documents, and inputs that must be refused before any request."""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path
from urllib.parse import quote

import pytest
import requests

from pipelines.journals.writes import WritebackStore
from pipelines.writeback.documents import (
    CREATING,
    UploadItem,
    file_digest,
    items_from_source,
    upload_documents,
)
from tests.support.sandboxes import (
    FULL_KEY,
    GENEROUS_LIMITS,
    REVOKED_KEY,
    SANDBOX_START,
    advance_clock,
    api_get,
    routes,
    set_faults,
)
from tests.support.syncs import cli_env, make_client

DOCS = "POST /v2/documents"
LIST = "GET /v2/documents"
BLOBS = "POST /v2/rails/active_storage/direct_uploads"


def make_files(folder, sizes: dict[str, int]):
    folder.mkdir(exist_ok=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(os.urandom(size))
    return folder


def documents(server, **params) -> list[dict]:
    return api_get(server, "/documents", **{"page[size]": 100, **params})["data"]


def puts_stored(store) -> list[tuple]:
    return store.rows("select target, count(*) from audit_log where action = 'put_bytes' "
                      "and outcome = 'stored' group by target")


def journal(store) -> dict[str, tuple]:
    """name → (step, document_id, last_error) of every journal entry."""
    rows = store.rows("select name, step, document_id, last_error from document_uploads")
    return {name: (step, document_id, error) for name, step, document_id, error in rows}


def refusals(store) -> list[str]:
    """The errors recorded for files refused before any request."""
    return [r[0] for r in store.rows("select error_summary from audit_log where action = "
                                     "'upload_document' and outcome = 'failed' order by logged_at")]


class Interrupted(BaseException):
    """Stands for Ctrl-C / a kill: not an Exception, so nothing in the batch catches it."""


def interrupt_at(step: str, name: str):
    def hook(at: str, item: UploadItem) -> None:
        if at == step and item.name == name:
            raise Interrupted(f"{name} interrupted at {step}")
    return hook


# ---- the happy path, per-file failures, faults between steps ------------------------------------------


@pytest.mark.slow
def test_folder_upload_streams_and_rerun_does_nothing(server, client, store, tmp_path):
    folder = make_files(tmp_path / "docs", {"invoice.pdf": 2_500_000, "packing.txt": 1234, "arrival.csv": 1})
    size, checksum = file_digest(folder / "invoice.pdf")
    assert size == 2_500_000 and len(checksum) == 24
    report = upload_documents(items_from_source(folder), client, store)
    assert report.counts == {"created": 3}
    docs = documents(server)
    assert sorted(d["attributes"]["name"] for d in docs) == ["arrival.csv", "invoice.pdf", "packing.txt"]
    assert {d["attributes"]["file_size_bytes"] for d in docs} == {2_500_000, 1234, 1}
    steps = store.rows("select step, upload_url, case when intent_at is null then 0 else 1 end from document_uploads")
    assert steps == [("created", None, 1)] * 3  # the storage URL is gone once the bytes are stored
    before = routes(server)
    rerun = upload_documents(items_from_source(folder), client, store)
    assert rerun.counts == {"skipped": 3}
    assert routes(server) == before  # not a single request


def test_manifest_failures_are_per_file_and_relationships_are_sent(server, client, store, tmp_path):
    folder = make_files(tmp_path / "m", {"bol.pdf": 5000, "tampered.pdf": 4000, "ok.txt": 10})
    (folder / "a_folder").mkdir()
    shipment = api_get(server, "/shipments", **{"page[size]": 1})["data"][0]["id"]
    (folder / "manifest.csv").write_text(
        "file,name,shipment_id\n"
        f"bol.pdf,Bill of lading,{shipment}\n"
        "missing.pdf,Gone,\n"
        "a_folder,Not a file,\n"
        "tampered.pdf,Tampered,\n"
        "ok.txt,,\n"
    )

    def tamper(step: str, item: UploadItem) -> None:
        if step == "blob_requested" and item.name == "Tampered":  # same size, other bytes: storage 400
            item.path.write_bytes(os.urandom(4000))

    report = upload_documents(items_from_source(folder / "manifest.csv"), client, store, hook=tamper)
    by_name = {r.name: r for r in report.results}
    assert {n: r.status for n, r in by_name.items()} == {
        "Bill of lading": "created", "Gone": "failed", "Not a file": "failed", "Tampered": "failed",
        "ok.txt": "created"}
    assert "FileNotFoundError" in by_name["Gone"].errors[0]
    assert "a folder, not a file" in by_name["Not a file"].errors[0]
    assert by_name["Tampered"].http_status == 400 and "BadDigest" in by_name["Tampered"].errors[0]
    assert journal(store)["Tampered"][0] == "blob_requested" and "BadDigest" in journal(store)["Tampered"][2]
    docs = {d["attributes"]["name"]: d for d in documents(server)}
    assert set(docs) == {"Bill of lading", "ok.txt"}
    assert docs["Bill of lading"]["relationships"]["shipments"]["data"] == [{"id": shipment, "type": "shipment"}]
    [(failed,)] = store.rows("select count(*) from audit_log where outcome = 'failed'")
    assert failed == 3  # missing, folder, storage 400

    # the tampered file now has new content (a new key): a rerun uploads it; the good ones are skipped
    rerun = upload_documents(items_from_source(folder / "manifest.csv"), client, store)
    assert {r.name: r.status for r in rerun.results}["Tampered"] == "created"
    assert len(documents(server)) == 3


@pytest.mark.slow
def test_faults_between_steps_then_rerun_completes_exactly_once(server, client, store, tmp_path):
    """file 1: connection reset between blob request and PUT (and its URL expires before the rerun);
    file 2: reset on POST /documents after the service created it; file 3: 5xx on POST /documents;
    file 4: a 429 storm on its blob request (honoured)."""
    folder = make_files(tmp_path / "f", {f"f{i}.pdf": 3000 + i for i in range(1, 5)})

    def faults(step: str, item: UploadItem) -> None:
        if step == "start":
            set_faults(server, "429" if item.name == "f4.pdf" else "none")
        elif step == "blob_requested":
            set_faults(server, "none")
            if item.name == "f1.pdf":
                raise requests.ConnectionError("simulated connection reset before the PUT")
        elif step == "creating":
            set_faults(server, {"f2.pdf": "reset", "f3.pdf": "5xx"}.get(item.name, "none"))

    report = upload_documents(items_from_source(folder), client, store, hook=faults)
    set_faults(server, "none")
    assert {r.name: (r.status, r.step) for r in report.results} == {
        "f1.pdf": ("failed", "blob_requested"), "f2.pdf": ("failed", "creating"),
        "f3.pdf": ("failed", "creating"), "f4.pdf": ("created", "created")}
    assert client.stats()["responses_429"] >= 1
    assert sorted(d["attributes"]["name"] for d in documents(server)) == ["f2.pdf", "f4.pdf"]
    first = routes(server)
    assert first[BLOBS] == 4 and first[DOCS] == 2  # the 5xx never reached the service

    advance_clock(server, 6 * 60)  # f1's storage URL (5 minutes) has expired
    rerun = upload_documents(items_from_source(folder), client, store)
    assert {r.name: r.status for r in rerun.results} == {
        "f1.pdf": "created", "f2.pdf": "created", "f3.pdf": "created", "f4.pdf": "skipped"}
    after = routes(server)
    names = sorted(d["attributes"]["name"] for d in documents(server))
    assert names == ["f1.pdf", "f2.pdf", "f3.pdf", "f4.pdf"]  # one document per file
    assert after[BLOBS] == first[BLOBS] + 1  # only f1's expired URL needed a fresh blob
    assert after[DOCS] == first[DOCS] + 2  # f1 and f3; f2 was found by reconciliation
    assert after[LIST] == first.get(LIST, 0) + 2  # one filtered, sorted list per pending file
    stored = dict(puts_stored(store))
    assert len(stored) == 4 and set(stored.values()) == {1}  # each file's bytes stored exactly once
    [(expired,)] = store.rows("select count(*) from audit_log where action = 'put_bytes' and http_status = 403")
    assert expired == 1
    assert store.rows("select outcome from audit_log where action = 'reconcile_document' "
                      "order by logged_at") == [("found",), ("absent",)]


# ---- exactly once across interruptions -----------------------------------------------------------------


def test_interrupted_after_the_intent_and_before_the_post_sends_it_once_on_rerun(server, client, store, tmp_path):
    folder = make_files(tmp_path / "i", {"a.pdf": 100, "b.pdf": 200, "c.pdf": 300})
    with pytest.raises(Interrupted):
        upload_documents(items_from_source(folder), client, store, hook=interrupt_at(CREATING, "b.pdf"))
    assert journal(store)["b.pdf"][0] == "creating"
    assert routes(server)[DOCS] == 1  # a.pdf only: b.pdf's POST never left

    rerun = upload_documents(items_from_source(folder), client, store)
    assert {r.name: r.status for r in rerun.results} == {"a.pdf": "skipped", "b.pdf": "created", "c.pdf": "created"}
    assert sorted(d["attributes"]["name"] for d in documents(server)) == ["a.pdf", "b.pdf", "c.pdf"]
    assert routes(server)[DOCS] == 3
    assert {step for step, _, _ in journal(store).values()} == {"created"}


def test_a_lost_answer_is_found_by_one_filtered_request_even_for_a_non_ascii_name(server, client, store, tmp_path):
    name = "façture 発票 n°1.pdf"
    folder = make_files(tmp_path / "u", {name: 4321})

    def hook(step: str, item: UploadItem) -> None:
        if step == CREATING:
            set_faults(server, "reset")  # the service creates the document, the answer is lost

    report = upload_documents(items_from_source(folder), client, store, hook=hook)
    set_faults(server, "none")
    assert report.results[0].step == "creating" and report.counts == {"failed": 1}
    assert len(documents(server)) == 1
    lists = routes(server).get(LIST, 0)

    rerun = upload_documents(items_from_source(folder), client, store)
    assert rerun.counts == {"created": 1}
    assert routes(server)[LIST] == lists + 1
    assert routes(server)[DOCS] == 1  # found, not re-sent
    (doc,) = documents(server)
    assert journal(store)[name][:2] == ("created", doc["id"])
    assert doc["attributes"]["file_name"] == name


def test_someone_elses_earlier_or_different_upload_is_never_claimed(server, client, store, tmp_path):
    folder = make_files(tmp_path / "mine", {"report.pdf": 1000})
    theirs = WritebackStore(tmp_path / "theirs.sqlite")
    try:
        # someone else uploaded the same file before us
        upload_documents(items_from_source(folder), client, theirs)
        advance_clock(server, 10)
        with pytest.raises(Interrupted):
            upload_documents(items_from_source(folder), client, store, hook=interrupt_at(CREATING, "report.pdf"))
        # after our intent, someone else uploads a file with the same name but another size, and another
        # with the same bytes attached to a shipment
        other = make_files(tmp_path / "other", {"report.pdf": 999})
        upload_documents(items_from_source(other), client, theirs)
        linked = tmp_path / "linked"
        linked.mkdir()
        (linked / "report.pdf").write_bytes((folder / "report.pdf").read_bytes())
        shipment = api_get(server, "/shipments", **{"page[size]": 1})["data"][0]["id"]
        (linked / "manifest.csv").write_text(f"file,name,shipment_id\nreport.pdf,report.pdf,{shipment}\n")
        upload_documents(items_from_source(linked / "manifest.csv"), client, theirs)
        theirs_ids = theirs.claimed_document_ids()
    finally:
        theirs.close()
    assert len(theirs_ids) == 3

    rerun = upload_documents(items_from_source(folder), client, store)
    assert rerun.counts == {"created": 1}
    assert store.rows("select outcome from audit_log where action = 'reconcile_document'") == [("absent",)]
    docs = documents(server, **{"filter[filename]": "report.pdf"})
    assert len(docs) == 4
    mine = journal(store)["report.pdf"][1]
    assert mine not in theirs_ids and mine in {d["id"] for d in docs}


# ---- inputs refused before any request -----------------------------------------------------------------


def test_a_symlink_leaving_the_folder_is_refused_and_the_rest_go_on(server, client, store, tmp_path):
    outside = make_files(tmp_path / "outside", {"secret.key": 64})
    folder = make_files(tmp_path / "docs", {"good.pdf": 500})
    (folder / "escape.pdf").symlink_to(outside / "secret.key")
    (folder / "alias.pdf").symlink_to(folder / "good.pdf")  # stays inside: uploaded under its own name
    (folder / "dangling.pdf").symlink_to(tmp_path / "nowhere" / "x.pdf")
    (folder / "outside_dir").symlink_to(outside, target_is_directory=True)  # a folder: not a file

    report = upload_documents(items_from_source(folder), client, store)
    by_name = {r.name: r for r in report.results}
    assert {n: r.status for n, r in by_name.items()} == {
        "alias.pdf": "created", "dangling.pdf": "failed", "escape.pdf": "failed", "good.pdf": "created"}
    assert "outside" in by_name["escape.pdf"].errors[0] and "refused" in by_name["escape.pdf"].errors[0]
    assert "outside" in by_name["dangling.pdf"].errors[0]
    assert routes(server)[BLOBS] == 2
    assert sorted(d["attributes"]["name"] for d in documents(server)) == ["alias.pdf", "good.pdf"]
    assert len(refusals(store)) == 2


def test_manifest_paths_are_confined_to_the_manifest_folder(server, client, store, tmp_path):
    outside = make_files(tmp_path / "outside", {"x.pdf": 10, "y.pdf": 20})
    folder = make_files(tmp_path / "batch", {"in.pdf": 30, "abs_inside.pdf": 40})
    (folder / "sub").mkdir()
    (folder / "sub" / "deep.pdf").write_bytes(b"deep")
    (folder / "manifest.csv").write_text(
        "file,name\n"
        "../outside/x.pdf,Relative escape\n"
        f"{outside / 'y.pdf'},Absolute escape\n"
        "sub/../../outside/x.pdf,Roundabout escape\n"
        "in.pdf,Inside\n"
        f"{folder / 'abs_inside.pdf'},Absolute inside\n"
        "sub/deep.pdf,Subfolder\n"
    )
    report = upload_documents(items_from_source(folder / "manifest.csv"), client, store)
    statuses = {r.name: r.status for r in report.results}
    assert statuses == {"Relative escape": "failed", "Absolute escape": "failed", "Roundabout escape": "failed",
                        "Inside": "created", "Absolute inside": "created", "Subfolder": "created"}
    assert all("outside" in r.errors[0] for r in report.results if r.status == "failed")
    assert routes(server)[BLOBS] == 3
    assert len(refusals(store)) == 3


def test_empty_and_oversize_files_are_refused_before_their_blob_request(server, client, store, tmp_path):
    folder = make_files(tmp_path / "s", {"empty.pdf": 0, "big.pdf": 1001, "limit.pdf": 1000, "small.pdf": 5})
    report = upload_documents(items_from_source(folder), client, store, max_bytes=1000)
    by_name = {r.name: r for r in report.results}
    assert {n: r.status for n, r in by_name.items()} == {
        "big.pdf": "failed", "empty.pdf": "failed", "limit.pdf": "created", "small.pdf": "created"}
    assert "empty (0 bytes)" in by_name["empty.pdf"].errors[0]
    assert "1001 bytes is over the upload limit of 1000 bytes" in by_name["big.pdf"].errors[0]
    assert routes(server)[BLOBS] == 2  # no blob request for the refused ones
    assert sorted(refusals(store)) == sorted([by_name["big.pdf"].errors[0], by_name["empty.pdf"].errors[0]])
    assert set(journal(store)) == {"limit.pdf", "small.pdf"}


def test_any_file_name_the_filesystem_allows_uploads(server, client, store, tmp_path):
    names = ["façture 発票 n°1.pdf", "it's a \"quoted\" name.txt", "tab\tand;semi:colon%25.csv", "ünïcödé.PDF",
             "emoji 🚢.png", "new\nline.txt", " leading space.pdf"]
    folder = make_files(tmp_path / "names", dict.fromkeys(names, 321))
    not_utf8 = os.fsdecode(b"latin1 caf\xe9.pdf")  # bytes that are not UTF-8: a surrogate escape in Python
    (folder / not_utf8).write_bytes(b"bytes")

    report = upload_documents(items_from_source(folder), client, store)
    assert report.counts == {"created": len(names) + 1}, [r.errors for r in report.results]
    docs = documents(server)
    assert sorted(d["attributes"]["file_name"] for d in docs) == sorted([*names, "latin1 caf\ufffd.pdf"])
    for name in names:  # the exact file name is what a reconciliation filters on
        assert [d["attributes"]["file_name"] for d in documents(server, **{"filter[filename]": name})] == [name]
    assert upload_documents(items_from_source(folder), client, store).counts == {"skipped": len(names) + 1}


# ---- refusals by the service -----------------------------------------------------------------------------


def test_a_blob_refused_as_too_large_is_recorded_and_the_rest_are_created(server, client, store, tmp_path):
    folder = make_files(tmp_path / "b", {"a.pdf": 10, "z.pdf": 20})
    with (folder / "huge.pdf").open("wb") as handle:
        handle.truncate(100 * 1024 * 1024 + 1)  # sparse: over the sandbox's limit, cheap on disk
    report = upload_documents(items_from_source(folder), client, store, max_bytes=200 * 1024 * 1024)
    by_name = {r.name: r for r in report.results}
    assert {n: r.status for n, r in by_name.items()} == {"a.pdf": "created", "huge.pdf": "failed", "z.pdf": "created"}
    assert by_name["huge.pdf"].http_status == 422 and "byte_size" in by_name["huge.pdf"].errors[0]
    step, document_id, error = journal(store)["huge.pdf"]
    assert (step, document_id) == ("new", None) and "422" in error
    failed = store.rows("select target, http_status from audit_log where action = 'request_blob' "
                        "and outcome = 'failed'")
    assert len(failed) == 1 and failed[0][1] == 422 and "huge.pdf" in failed[0][0]

    blobs = routes(server)[BLOBS]
    rerun = upload_documents(items_from_source(folder), client, store, max_bytes=200 * 1024 * 1024)
    assert {r.name: r.status for r in rerun.results} == {"a.pdf": "skipped", "huge.pdf": "failed", "z.pdf": "skipped"}
    assert routes(server)[BLOBS] == blobs + 1  # the failed file is resumed (and refused again)


def test_a_rejected_key_fails_each_file_without_crashing_and_a_rerun_resumes(server, store, tmp_path):
    folder = make_files(tmp_path / "k", {"a.pdf": 10, "b.pdf": 20})
    with make_client(server, tmp_path, key=REVOKED_KEY) as revoked:
        report = upload_documents(items_from_source(folder), revoked, store)
    assert report.counts == {"failed": 2}
    assert {r.http_status for r in report.results} == {401}
    assert {step for step, _, error in journal(store).values() if "401" in error} == {"new"}
    with make_client(server, tmp_path) as good:
        rerun = upload_documents(items_from_source(folder), good, store)
    assert rerun.counts == {"created": 2}
    assert len(documents(server)) == 2


# ---- the sandbox's list filter and sort, and its direct-upload headers ------------------------------------


def test_sandbox_documents_filter_by_exact_file_name_and_sort(server, client, store, tmp_path):
    folder = make_files(tmp_path / "l", {"one.pdf": 1, "one.pdf.bak": 2, "two.pdf": 3})
    upload_documents(items_from_source(folder), client, store)
    advance_clock(server, 5)
    again = make_files(tmp_path / "l2", {"one.pdf": 4})
    upload_documents(items_from_source(again), client, store)

    found = documents(server, **{"filter[filename]": "one.pdf", "sort": "-created_at"})
    assert [d["attributes"]["file_size_bytes"] for d in found] == [4, 1]
    oldest_first = documents(server, **{"filter[filename]": "one.pdf", "sort": "created_at"})
    assert [d["attributes"]["file_size_bytes"] for d in oldest_first] == [1, 4]
    assert documents(server, **{"filter[filename]": "one"}) == []
    assert len(documents(server)) == 4
    response = requests.get(f"{server.base_url}/documents", params={"sort": "size"},
                            headers={"Authorization": f"Token {FULL_KEY}"}, timeout=10)
    assert response.status_code == 400 and response.json()["errors"][0]["source"] == {"parameter": "sort"}


def test_sandbox_direct_upload_headers_are_ascii_for_any_name(server, client):
    name = 'façture "q" 発票.pdf'
    body = {"blob": {"filename": name, "content_type": "application/pdf", "byte_size": 1,
                     "checksum": "1B2M2Y8AsgTpgAmY7PhCfg=="}}
    blob = client.post("/rails/active_storage/direct_uploads", body, retry_safe=True)
    disposition = blob["direct_upload"]["headers"]["Content-Disposition"]
    assert disposition.isascii()
    sanitized = name.replace('"', "-")  # as ActiveStorage::Filename#sanitized
    assert disposition == f"inline; filename=\"facture -q- %3F%3F.pdf\"; filename*=UTF-8''{quote(sanitized, safe='')}"
    assert blob["filename"] == name


# ---- exactly once across kills ---------------------------------------------------------------------------
# Exactly once across crashes: `upload-documents` SIGKILLed at seeded random moments, 20 times over one
# 20-file folder, then run to completion: every file is one document on the service, none twice, none lost.
# The CLI talks to the sandbox through a relay that holds each request and each answer for a few milliseconds,
# so kills land in both windows that matter: before a POST reaches the service (the intent must be settled as
# absent and re-sent) and after the service created the document but before the answer was journaled (the
# intent must be settled as found, never re-sent).


FILES = 20


KILLS = 20


SEED = 49


HOLD = 0.05  # seconds each request and each answer waits in the relay


class SlowRelay:
    """A TCP relay in front of the sandbox: a request waits `hold` seconds and is dropped if its client died
    meanwhile (it never reached the service); an answer waits `hold` seconds after the service sent it (the
    service acted; a client killed now never hears of it). The service never sees a client disconnect
    mid-request, as a real one behind a load balancer would not."""

    def __init__(self, port: int, hold: float) -> None:
        self.upstream, self.hold = port, hold
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0  # accepted so far: a process has started talking once this moves
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, base_url: str) -> str:
        """`base_url` of the sandbox, pointed at the relay."""
        return base_url.replace(f":{self.upstream}/", f":{self.port}/")

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()

    @staticmethod
    def _gone(client: socket.socket) -> bool:
        try:
            readable, _, _ = select.select([client], [], [], 0)
            return bool(readable) and client.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                time.sleep(self.hold)
                if self._gone(client):
                    break
                server.sendall(data)
        except OSError:
            pass
        # the client is gone: a request already forwarded is given time to be processed, then the service
        # sees the end of the stream (a body cut short is not left waiting forever)
        time.sleep(self.hold)
        with suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                time.sleep(self.hold)
                client.sendall(data)
        except OSError:
            pass
        finally:
            server.close()
            client.close()


def _journal(path: Path, sql: str) -> list[tuple]:
    if not path.exists():
        return []
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # killed before the tables were created
        return []
    finally:
        con.close()


def _service_documents(server) -> list[dict]:
    body = api_get(server, "/documents", **{"page[size]": 100})
    assert body["meta"]["total"] == len(body["data"])  # all on one page
    return body["data"]


@pytest.mark.slow  # beside other tests: kill moments count from the first request the service sees
def test_killed_twenty_times_then_completed_uploads_each_file_once(make_sandbox, tmp_path):
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=1.0)  # a moving clock
    relay = SlowRelay(server.port, HOLD)
    folder = tmp_path / "docs"
    folder.mkdir()
    names = [f"bill-of-lading {i:02d}.pdf" for i in range(FILES)]
    for i, name in enumerate(names):
        (folder / name).write_bytes(os.urandom(1000 + i))
    journal = tmp_path / "journal.sqlite"
    env = cli_env(relay.url(server.base_url), tmp_path, OCEAN_TRACKING_WRITEBACK_JOURNAL=str(journal))
    command = [sys.executable, "-m", "pipelines", "upload-documents", str(folder)]
    moments = random.Random(SEED)
    started = time.monotonic()
    mid_batch = after_post = intents_left = 0
    try:
        for _ in range(KILLS):
            before = routes(server)
            connections = relay.connections
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # kill moments count from the first request, not from the start: a loaded machine's slower
            # start-up (imports) would otherwise eat the window, and the kills land before any batch works
            deadline = time.monotonic() + 30
            while relay.connections == connections and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(moments.uniform(0.0, 1.5))
            running = process.poll() is None
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            after = routes(server)
            mid_batch += running and sum(after.values()) > sum(before.values())
            after_post += after.get(DOCS, 0) > before.get(DOCS, 0)
            intents_left += bool(_journal(journal, "select 1 from document_uploads where step = 'creating'"))
        final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    finally:
        relay.close()
    elapsed = time.monotonic() - started

    assert final.returncode == 0, final.stdout + final.stderr
    docs = _service_documents(server)
    per_name = Counter(d["attributes"]["file_name"] for d in docs)
    assert {n: c for n, c in per_name.items() if c > 1} == {}  # 0 duplicates
    assert set(per_name) == set(names)  # 0 lost, nothing else
    entries = _journal(journal, "select name, step, document_id from document_uploads")
    assert sorted((name, step) for name, step, _ in entries) == [(n, "created") for n in sorted(names)]
    assert {doc_id for _, _, doc_id in entries} == {d["id"] for d in docs}
    posts = routes(server)[DOCS]
    assert posts == FILES  # every POST the service processed created one document, and each was needed
    settled = Counter(o for (o,) in _journal(journal, "select outcome from audit_log where action = 'reconcile_document'"))
    print(f"\nkill loop: {KILLS} kills ({mid_batch} mid-batch, {after_post} after a POST /v2/documents of that run "
          f"reached the service, {intents_left} with an intent left open), {len(docs)} documents for {FILES} files, {posts} POST /v2/documents received, "
          f"intents settled: {settled.get('found', 0)} found, {settled.get('absent', 0)} absent (re-sent); "
          f"{elapsed:.1f} s")
    assert mid_batch >= 5  # the loop really interrupted batches at work, not only start-ups
