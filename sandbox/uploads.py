"""Active Storage direct uploads: blobs, HMAC-signed ids (tamper-proof), expiring storage URLs and
the S3-like storage PUT that checks headers, length and MD5 before keeping any byte."""

from __future__ import annotations

import base64
import binascii
import hashlib
import hmac
import json
import secrets
import threading
import uuid
from dataclasses import dataclass, field
from datetime import datetime, timedelta

UPLOAD_TTL = timedelta(minutes=5)
MAX_BYTES = 100 * 1024 * 1024
SERVICE_NAME = "amazon"


class StorageError(Exception):
    """A rejected storage PUT: HTTP status and S3-style error code."""

    def __init__(self, status: int, code: str, message: str):
        super().__init__(message)
        self.status, self.code, self.message = status, code, message


@dataclass
class Blob:
    """One blob record; `data` stays None until a valid PUT arrives."""

    id: str
    key: str
    filename: str
    content_type: str
    byte_size: int
    checksum: str
    created_at: datetime
    account: str
    data: bytes | None = None
    metadata: dict = field(default_factory=dict)


def b64_md5(data: bytes) -> str:
    """Base64 of the raw 16-byte MD5 digest (Active Storage's `checksum`, S3's Content-MD5)."""
    return base64.b64encode(hashlib.md5(data).digest()).decode()


def blob_errors(blob: object) -> list[tuple[str, str]]:
    """(field, message) problems of a direct-upload request `blob` object; empty when valid."""
    if not isinstance(blob, dict):
        return [("blob", "blob must be an object")]
    errs = []
    for f in ("filename", "content_type", "checksum"):
        if not isinstance(blob.get(f), str) or not blob[f].strip():
            errs.append((f, f"{f} can't be blank"))
    size = blob.get("byte_size")
    if not isinstance(size, int) or isinstance(size, bool) or size < 0:
        errs.append(("byte_size", "byte_size must be a non-negative integer"))
    elif size > MAX_BYTES:
        errs.append(("byte_size", f"byte_size must be at most {MAX_BYTES}"))
    cs = blob.get("checksum")
    if isinstance(cs, str) and cs.strip():
        try:
            if len(base64.b64decode(cs, validate=True)) != 16:
                raise ValueError
        except (ValueError, binascii.Error):
            errs.append(("checksum", "checksum must be the Base64 of a 16-byte MD5 digest"))
    return errs


class BlobStore:
    """In-memory blobs for all accounts; signed ids and storage tokens are HMAC-SHA256 signed."""

    def __init__(self, secret: str) -> None:
        self._secret = secret.encode()
        self._blobs: dict[str, Blob] = {}
        self._lock = threading.Lock()

    def _sign(self, payload: dict) -> str:
        body = base64.urlsafe_b64encode(json.dumps(payload, separators=(",", ":")).encode()).decode().rstrip("=")
        mac = hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()
        return f"{body}--{mac}"

    def _verify(self, token: str, purpose: str) -> dict | None:
        body, sep, mac = token.rpartition("--")
        if not sep or not hmac.compare_digest(mac, hmac.new(self._secret, body.encode(), hashlib.sha256).hexdigest()):
            return None
        try:
            payload = json.loads(base64.urlsafe_b64decode(body + "=" * (-len(body) % 4)))
        except (ValueError, binascii.Error):
            return None
        return payload if isinstance(payload, dict) and payload.get("pur") == purpose else None

    def create(self, account: str, spec: dict, now: datetime) -> Blob:
        """Register a blob from a validated request (see blob_errors)."""
        blob = Blob(id=str(uuid.uuid4()), key=secrets.token_hex(14), filename=spec["filename"],
                    content_type=spec["content_type"], byte_size=spec["byte_size"], checksum=spec["checksum"],
                    created_at=now, account=account, metadata=spec.get("metadata") or {})
        with self._lock:
            self._blobs[blob.id] = blob
        return blob

    def signed_id(self, blob: Blob) -> str:
        """The tamper-proof `signed_id` for a blob (never expires, as Active Storage's default)."""
        return self._sign({"bid": blob.id, "pur": "blob_id"})

    def upload_token(self, blob: Blob, now: datetime) -> str:
        """A storage token valid for UPLOAD_TTL of simulated time."""
        return self._sign({"bid": blob.id, "pur": "upload", "exp": (now + UPLOAD_TTL).isoformat()})

    def response(self, blob: Blob, storage_base: str, now: datetime) -> dict:
        """The direct-upload response body (Rails' direct_upload_json)."""
        disposition = f'inline; filename="{blob.filename}"; filename*=UTF-8\'\'{blob.filename}'
        return {
            "id": blob.id, "key": blob.key, "filename": blob.filename, "content_type": blob.content_type,
            "metadata": blob.metadata, "service_name": SERVICE_NAME, "byte_size": blob.byte_size,
            "checksum": blob.checksum, "created_at": blob.created_at.isoformat().replace("+00:00", "Z"),
            "signed_id": self.signed_id(blob),
            "direct_upload": {"url": f"{storage_base}/{self.upload_token(blob, now)}", "headers": {
                "Content-Type": blob.content_type, "Content-MD5": blob.checksum,
                "Content-Disposition": disposition}},
        }

    def put(self, token: str, headers: dict[str, str], body: bytes, now: datetime) -> Blob:
        """Store bytes for the blob named by `token` if every check passes; else raise StorageError
        and keep nothing (S3 semantics: BadDigest, IncompleteBody, expired or forged URL)."""
        payload = self._verify(token, "upload")
        blob = self._blobs.get(payload["bid"]) if payload else None
        if blob is None:
            raise StorageError(403, "AccessDenied", "Invalid or forged upload URL")
        if now > datetime.fromisoformat(payload["exp"]):
            raise StorageError(403, "AccessDenied", "Request has expired")
        if headers.get("content-type") != blob.content_type:
            raise StorageError(400, "InvalidArgument", "Content-Type does not match the blob")
        length = headers.get("content-length")
        if length is None or not length.isdigit() or int(length) != blob.byte_size:
            raise StorageError(400, "IncompleteBody", "Content-Length must equal the blob's byte_size")
        if len(body) != blob.byte_size:
            raise StorageError(400, "IncompleteBody", "The body does not have the declared size")
        if headers.get("content-md5") != blob.checksum:
            raise StorageError(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
        if b64_md5(body) != blob.checksum:
            raise StorageError(400, "BadDigest", "The Content-MD5 you specified did not match what we received.")
        blob.data = body
        return blob

    def resolve(self, signed_id: str, account: str) -> tuple[Blob | None, str]:
        """(blob, "") for an uploaded blob of `account`, else (None, reason) for a 422."""
        if signed_id.startswith(("http://", "https://", "/")):
            return None, "must be a blob signed_id, not a storage URL"
        payload = self._verify(signed_id, "blob_id")
        blob = self._blobs.get(payload["bid"]) if payload else None
        if blob is None or blob.account != account:
            return None, "is not a valid signed blob id"
        if blob.data is None:
            return None, "blob has no uploaded bytes yet"
        return blob, ""

    def summary(self, blob: Blob) -> dict:
        """The blob fields handed to `Account.create_document`."""
        return {"id": blob.id, "key": blob.key, "filename": blob.filename, "content_type": blob.content_type,
                "byte_size": blob.byte_size, "checksum": blob.checksum}
