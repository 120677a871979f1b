"""Direct uploads (Active Storage), the storage PUT outside /v2, and documents."""

from __future__ import annotations

import re
import unicodedata

from starlette.requests import Request
from starlette.responses import Response
from starlette.routing import Route

from ..jsonapi import ApiError, document, error
from ..uploads import StorageError, blob_errors
from ..validation import attached_document_error, document_attrs, parse_json, related_id
from .common import list_document, read_data
from .context import Ctx, api


@api()
async def direct_upload(ctx: Ctx) -> dict:
    """POST /v2/rails/active_storage/direct_uploads (and the /rails mirror): register a blob and hand
    back the signed id and a storage URL valid for 5 simulated minutes."""
    body = parse_json(await ctx.request.body())
    spec = body.get("blob") if isinstance(body, dict) else None
    problems = blob_errors(spec)
    if problems:
        raise ApiError(422, [error(422, "Unprocessable Entity", msg, pointer=f"/blob/{f}" if f != "blob" else "/blob",
                                   code="invalid") for f, msg in problems])
    blob = ctx.state.blobs.create(ctx.principal.account, spec, ctx.now)
    body = ctx.state.blobs.response(blob, ctx.base("/storage"), ctx.now)
    body["direct_upload"]["headers"]["Content-Disposition"] = content_disposition(blob.filename)
    return body


# ActiveStorage::Filename#sanitized replaces these with "-"; ActionDispatch::Http::ContentDisposition then
# percent-escapes the ASCII fallback and the RFC 5987 `filename*`, so the header is ASCII whatever the name
_UNSAFE_IN_FILENAME = str.maketrans({c: "-" for c in "\u202e%$|:;/<>?*\"\t\r\n\\"})
_TRADITIONAL_ESCAPED = re.compile(r"[^ A-Za-z0-9!#$+.^_`|~-]")
_RFC_5987_ESCAPED = re.compile(r"[^A-Za-z0-9!#$&+.^_`|~-]")


def _percent_escape(text: str, pattern: re.Pattern) -> str:
    return pattern.sub(lambda m: "".join(f"%{b:02X}" for b in m.group().encode("utf-8", "replace")), text)


def content_disposition(filename: str) -> str:
    """The storage's Content-Disposition for a direct upload, as Rails builds it: `inline`, an ASCII
    fallback (transliterated, unknown letters as `?`) and the exact UTF-8 name, both percent-escaped."""
    sanitized = filename.strip().translate(_UNSAFE_IN_FILENAME)
    ascii_name = "".join(c if c.isascii() else "?" for c in
                         unicodedata.normalize("NFKD", sanitized) if not unicodedata.combining(c))
    return (f'inline; filename="{_percent_escape(ascii_name, _TRADITIONAL_ESCAPED)}"; '
            f"filename*=UTF-8''{_percent_escape(sanitized, _RFC_5987_ESCAPED)}")


def _s3_error(exc: StorageError) -> Response:
    body = (f'<?xml version="1.0" encoding="UTF-8"?>\n<Error><Code>{exc.code}</Code>'
            f"<Message>{exc.message}</Message></Error>")
    return Response(body, status_code=exc.status, media_type="application/xml")


async def storage_put(request: Request) -> Response:
    """PUT /storage/{token}: S3-like; stores the bytes only when headers, length and MD5 all match."""
    state = request.app.state.sandbox
    body = await request.body()
    headers = {k.lower(): v for k, v in request.headers.items()}
    try:
        state.blobs.put(request.path_params["token"], headers, body, state.clock.now())
    except StorageError as exc:
        return _s3_error(exc)
    return Response(status_code=200)


@api(status=201)
async def create_document(ctx: Ctx) -> dict:
    """POST /v2/documents: `attached_document` must be the signed id of a blob whose bytes arrived."""
    data = await read_data(ctx, "document")
    name, signed = document_attrs(data)
    blob, reason = ctx.state.blobs.resolve(signed, ctx.principal.account)
    if blob is None:
        raise attached_document_error(f"Attached document {reason}")
    shipment = related_id(data, "shipment", "shipment")
    container = related_id(data, "container", "container")
    created = ctx.account.create_document(name, ctx.state.blobs.summary(blob), ctx.now,
                                          shipment_id=shipment, container_id=container)
    return document(created)


SORTABLE = {"created_at", "document_type", "added_by"}


def _sorted(docs: list[dict], sort: str) -> list[dict]:
    """`docs` (oldest first) in the order of a `sort` parameter: comma-separated sortable fields, each
    descending with a `-` prefix; ties keep the order of creation."""
    keys = [k.strip() for k in sort.split(",") if k.strip()]
    unknown = [k for k in keys if k.lstrip("-") not in SORTABLE]
    if unknown or not keys:
        raise ApiError(400, [error(400, "Bad Request", f"sort must name {', '.join(sorted(SORTABLE))} "
                                   "(prefix - for descending)", parameter="sort")])
    for key in reversed(keys):  # stable sorts, least significant key first
        name = key.lstrip("-")
        docs = sorted(docs, key=lambda d, n=name: (d["attributes"].get(n) is None, d["attributes"].get(n) or ""),
                      reverse=key.startswith("-"))
    return docs


@api()
async def list_documents(ctx: Ctx) -> dict:
    """GET /v2/documents: newest first unless `sort` says otherwise (created_at, document_type, added_by;
    `-` for descending); `filter[filename]` keeps the documents whose `file_name` is exactly that (the live
    service's is a full-text match, so clients compare names themselves); paginated, meta with pagination."""
    docs = list(reversed(ctx.account.documents()))  # oldest first: the order ties keep when sorting
    filename = ctx.params.get("filter[filename]")
    if filename is not None:
        docs = [d for d in docs if d["attributes"].get("file_name") == filename]
    sort = ctx.params.get("sort")
    docs = _sorted(docs, sort) if sort is not None else docs[::-1]
    return list_document(ctx, docs, default_size=25, meta="pagination")


ROUTES = [
    Route("/v2/rails/active_storage/direct_uploads", direct_upload, methods=["POST"]),
    Route("/rails/active_storage/direct_uploads", direct_upload, methods=["POST"]),
    Route("/storage/{token}", storage_put, methods=["PUT"]),
    Route("/v2/documents", list_documents, methods=["GET"]),
    Route("/v2/documents", create_document, methods=["POST"]),
]
