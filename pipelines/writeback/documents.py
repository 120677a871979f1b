"""Upload documents (Active Storage direct upload) exactly once per file, across crashes, resumable step by step.

Steps per file, each committed to the journal (`writeback.document_uploads`) before the next one starts:
`new` (no blob yet; a refused blob request leaves the file here) → `blob_requested` (signed_id + the pending
storage URL/headers) → `bytes_stored` (URL dropped) → `creating` (the intent, stamped with the service's
clock, committed before POST /documents) → `created` (document id). A rerun resumes from the last step.

Only the document creation needs an intent: it is the one write that is not idempotent. A blob request is
cheap, and a blob that never becomes a document is harmless (nothing lists it; it is never a document), so
a crash before the PUT just costs a fresh blob; storing the same bytes again is idempotent.

A run killed (SIGKILL, Ctrl-C) after the intent, or a POST whose answer was lost, leaves the file at
`creating`. Every batch settles those first, before sending anything new: one
`GET /documents?filter[filename]=…&sort=-created_at` lists the documents with that file name, newest first,
down to the intent's instant. One with the same name, byte size and shipment/container, created at or after
the intent and not attributed to another file, is this file's (`created`); none means the POST never took
effect and the file is sent again. Someone else's earlier upload of the same file is never claimed.

Before any request for a file: it must be a regular file that resolves (symlinks followed) inside the folder
given, or inside the manifest's folder; empty files and files over `max_bytes` are refused. Each file's
failure (refused, blob refused, storage PUT refused, checksum mismatch, expired URL) is recorded for that file
in the journal and the audit log, and the rest of the batch goes on; a rerun resumes the failed files.
"""

from __future__ import annotations

import base64
import hashlib
import mimetypes
import stat
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from contextlib import suppress
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import duckdb
import requests

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError, MalformedResponseError
from pipelines.journals.writes import WritebackStore, error_summary
from pipelines.settings import DATASET_NAME, PAGE_SIZE
from pipelines.writeback import INTENT_MARGIN, MANIFEST_COLUMNS, cell, read_rows
from pipelines.writeback.ref_numbers import resolve_target

CHUNK = 1 << 20
#: The largest file sent. The service documents no upload limit (neither the API notes nor the OpenAPI spec
#: name one, and the direct-upload endpoint is not in the spec), so this is our conservative default: it
#: covers multi-page scanned shipping documents, and a larger file is refused locally, before its blob
#: request, rather than by the service after its bytes were sent. Pass `max_bytes` to change it.
DEFAULT_MAX_BYTES = 50 * 1024 * 1024
# When the service's clock cannot be learnt, the host's is used with a wide margin for clock skew.
HOST_CLOCK_MARGIN = timedelta(minutes=10)

NEW, BLOB_REQUESTED, BYTES_STORED, CREATING, CREATED = "new", "blob_requested", "bytes_stored", "creating", "created"
FAILED, SKIPPED, WOULD_UPLOAD = "failed", "skipped", "would_upload"
NOT_DONE = {FAILED}  # a batch with one of these files did not fully succeed

#: called as hook(step, item) at "start" and after each step is journaled (`creating`: just before the
#: POST); tests use it to inject faults and interruptions
StepHook = Callable[[str, "UploadItem"], None]


@dataclass
class UploadItem:
    """One file to upload as a document, optionally attached to a shipment and/or container.

    `root`, when set, is the folder the file must resolve into (symlinks followed); `problem` is a reason,
    found while reading the source, not to upload it."""

    path: Path
    name: str
    shipment_id: str | None = None
    container_id: str | None = None
    problem: str | None = None
    root: Path | None = None


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


def safe_text(text: str) -> str:
    """`text` as valid Unicode: bytes of a file name that are not UTF-8 (which Python keeps as surrogate
    escapes) become U+FFFD, so any name the filesystem allows can be sent as JSON and journaled."""
    return text.encode("utf-8", "surrogateescape").decode("utf-8", "replace")


def items_from_source(source: str | Path, con: duckdb.DuckDBPyConnection | None = None, *,
                      root: str | Path | None = None, allow_formulas: bool = False,
                      dataset: str = DATASET_NAME) -> list[UploadItem]:
    """A folder (every file in it, named after itself; subfolders are not entered) or a manifest CSV/table
    with columns `file`, `name`, and optionally `shipment_id`/`bill_of_lading_number`/`container_id`/
    `container_number` (numbers resolved in the warehouse, in the account's `dataset`); the manifest is read and checked by
    `read_rows` (`InputError` for an unexpected column or a formula-like value).

    Every file must resolve inside `root`: by default the folder itself, or the manifest's folder (the
    working directory for a table), against which relative manifest paths are read. A symlink leading out
    of it, a `../` path or an absolute path elsewhere is refused when the file's turn comes."""
    source_path = Path(source)
    if source_path.is_dir():
        folder = Path(root) if root is not None else source_path
        # is_dir follows symlinks: a subfolder, or a link to one, is not a file to upload
        return [UploadItem(p, safe_text(p.name), root=folder) for p in sorted(source_path.iterdir()) if not p.is_dir()]
    base = source_path.parent if source_path.is_file() else Path.cwd()
    folder = Path(root) if root is not None else base
    items = []
    for row in read_rows(source, con, columns=MANIFEST_COLUMNS, allow_formulas=allow_formulas):
        file = cell(row, "file", "path")
        path = base / file  # an absolute `file` stands for itself; it is confined to `folder` like any other
        item = UploadItem(path, cell(row, "name") or safe_text(path.name), root=folder)
        if not file:
            item.problem = "no file given"
        elif any(cell(row, c) for c in ("shipment_id", "bill_of_lading_number", "bill_of_lading")):
            item.shipment_id, item.problem = _target(row, con, "shipment", dataset)
        if item.problem is None and any(cell(row, c) for c in ("container_id", "container_number")):
            item.container_id, item.problem = _target(
                {k: row.get(k) for k in ("container_id", "container_number")}, con, "container", dataset)
        items.append(item)
    return items


def _target(row: Mapping[str, Any], con: duckdb.DuckDBPyConnection | None, kind: str,
            dataset: str) -> tuple[str | None, str | None]:
    found = resolve_target(row, con, dataset=dataset)
    if isinstance(found, str):
        return None, found
    return (found[1], None) if found[0] == kind else (None, f"expected a {kind}")


def file_key(item: UploadItem, size: int, checksum: str) -> str:
    """Idempotency key of one upload: the file's path and content plus the document it becomes."""
    raw = "|".join([str(item.path.resolve()), str(size), checksum, item.name, item.shipment_id or "",
                    item.container_id or ""])
    return hashlib.sha256(raw.encode("utf-8", "surrogateescape")).hexdigest()[:32]


def check_file(item: UploadItem, max_bytes: int = DEFAULT_MAX_BYTES) -> Path | str:
    """The real path of a file that may be uploaded, or why it may not (refused before any request):
    it must resolve inside `item.root`, be a regular file, not be empty and not exceed `max_bytes`."""
    try:
        real = item.path.resolve()
    except (OSError, RuntimeError) as exc:  # a symlink loop
        return f"cannot resolve the path: {type(exc).__name__}: {exc}"
    if item.root is not None:
        root = item.root.resolve()
        if not real.is_relative_to(root):
            return (f"refused: the file resolves to {safe_text(str(real))}, outside {safe_text(str(root))} "
                    "(a symlink or a path leading out of the folder)")
    try:
        info = real.stat()
    except OSError as exc:  # missing, no permission
        return f"cannot read the file: {type(exc).__name__}: {exc.strerror or exc}"
    if stat.S_ISDIR(info.st_mode):
        return "refused: a folder, not a file"
    if not stat.S_ISREG(info.st_mode):
        return "refused: not a regular file (a device, pipe or socket)"
    return _size_problem(info.st_size, max_bytes) or real


def _size_problem(size: int, max_bytes: int) -> str | None:
    if size == 0:
        return "refused: the file is empty (0 bytes); a document needs content"
    if size > max_bytes:
        return f"refused: {size} bytes is over the upload limit of {max_bytes} bytes (max_bytes)"
    return None


def upload_documents(
    items: Iterable[UploadItem],
    client: OceanTrackingClient,
    store: WritebackStore,
    *,
    dry_run: bool = False,
    hook: StepHook | None = None,
    max_bytes: int = DEFAULT_MAX_BYTES,
) -> UploadReport:
    """Upload each file once: settle what earlier runs left at `creating`, then resume or start each file;
    a failing file is reported and recorded, and the rest go on. A dry run sends and records nothing."""
    found_now: set[str] = set()
    if not dry_run:
        found_now = {key for key, document_id in settle_pending(client, store).items() if document_id}
    return UploadReport([_upload_one(item, client, store, dry_run, hook, max_bytes, found_now) for item in items])


def settle_pending(client: OceanTrackingClient, store: WritebackStore) -> dict[str, str | None]:
    """Settle every upload (of any batch) a crash or a lost answer left at `creating`: `created` with the
    document found on the service, else back to `bytes_stored` (the POST never took effect: safe to send).
    Returns the document id (None: absent) per file key; an entry whose lookup failed stays `creating`."""
    settled = {}
    for entry in store.uploads_at(CREATING):
        try:
            settled[entry["file_key"]] = _settle(entry, client, store)
        except (ApiError, requests.RequestException):
            continue  # audited by _settle; the file is looked up again when its turn comes, never re-sent blind
    return settled


def _settle(entry: dict[str, Any], client: OceanTrackingClient, store: WritebackStore) -> str | None:
    target = f"file:{entry['path']}"
    try:
        found = find_document(entry, client, store.claimed_document_ids())
    except ApiError as exc:
        store.audit("reconcile_document", target, FAILED, http_status=exc.status, error=error_summary(exc))
        raise
    store.audit("reconcile_document", f"document:{found}" if found else target, "found" if found else "absent",
                http_status=200)
    if found:
        _save(store, entry, step=CREATED, document_id=found)
    else:
        _save(store, entry, step=BYTES_STORED)
    return found


def _upload_one(item: UploadItem, client: OceanTrackingClient, store: WritebackStore, dry_run: bool,
                hook: StepHook | None, max_bytes: int, found_now: set[str]) -> UploadResult:
    result = UploadResult(safe_text(str(item.path)), item.name, FAILED)
    checked = item.problem or check_file(item, max_bytes)
    if isinstance(checked, str):
        result.errors.append(checked)
        return _report(store, result, dry_run)
    try:
        size, checksum = file_digest(checked)
    except OSError as exc:
        result.errors.append(f"cannot read the file: {type(exc).__name__}: {exc.strerror or exc}")
        return _report(store, result, dry_run)
    if problem := _size_problem(size, max_bytes):  # it changed since it was checked
        result.errors.append(problem)
        return _report(store, result, dry_run)
    key = file_key(item, size, checksum)
    entry = store.upload(key) or {
        "file_key": key, "path": safe_text(str(item.path)), "name": item.name, "byte_size": size,
        "checksum": checksum, "shipment_id": item.shipment_id, "container_id": item.container_id, "step": NEW}
    result.step = entry["step"]
    if entry["step"] == CREATED:
        result.status, result.document_id = (CREATED if key in found_now else SKIPPED), entry["document_id"]
        return result
    if dry_run:
        result.status = WOULD_UPLOAD
        return result
    if hook:
        hook("start", item)
    try:
        _advance(entry, item, checked, client, store, hook)
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


def _advance(entry: dict[str, Any], item: UploadItem, real: Path, client: OceanTrackingClient,
             store: WritebackStore, hook: StepHook | None) -> None:
    """Run the remaining steps of one journal entry, saving it after each."""
    if entry["step"] == CREATING:  # its lookup at batch start failed: never POST again before knowing
        _settle(entry, client, store)
    if entry["step"] in (NEW, BLOB_REQUESTED):
        if entry["step"] == NEW or not entry.get("upload_url"):
            _request_blob(entry, client, store)
            if hook:
                hook(BLOB_REQUESTED, item)
        _store_bytes(entry, real, client, store)
        if hook:
            hook(BYTES_STORED, item)
    if entry["step"] == BYTES_STORED:
        _create_document(entry, item, client, store, hook)
        if hook:
            hook(CREATED, item)


def _save(store: WritebackStore, entry: dict[str, Any], **changes: Any) -> None:
    entry.update(changes, last_error=None)
    store.save_upload(entry)


def _file_name(entry: Mapping[str, Any]) -> str:
    """The blob's filename, which becomes the document's `file_name` (what reconciliation filters on)."""
    return Path(entry["path"]).name


def _request_blob(entry: dict[str, Any], client: OceanTrackingClient, store: WritebackStore) -> None:
    """POST the blob (retry-safe: a duplicate blob is an orphan that never becomes a document)."""
    content_type = mimetypes.guess_type(entry["name"])[0] or mimetypes.guess_type(entry["path"])[0]
    body = {"blob": {"filename": _file_name(entry), "content_type": content_type or "application/octet-stream",
                     "byte_size": entry["byte_size"], "checksum": entry["checksum"]}}
    try:
        blob = client.post("/rails/active_storage/direct_uploads", body, retry_safe=True) or {}
    except ApiError as exc:
        store.audit("request_blob", f"file:{entry['path']}", FAILED, http_status=exc.status, error=error_summary(exc))
        raise
    upload = blob.get("direct_upload") or {}
    if not blob.get("signed_id") or not upload.get("url"):
        raise MalformedResponseError("the direct-upload response has no signed_id or direct_upload.url",
                                     method="POST", path="/rails/active_storage/direct_uploads")
    store.audit("request_blob", f"blob:{blob.get('id')}", "created", http_status=200)
    _save(store, entry, step=BLOB_REQUESTED, blob_id=blob.get("id"), signed_id=blob["signed_id"],
          upload_url=upload["url"], upload_headers=dict(upload.get("headers") or {}))


def _header_value(value: Any) -> str | bytes:
    # the storage signs the headers it handed out; one that is not Latin-1 (e.g. a non-ASCII file name in
    # Content-Disposition) is sent as its UTF-8 bytes rather than failing to encode
    text = str(value)
    try:
        text.encode("latin-1")
    except UnicodeEncodeError:
        return text.encode("utf-8")
    return text


def _store_bytes(entry: dict[str, Any], real: Path, client: OceanTrackingClient, store: WritebackStore) -> None:
    """PUT the file, streamed from disk, to the storage URL; an expired URL gets one fresh blob."""
    for attempt in (1, 2):
        headers = {k: _header_value(v) for k, v in (entry["upload_headers"] or {}).items()}
        headers["Content-Length"] = str(entry["byte_size"])
        target = f"storage:{entry['blob_id']}"
        try:
            with real.open("rb") as handle:
                response = client.put_raw(entry["upload_url"], handle, headers)
        except ApiError as exc:
            store.audit("put_bytes", target, FAILED, http_status=exc.status, error=error_summary(exc))
            if exc.status == 403 and "expired" in str(exc).lower() and attempt == 1:
                _request_blob(entry, client, store)
                continue
            raise
        store.audit("put_bytes", target, "stored", http_status=response.status_code)
        _save(store, entry, step=BYTES_STORED, upload_url=None, upload_headers=None)
        return


def _intent_stamp(client: OceanTrackingClient) -> str:
    """When an intent is recorded, in the service's clock (its latest `Date`, less a second). A process that
    has not heard from the service yet asks it once; only without any `Date` is the host's clock used."""
    seen = client.server_time()
    if seen is None:
        with suppress(ApiError, requests.RequestException):
            client.get("/documents", {"page[size]": 1})
        seen = client.server_time()
    if seen is not None:
        return (seen - INTENT_MARGIN).isoformat()
    return (datetime.now(UTC) - HOST_CLOCK_MARGIN).isoformat()


def _create_document(entry: dict[str, Any], item: UploadItem, client: OceanTrackingClient, store: WritebackStore,
                     hook: StepHook | None) -> None:
    """Record the intent, POST /documents with the signed_id (plus shipment/container relationships when
    given), record the outcome. A refusal (4xx) created nothing; any other failure leaves the intent for
    the next batch to settle."""
    data: dict[str, Any] = {"type": "document",
                            "attributes": {"name": entry["name"], "attached_document": entry["signed_id"]}}
    relationships = {kind: {"data": {"id": entry[f"{kind}_id"], "type": kind}}
                     for kind in ("shipment", "container") if entry.get(f"{kind}_id")}
    if relationships:
        data["relationships"] = relationships
    target = f"blob:{entry['blob_id']}"
    _save(store, entry, step=CREATING, intent_at=_intent_stamp(client))
    if hook:
        hook(CREATING, item)
    try:
        document = client.post("/documents", {"data": data}) or {}
    except ApiError as exc:
        if exc.status is not None and 400 <= exc.status < 500:
            store.audit("create_document", target, FAILED, http_status=exc.status, error=error_summary(exc))
            if any(e.code == "invalid" and "no uploaded bytes" in (e.detail or "") for e in exc.errors):
                _save(store, entry, step=NEW)  # the storage never got the bytes: start over with a new blob
            else:
                _save(store, entry, step=BYTES_STORED)
        else:  # connection lost after sending, 5xx, an unreadable answer: it may exist; settled later
            store.audit("create_document", target, "unknown", http_status=exc.status, error=error_summary(exc))
        raise
    document_id = (document.get("data") or {}).get("id")
    if not document_id:
        store.audit("create_document", target, "unknown", http_status=201, error="no document id in the answer")
        raise MalformedResponseError("the created document has no id", method="POST", path="/documents")
    store.audit("create_document", f"document:{document_id}", CREATED, http_status=201)
    _save(store, entry, step=CREATED, document_id=document_id)


def _instant(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text)) if text else None
    except ValueError:
        return None
    return moment.replace(tzinfo=UTC) if moment is not None and moment.tzinfo is None else moment


def _same_upload(doc: Mapping[str, Any], entry: Mapping[str, Any]) -> bool:
    """Same document name, file name, byte size, shipment and container as the journal entry."""
    attrs, rels = doc.get("attributes") or {}, doc.get("relationships") or {}
    if ((attrs.get("name") or "").strip() != entry["name"].strip() or attrs.get("file_name") != _file_name(entry)
            or attrs.get("file_size_bytes") != entry["byte_size"]):
        return False
    for kind in ("shipment", "container"):
        if f"{kind}s" not in rels:
            continue  # not rendered: cannot tell, the other attributes decide
        linked = {d.get("id") for d in ((rels.get(f"{kind}s") or {}).get("data") or [])}
        if linked != ({entry[f"{kind}_id"]} if entry.get(f"{kind}_id") else set()):
            return False
    return True


def find_document(entry: Mapping[str, Any], client: OceanTrackingClient, claimed: set[str]) -> str | None:
    """The document an earlier POST of this entry created, or None when it created none.

    Lists the documents with the entry's file name, newest first (`filter[filename]`, `sort=-created_at`:
    usually one request), and stops at the first one created before the intent. A match has the same name,
    file name, size and links, and is not in `claimed` (attributed to another file)."""
    since = _instant(entry.get("intent_at"))
    params = {"filter[filename]": _file_name(entry), "sort": "-created_at", "page[size]": PAGE_SIZE}
    for page in client.paginate("/documents", params):
        for doc in page.get("data") or []:
            created = _instant((doc.get("attributes") or {}).get("created_at"))
            if since is not None:
                if created is None:
                    continue  # cannot be shown to postdate the intent: never claimed
                if created < since:
                    return None  # newest first: everything from here on is older than the intent
            if doc.get("id") not in claimed and _same_upload(doc, entry):
                return doc["id"]
    return None
