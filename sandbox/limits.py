"""The door every request body passes before any handler sees it: a size limit (413), JSON content types
only (415) and, for JSON bodies, strict decoding (400: invalid JSON, NaN, nesting deeper than
MAX_JSON_DEPTH, lone UTF-16 surrogates) plus the JSON:API document shape under /v2. Each refusal is a
JSON:API error document, so hostile input never reaches the world, is never stored and never becomes a 500.

Starlette's own `max_body_size` (RequestBodyLimitMiddleware) is not used: it raises inside the handler's
`request.body()`, where the `api` decorator turns any exception into a 500, and its 413 is plain text."""

from __future__ import annotations

from typing import Any

from starlette.concurrency import run_in_threadpool
from starlette.datastructures import Headers

from .jsonapi import ApiError, api_error, error_response
from .uploads import MAX_BYTES as UPLOAD_MAX_BYTES
from .validation import LARGE_BODY, jsonapi_shape, parse_json, remember_checked

JSON_BODY_LIMIT = 1024 * 1024  # API and control bodies: the largest legitimate one is a few KiB
UPLOAD_BODY_LIMIT = UPLOAD_MAX_BYTES  # the storage PUT takes a blob of up to the direct upload's byte_size cap
JSON_MEDIA_TYPES = ("application/json", "application/vnd.api+json")


def _is_upload(path: str) -> bool:
    return path.startswith("/storage/")


class RequestGuard:
    """ASGI middleware: reads each request body incrementally up to its limit (never buffering more), checks
    it, then hands the app the same bytes. A client that goes away mid-body still reaches the app, which
    sees the disconnect (and counts the request as abandoned) as before."""

    def __init__(self, app: Any, json_limit: int = JSON_BODY_LIMIT, upload_limit: int = UPLOAD_BODY_LIMIT) -> None:
        self.app, self.json_limit, self.upload_limit = app, json_limit, upload_limit

    async def __call__(self, scope: dict, receive: Any, send: Any) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = Headers(scope=scope)
        length = headers.get("content-length")
        chunked = "chunked" in headers.get("transfer-encoding", "").lower()
        if (length is None or length.strip() == "0") and not chunked:
            await self.app(scope, receive, send)
            return
        upload = _is_upload(scope["path"])
        limit = self.upload_limit if upload else self.json_limit
        refusal = self._refuse_headers(length, headers.get("content-type"), limit, upload)
        if refusal is not None:
            await error_response(refusal)(scope, receive, send)
            return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                await self.app(scope, _replay(b"".join(chunks), receive, disconnected=True), send)
                return
            chunk = message.get("body", b"")
            total += len(chunk)
            if total > limit:
                await error_response(_too_large(limit))(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if not upload:
            refusal = await self._check_json(body, scope["path"])
            if refusal is not None:
                await error_response(refusal)(scope, receive, send)
                return
        await self.app(scope, _replay(body, receive, disconnected=False), send)

    @staticmethod
    def _refuse_headers(length: str | None, content_type: str | None, limit: int, upload: bool) -> ApiError | None:
        """413/400 from Content-Length and 415 from Content-Type, before a byte of the body is read."""
        if length is not None:
            if not length.strip().isdigit():
                return api_error(400, "Bad Request", "Content-Length must be a non-negative integer.")
            if int(length) > limit:
                return _too_large(limit)
        if upload or content_type is None:  # no type: taken as JSON, as the service's Rails stack does
            return None
        media = content_type.split(";", 1)[0].strip().lower()
        if media not in JSON_MEDIA_TYPES:
            return api_error(415, "Unsupported Media Type", f"Content-Type {media!r} is not supported; send "
                             "application/vnd.api+json or application/json.")
        return None

    @staticmethod
    async def _check_json(body: bytes, path: str) -> ApiError | None:
        """Decode and check a JSON body (off the event loop when large); the error to answer, or None."""

        def check() -> None:
            payload = parse_json(body)
            if path.startswith("/v2/"):
                jsonapi_shape(payload)
            if len(body) >= LARGE_BODY:
                remember_checked(body, payload)

        try:
            # A large body is decoded on a worker thread, so one client's megabyte of JSON never stalls the
            # event loop that answers everybody else; the handler then reuses the result.
            if len(body) >= LARGE_BODY:
                await run_in_threadpool(check)
            else:
                check()
        except ApiError as exc:
            return exc
        return None


def _too_large(limit: int) -> ApiError:
    return api_error(413, "Content Too Large", f"The request body exceeds {limit} bytes.")


def _replay(body: bytes, receive: Any, *, disconnected: bool) -> Any:
    """A `receive` that hands over the already read body once, then the client's own messages (or the
    disconnect that cut the body short)."""
    sent = False

    async def replay() -> dict:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": disconnected}
        if disconnected:
            return {"type": "http.disconnect"}
        return await receive()

    return replay
