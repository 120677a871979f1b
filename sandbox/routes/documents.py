"""Direct uploads (Active Storage), the storage PUT outside /v2, and documents."""

from __future__ import annotations

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
    return ctx.state.blobs.response(blob, ctx.base("/storage"), ctx.now)


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


@api()
async def list_documents(ctx: Ctx) -> dict:
    """GET /v2/documents: paginated, meta with pagination block."""
    return list_document(ctx, ctx.account.documents(), default_size=25, meta="pagination")


ROUTES = [
    Route("/v2/rails/active_storage/direct_uploads", direct_upload, methods=["POST"]),
    Route("/rails/active_storage/direct_uploads", direct_upload, methods=["POST"]),
    Route("/storage/{token}", storage_put, methods=["PUT"]),
    Route("/v2/documents", list_documents, methods=["GET"]),
    Route("/v2/documents", create_document, methods=["POST"]),
]
