"""Upload documents (Active Storage direct upload) exactly once per file, resumable step by step.

Steps per file, each journaled in `writeback.document_uploads` before the next one starts:
`blob_requested` (signed_id + the pending storage URL/headers) → `bytes_stored` (URL dropped) →
`document_created` (document id). A rerun resumes from the last completed step: it never PUTs bytes that
are already stored and never POSTs a document that may exist without first listing GET /documents
(`document_unknown`). An expired storage URL gets a fresh blob; a storage 400 (checksum/size mismatch),
a missing or unreadable file is reported for that file and the batch goes on.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import duckdb
import requests

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import (
    ApiError,
    MalformedResponseError,
    UpstreamError,
    ValidationError,
    WriteOutcomeUnknownError,
)
from pipelines.settings import PAGE_SIZE
from pipelines.writeback.inputs import cell, read_rows
from pipelines.writeback.ref_numbers import resolve_target
from pipelines.writeback.store import WritebackStore, error_summary

CHUNK = 1 << 20
BLOB_REQUESTED, BYTES_STORED, DOCUMENT_UNKNOWN, DOCUMENT_CREATED = (
    "blob_requested", "bytes_stored", "document_unknown", "document_created")
FAILED, SKIPPED, WOULD_UPLOAD, CREATED = "failed", "skipped", "would_upload", "created"

#: called as hook(step, item) after each completed step and at "start"; tests use it to inject faults
StepHook = Callable[[str, "UploadItem"], None]


@dataclass
class UploadItem:
    """One file to upload as a document, optionally attached to a shipment and/or container."""

    path: Path
    name: str
    shipment_id: str | None = None
    container_id: str | None = None
    problem: str | None = None


@dataclass
class UploadResult:
    """What happened to one file."""

    path: str
    name: str
    status: str
    step: str | None = None
    document_id: str | None = None
    http_status: int | None = None
    errors: list[str] = field(default_factory=list)


@dataclass
class UploadReport:
    """Per-file results plus counts per status."""

    results: list[UploadResult]

    @property
    def counts(self) -> dict[str, int]:
        """How many files ended in each status."""
        return dict(Counter(r.status for r in self.results))


def file_digest(path: Path) -> tuple[int, str]:
    """(byte_size, Base64 MD5) of a file, read in 1 MiB chunks so a large file never sits in memory."""
    md5, size = hashlib.md5(), 0
    with path.open("rb") as handle:
        while chunk := handle.read(CHUNK):
            md5.update(chunk)
            size += len(chunk)
    return size, base64.b64encode(md5.digest()).decode()


def items_from_source(source: str | Path, con: duckdb.DuckDBPyConnection | None = None) -> list[UploadItem]:
    """A folder (every regular file, named after itself) or a manifest CSV/table with columns `file`,
    `name`, and optionally `shipment_id`/`bill_of_lading_number`/`container_id`/`container_number`
    (numbers resolved in the warehouse). Relative manifest paths are relative to the manifest."""
    source_path = Path(source)
    if source_path.is_dir():
        return [UploadItem(p, p.name) for p in sorted(source_path.iterdir()) if p.is_file()]
    base = source_path.parent if source_path.is_file() else Path.cwd()
    items = []
    for row in read_rows(source, con):
        file = cell(row, "file", "path")
        path = (base / file) if file and not Path(file).is_absolute() else Path(file)
        item = UploadItem(path, cell(row, "name") or path.name)
        if not file:
            item.problem = "no file given"
        elif any(cell(row, c) for c in ("shipment_id", "bill_of_lading_number", "bill_of_lading")):
            item.shipment_id, item.problem = _target(row, con, "shipment")
        if item.problem is None and any(cell(row, c) for c in ("container_id", "container_number")):
            item.container_id, item.problem = _target(
                {k: row.get(k) for k in ("container_id", "container_number")}, con, "container")
        items.append(item)
    return items


def _target(row: Mapping[str, Any], con: duckdb.DuckDBPyConnection | None, kind: str) -> tuple[str | None, str | None]:
    found = resolve_target(row, con)
    if isinstance(found, str):
        return None, found
    return (found[1], None) if found[0] == kind else (None, f"expected a {kind}")


def file_key(item: UploadItem, size: int, checksum: str) -> str:
    """Idempotency key of one upload: the file's path and content plus the document it becomes."""
    raw = "|".join([str(item.path.resolve()), str(size), checksum, item.name, item.shipment_id or "",
                    item.container_id or ""])
    return hashlib.sha256(raw.encode()).hexdigest()[:32]


def upload_documents(
    items: Iterable[UploadItem],
    client: OceanTrackingClient,
    store: WritebackStore,
    *,
    dry_run: bool = False,
    hook: StepHook | None = None,
) -> UploadReport:
    """Upload each file once (resuming journaled steps); a failing file is reported and the rest go on."""
    return UploadReport([_upload_one(item, client, store, dry_run, hook) for item in items])


def _upload_one(item: UploadItem, client: OceanTrackingClient, store: WritebackStore, dry_run: bool,
                hook: StepHook | None) -> UploadResult:
    result = UploadResult(str(item.path), item.name, FAILED)
    if item.problem:
        result.errors.append(item.problem)
        return _report(store, result, dry_run)
    try:
        size, checksum = file_digest(item.path)
    except OSError as exc:  # missing, a folder, no permission
        result.errors.append(f"cannot read the file: {type(exc).__name__}: {exc.strerror or exc}")
        return _report(store, result, dry_run)
    key = file_key(item, size, checksum)
    entry = store.upload(key) or {
        "file_key": key, "path": str(item.path), "name": item.name, "byte_size": size, "checksum": checksum,
        "shipment_id": item.shipment_id, "container_id": item.container_id, "step": None}
    result.step = entry["step"]
    if entry["step"] == DOCUMENT_CREATED:
        result.status, result.document_id = SKIPPED, entry["document_id"]
        return result
    if dry_run:
        result.status = WOULD_UPLOAD
        return result
    if hook:
        hook("start", item)
    try:
        _advance(entry, item, client, store, hook)
        result.status, result.document_id = CREATED, entry["document_id"]
    except ApiError as exc:
        result.http_status, result.errors = exc.status, [error_summary(exc)]
    except (OSError, requests.RequestException) as exc:
        result.errors = [error_summary(exc)]
    result.step = entry["step"]
    if result.errors:
        entry["last_error"] = result.errors[0]
        store.save_upload(entry)
    return result


def _report(store: WritebackStore, result: UploadResult, dry_run: bool) -> UploadResult:
    if not dry_run:
        store.audit("upload_document", f"file:{result.path}", FAILED, error="; ".join(result.errors))
    return result


def _advance(entry: dict[str, Any], item: UploadItem, client: OceanTrackingClient, store: WritebackStore,
             hook: StepHook | None) -> None:
    """Run the remaining steps of one journal entry, saving it after each."""
    if entry["step"] in (None, BLOB_REQUESTED):
        if entry["step"] is None:
            _request_blob(entry, client, store)
            if hook:
                hook(BLOB_REQUESTED, item)
        _store_bytes(entry, item, client, store)
        if hook:
            hook(BYTES_STORED, item)
    if entry["step"] == DOCUMENT_UNKNOWN:
        found = _find_document(entry, client, store)
        store.audit("reconcile_document", f"blob:{entry['blob_id']}", "found" if found else "absent", http_status=200)
        if found:
            _save(store, entry, step=DOCUMENT_CREATED, document_id=found)
            return
        _save(store, entry, step=BYTES_STORED)
    if entry["step"] == BYTES_STORED:
        _create_document(entry, client, store)
        if hook:
            hook(DOCUMENT_CREATED, item)


def _save(store: WritebackStore, entry: dict[str, Any], **changes: Any) -> None:
    entry.update(changes, last_error=None)
    store.save_upload(entry)


def _request_blob(entry: dict[str, Any], client: OceanTrackingClient, store: WritebackStore) -> None:
    """POST the blob (retry-safe: a duplicate blob is an orphan that never becomes a document)."""
    content_type = mimetypes.guess_type(entry["name"])[0] or mimetypes.guess_type(entry["path"])[0]
    body = {"blob": {"filename": Path(entry["path"]).name, "content_type": content_type or "application/octet-stream",
                     "byte_size": entry["byte_size"], "checksum": entry["checksum"]}}
    target = f"blob:{Path(entry['path']).name}"
    try:
        blob = client.post("/rails/active_storage/direct_uploads", body, retry_safe=True) or {}
    except ApiError as exc:
        store.audit("request_blob", target, FAILED, http_status=exc.status, error=error_summary(exc))
        raise
    upload = blob.get("direct_upload") or {}
    if not blob.get("signed_id") or not upload.get("url"):
        raise MalformedResponseError("the direct-upload response has no signed_id or direct_upload.url",
                                     method="POST", path="/rails/active_storage/direct_uploads")
    store.audit("request_blob", f"blob:{blob.get('id')}", "created", http_status=200)
    _save(store, entry, step=BLOB_REQUESTED, blob_id=blob.get("id"), signed_id=blob["signed_id"],
          upload_url=upload["url"], upload_headers=dict(upload.get("headers") or {}))


def _store_bytes(entry: dict[str, Any], item: UploadItem, client: OceanTrackingClient, store: WritebackStore) -> None:
    """PUT the file, streamed from disk, to the storage URL; an expired URL gets one fresh blob."""
    for attempt in (1, 2):
        headers = {**(entry["upload_headers"] or {}), "Content-Length": str(entry["byte_size"])}
        target = f"storage:{entry['blob_id']}"
        try:
            with item.path.open("rb") as handle:
                # an empty file object would make requests send `Transfer-Encoding: chunked` next to
                # Content-Length: 0 (an invalid request); zero bytes go as an empty body instead
                body = handle if entry["byte_size"] else b""
                response = client.put_raw(entry["upload_url"], body, headers)
        except ApiError as exc:
            store.audit("put_bytes", target, FAILED, http_status=exc.status, error=error_summary(exc))
            if exc.status == 403 and "expired" in str(exc).lower() and attempt == 1:
                _request_blob(entry, client, store)
                continue
            raise
        store.audit("put_bytes", target, "stored", http_status=response.status_code)
        _save(store, entry, step=BYTES_STORED, upload_url=None, upload_headers=None)
        return


def _create_document(entry: dict[str, Any], client: OceanTrackingClient, store: WritebackStore) -> None:
    """POST /documents with the signed_id only (plus shipment/container relationships when given)."""
    data: dict[str, Any] = {"type": "document",
                            "attributes": {"name": entry["name"], "attached_document": entry["signed_id"]}}
    relationships = {kind: {"data": {"id": entry[f"{kind}_id"], "type": kind}}
                     for kind in ("shipment", "container") if entry.get(f"{kind}_id")}
    if relationships:
        data["relationships"] = relationships
    target = f"blob:{entry['blob_id']}"
    try:
        document = client.post("/documents", {"data": data}) or {}
    except (WriteOutcomeUnknownError, UpstreamError, MalformedResponseError) as exc:
        store.audit("create_document", target, "unknown", http_status=exc.status, error=error_summary(exc))
        _save(store, entry, step=DOCUMENT_UNKNOWN)
        raise
    except ValidationError as exc:
        store.audit("create_document", target, FAILED, http_status=exc.status, error=error_summary(exc))
        if any(e.code == "invalid" and "no uploaded bytes" in (e.detail or "") for e in exc.errors):
            _save(store, entry, step=None)  # the storage never got the bytes: start over with a new blob
        raise
    document_id = (document.get("data") or {}).get("id")
    store.audit("create_document", f"document:{document_id}", CREATED, http_status=201)
    _save(store, entry, step=DOCUMENT_CREATED, document_id=document_id)


def _find_document(entry: dict[str, Any], client: OceanTrackingClient, store: WritebackStore) -> str | None:
    """A document on the service that this entry's POST created (same name, file name, size and
    attachments, not yet claimed by another journal entry), or None."""
    claimed = store.claimed_document_ids()
    for page in client.paginate("/documents", {"page[size]": PAGE_SIZE}):
        for doc in page.get("data") or []:
            attrs, rels = doc.get("attributes") or {}, doc.get("relationships") or {}
            linked = {kind: [d.get("id") for d in ((rels.get(f"{kind}s") or {}).get("data") or [])]
                      for kind in ("shipment", "container")}
            if (doc.get("id") not in claimed and attrs.get("name") == entry["name"]
                    and attrs.get("file_name") == Path(entry["path"]).name
                    and attrs.get("file_size_bytes") == entry["byte_size"]
                    and all((entry.get(f"{k}_id") in ids) if entry.get(f"{k}_id") else not ids
                            for k, ids in linked.items())):
                return doc["id"]
    return None
