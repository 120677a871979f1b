"""Direct uploads (Active Storage) → storage PUT → POST /documents, and every rejection."""

from __future__ import annotations

import base64
import hashlib

import pytest
import requests

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY

DATA = b"%PDF-1.4 sandbox bill of lading\n" * 10


def md5b64(b: bytes) -> str:
    return base64.b64encode(hashlib.md5(b).digest()).decode()


def blob_req(data=DATA, **over):
    blob = {"filename": "bol.pdf", "content_type": "application/pdf", "byte_size": len(data), "checksum": md5b64(data)}
    blob.update(over)
    return {"blob": blob}


def create_blob(cl, path="/rails/active_storage/direct_uploads", **over):
    return ok(cl.post(path, blob_req(**over)))


def put(blob, data=DATA, headers=None):
    h = dict(blob["direct_upload"]["headers"])
    h.update(headers or {})
    return requests.put(blob["direct_upload"]["url"], data=data, headers=h, timeout=10)


def doc(signed, name="BOL"):
    return {"data": {"type": "document", "attributes": {"name": name, "attached_document": signed}}}


@pytest.fixture
def srv(make_sandbox):
    return make_sandbox()


@pytest.fixture
def cl(srv):
    return Client(srv.base_url, FULL_KEY)


def test_happy_path_and_mirror(srv, cl):
    blob = create_blob(cl)
    for f in ("id", "key", "filename", "content_type", "metadata", "service_name", "byte_size", "checksum",
              "created_at", "signed_id", "direct_upload"):
        assert f in blob
    assert set(blob["direct_upload"]["headers"]) == {"Content-Type", "Content-MD5", "Content-Disposition"}
    assert blob["direct_upload"]["url"].startswith(srv.root_url + "/storage/")
    assert blob["checksum"] == md5b64(DATA) and blob["byte_size"] == len(DATA)
    assert put(blob).status_code == 200
    created = ok(cl.post("/documents", doc(blob["signed_id"])), 201)
    assert created["data"]["type"] == "document"
    listed = ok(cl.get("/documents"))
    assert created["data"]["id"] in [d["id"] for d in listed["data"]]
    mirror = requests.post(srv.root_url + "/rails/active_storage/direct_uploads", json=blob_req(),
                           headers={"Authorization": f"Token {FULL_KEY}"}, timeout=10)
    assert mirror.status_code == 200 and mirror.json()["signed_id"]


@pytest.mark.parametrize("over", [{"checksum": "abc"}, {"checksum": hashlib.md5(DATA).hexdigest()},
                                  {"byte_size": -1}, {"byte_size": "12"}, {"filename": ""}, {"content_type": None}])
def test_bad_blob_request_is_422(cl, over):
    errs = errors(cl.post("/rails/active_storage/direct_uploads", blob_req(**over)), 422)
    assert errs[0]["source"]["pointer"].startswith("/blob")


def test_storage_rejections_store_nothing(cl):
    blob = create_blob(cl)
    other = DATA[:-1] + b"X"
    cases = [
        (other, {}, 400, "BadDigest"),                                  # body md5 differs
        (DATA, {"Content-MD5": md5b64(b"other")}, 400, "BadDigest"),     # header md5 differs
        (DATA[:-5], {}, 400, "IncompleteBody"),                          # wrong length
        (DATA, {"Content-Type": "text/plain"}, 400, "InvalidArgument"),  # not the returned headers
    ]
    for data, hdrs, status, code in cases:
        resp = put(blob, data, hdrs)
        assert resp.status_code == status and f"<Code>{code}</Code>" in resp.text, (hdrs, resp.text)
        (e,) = errors(cl.post("/documents", doc(blob["signed_id"])), 422)
        assert e["source"]["pointer"] == "/data/attributes/attached_document"
    no_md5 = requests.put(blob["direct_upload"]["url"], data=DATA,
                          headers={"Content-Type": "application/pdf"}, timeout=10)
    assert no_md5.status_code == 400


def test_upload_url_expires_after_5_sim_minutes(srv, cl):
    blob = create_blob(cl)
    requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 301}, timeout=5)
    resp = put(blob)
    assert resp.status_code == 403 and "expired" in resp.text
    errors(cl.post("/documents", doc(blob["signed_id"])), 422)


def test_forged_storage_url(srv, cl):
    blob = create_blob(cl)
    url = blob["direct_upload"]["url"]
    resp = requests.put(url[:-2] + ("00" if not url.endswith("00") else "11"), data=DATA,
                        headers=blob["direct_upload"]["headers"], timeout=10)
    assert resp.status_code == 403


def test_documents_reject_bad_attachments(cl):
    blob = create_blob(cl)
    put(blob)
    signed = blob["signed_id"]
    tampered = ("A" if signed[0] != "A" else "B") + signed[1:]
    for bad in (tampered, blob["direct_upload"]["url"], signed + "x", "garbage", blob["id"]):
        (e,) = errors(cl.post("/documents", doc(bad)), 422)
        assert e["source"]["pointer"] == "/data/attributes/attached_document"
    pending = create_blob(cl)
    (e,) = errors(cl.post("/documents", doc(pending["signed_id"])), 422)
    assert "no uploaded bytes" in e["detail"]
    errs = errors(cl.post("/documents", {"data": {"type": "document", "attributes": {}}}), 422)
    assert {e["source"]["pointer"] for e in errs} == {"/data/attributes/name", "/data/attributes/attached_document"}


def test_blob_of_another_account_rejected(srv, cl):
    blob = create_blob(cl)
    put(blob)
    errors(Client(srv.base_url, BASIC_KEY).post("/documents", doc(blob["signed_id"])), 422)
