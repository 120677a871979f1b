"""Document uploads over HTTP against the real sandbox: streaming, per-file failures, faults between
steps (via the step hook), expired URLs, and reruns that never upload twice or create two documents."""

from __future__ import annotations

import os

import requests

from pipelines.writeback.documents import UploadItem, file_digest, items_from_source, upload_documents
from tests.e2e.conftest import advance_clock
from tests.writeback.conftest import api_get, routes, set_faults

DOCS = "POST /v2/documents"
BLOBS = "POST /v2/rails/active_storage/direct_uploads"


def make_files(folder, sizes: dict[str, int]):
    folder.mkdir(exist_ok=True)
    for name, size in sizes.items():
        (folder / name).write_bytes(os.urandom(size))
    return folder


def documents(server) -> list[dict]:
    return api_get(server, "/documents", **{"page[size]": 100})["data"]


def puts_stored(con) -> list[tuple]:
    return con.execute("select target, count(*) from writeback.audit_log where action = 'put_bytes' "
                       "and outcome = 'stored' group by target").fetchall()


def test_folder_upload_streams_and_rerun_does_nothing(server, client, store, con, tmp_path):
    folder = make_files(tmp_path / "docs", {"invoice.pdf": 2_500_000, "packing.txt": 1234, "empty.csv": 0})
    size, checksum = file_digest(folder / "invoice.pdf")
    assert size == 2_500_000 and len(checksum) == 24
    report = upload_documents(items_from_source(folder), client, store)
    assert report.counts == {"created": 3}
    docs = documents(server)
    assert sorted(d["attributes"]["name"] for d in docs) == ["empty.csv", "invoice.pdf", "packing.txt"]
    assert {d["attributes"]["file_size_bytes"] for d in docs} == {2_500_000, 1234, 0}
    steps = con.execute("select step, upload_url from writeback.document_uploads").fetchall()
    assert steps == [("document_created", None)] * 3  # the storage URL is gone once the bytes are stored
    before = routes(server)
    rerun = upload_documents(items_from_source(folder), client, store)
    assert rerun.counts == {"skipped": 3}
    assert routes(server) == before  # not a single request


def test_manifest_failures_are_per_file_and_relationships_are_sent(server, client, store, con, tmp_path):
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
    assert "IsADirectoryError" in by_name["Not a file"].errors[0]
    assert by_name["Tampered"].http_status == 400 and "BadDigest" in by_name["Tampered"].errors[0]
    docs = {d["attributes"]["name"]: d for d in documents(server)}
    assert set(docs) == {"Bill of lading", "ok.txt"}
    assert docs["Bill of lading"]["relationships"]["shipments"]["data"] == [{"id": shipment, "type": "shipment"}]
    failed = con.execute("select count(*) from writeback.audit_log where outcome = 'failed'").fetchone()[0]
    assert failed == 3  # missing, folder, storage 400

    # the tampered file now has new content (a new key): a rerun uploads it; the good ones are skipped
    rerun = upload_documents(items_from_source(folder / "manifest.csv"), client, store)
    assert {r.name: r.status for r in rerun.results}["Tampered"] == "created"
    assert len(documents(server)) == 3


def test_faults_between_steps_then_rerun_completes_exactly_once(server, client, store, con, tmp_path):
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
        elif step == "bytes_stored":
            set_faults(server, {"f2.pdf": "reset", "f3.pdf": "5xx"}.get(item.name, "none"))

    report = upload_documents(items_from_source(folder), client, store, hook=faults)
    set_faults(server, "none")
    assert {r.name: (r.status, r.step) for r in report.results} == {
        "f1.pdf": ("failed", "blob_requested"), "f2.pdf": ("failed", "document_unknown"),
        "f3.pdf": ("failed", "document_unknown"), "f4.pdf": ("created", "document_created")}
    assert client.stats()["responses_429"] >= 1
    assert sorted(d["attributes"]["name"] for d in documents(server)) == ["f2.pdf", "f4.pdf"]
    first = routes(server)
    assert first[BLOBS] == 4 and first[DOCS] == 2  # the 5xx never reached the service

    advance_clock(server, 6 * 60)  # f1's storage URL (5 minutes) has expired
    rerun = upload_documents(items_from_source(folder), client, store)
    assert {r.name: r.status for r in rerun.results} == {
        "f1.pdf": "created", "f2.pdf": "created", "f3.pdf": "created", "f4.pdf": "skipped"}
    names = sorted(d["attributes"]["name"] for d in documents(server))
    assert names == ["f1.pdf", "f2.pdf", "f3.pdf", "f4.pdf"]  # one document per file
    after = routes(server)
    assert after[BLOBS] == first[BLOBS] + 1  # only f1's expired URL needed a fresh blob
    assert after[DOCS] == first[DOCS] + 2  # f1 and f3; f2 was found by reconciliation
    stored = dict(puts_stored(con))
    assert len(stored) == 4 and set(stored.values()) == {1}  # each file's bytes stored exactly once
    expired = con.execute("select count(*) from writeback.audit_log where action = 'put_bytes' "
                          "and http_status = 403").fetchone()[0]
    assert expired == 1
    assert con.execute("select outcome from writeback.audit_log where action = 'reconcile_document' "
                       "order by logged_at").fetchall() == [("found",), ("absent",)]
