"""The webhook receiver: a Starlette app that verifies each delivery and journals it before answering.

    POST <path>    a delivery: 413 over 1 MiB, 401 without a valid signature (checked over the raw bytes,
                   before parsing), 400 when signed but not a notification, else journaled (committed) and
                   200; a delivery already journaled (a retry) is answered 200 and left alone
    GET /healthz   200 with the journal's counts per status

Only 200/201/202/204 count as delivered to the service; anything else makes it retry (up to 12 times), so
the receiver answers 2xx only once the notification is durably committed (its SQLite file or its PostgreSQL
database), and 503 when the journal could not be written. Journal calls run in a thread pool so the event loop keeps answering. A heartbeat in the journal
every 10 s lets a monitor tell that the receiver is down. Logs: one line per refused delivery (the reason,
never the body or a header's value); no access log.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import threading
import time
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from pathlib import Path

import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

from pipelines.errors import InputError, PipelineError
from pipelines.journals import NotificationJournal
from pipelines.settings import (
    WEBHOOK_HEARTBEAT_SECONDS,
    WEBHOOK_MAX_BODY_BYTES,
    WEBHOOK_PATH,
    WEBHOOK_SIGNATURE_HEADER,
    Account,
)
from pipelines.webhooks.signing import WebhookSecret, valid_signature

logger = logging.getLogger(__name__)

SecretProvider = Callable[[], WebhookSecret | str]


class _TooLarge(Exception):
    """The body grew past the limit while it was read."""


async def _read_body(request: Request, limit: int) -> bytes:
    """The raw body, refused (`_TooLarge`) as soon as it is known to exceed `limit` bytes: from its
    Content-Length when it declares one, else while it streams in."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isdigit() and int(declared) > limit:
        raise _TooLarge
    body = bytearray()
    async for chunk in request.stream():
        body += chunk
        if len(body) > limit:
            raise _TooLarge
    return bytes(body)


def _refuse(status: int, reason: str, request: Request) -> JSONResponse:
    """Log one line about a refused delivery (reason and peer only) and answer with a one-line JSON error."""
    peer = request.client.host if request.client else "?"
    logger.warning("webhook delivery refused with %d from %s: %s", status, peer, reason)
    return JSONResponse({"error": reason}, status_code=status)


def create_receiver_app(
    journal_path: str | Path,
    secret_provider: SecretProvider,
    *,
    path: str = WEBHOOK_PATH,
    url: str | None = None,
    heartbeat_seconds: float = WEBHOOK_HEARTBEAT_SECONDS,
    max_body_bytes: int = WEBHOOK_MAX_BODY_BYTES,
    account: Account | None = None,
) -> Starlette:
    """The receiver app, with its journal open: `journal_path` is its SQLite file or PostgreSQL URL
    (ConfigurationError now if it is unusable); in a PostgreSQL database, `account`'s own schema.

    `secret_provider` is asked for the secret at each delivery (so a rotated secret can take effect without
    a restart if the provider re-reads it); `url` is what the heartbeat reports (default: `path`). The app
    closes the journal when it shuts down."""
    journal = NotificationJournal(journal_path, account=account)
    heartbeat_url = url or path

    async def receive(request: Request) -> JSONResponse:
        try:
            body = await _read_body(request, max_body_bytes)
        except _TooLarge:
            return _refuse(413, f"the body is over {max_body_bytes} bytes", request)
        received = request.headers.get(WEBHOOK_SIGNATURE_HEADER)
        if not received:
            return _refuse(401, f"no {WEBHOOK_SIGNATURE_HEADER} header", request)
        try:
            secret = secret_provider()
        except PipelineError as error:
            logger.error("webhook secret unavailable: %s", type(error).__name__)
            return JSONResponse({"error": "the receiver has no webhook secret"}, status_code=503)
        if not valid_signature(body, received, secret):
            return _refuse(401, f"{WEBHOOK_SIGNATURE_HEADER} does not match the body", request)
        try:
            new = await run_in_threadpool(journal.record, body)
        except InputError as error:
            return _refuse(400, str(error), request)
        except journal.errors as error:
            logger.error("webhook journal write failed (%s); the service will retry", type(error).__name__)
            return JSONResponse({"error": "the journal could not be written; retry later"}, status_code=503)
        return JSONResponse({"status": "accepted" if new else "duplicate"}, status_code=200)

    async def healthz(request: Request) -> JSONResponse:
        counts = await run_in_threadpool(journal.counts)
        return JSONResponse({"status": "ok", "counts": counts})

    async def heartbeat() -> None:
        pid = os.getpid()
        while True:
            try:
                await run_in_threadpool(journal.beat, heartbeat_url, pid)
            except journal.errors as error:
                logger.warning("webhook heartbeat not written (%s)", type(error).__name__)
            await asyncio.sleep(heartbeat_seconds)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        beating = asyncio.create_task(heartbeat(), name="webhook-heartbeat")
        try:
            yield
        finally:
            beating.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await beating
            journal.close()

    app = Starlette(
        routes=[Route(path, receive, methods=["POST"]), Route("/healthz", healthz, methods=["GET"])],
        lifespan=lifespan,
    )
    app.state.journal = journal
    return app


def serve(
    journal_path: str | Path,
    secret: WebhookSecret,
    *,
    host: str,
    port: int,
    path: str = WEBHOOK_PATH,
    account: Account | None = None,
) -> None:
    """Run `account`'s receiver with uvicorn until stopped (SIGINT/SIGTERM): no access log, so no request line
    or header is ever logged by the server."""
    app = create_receiver_app(journal_path, lambda: secret, path=path, url=f"http://{host}:{port}{path}",
                              account=account)
    uvicorn.run(app, host=host, port=port, access_log=False, log_level="info", server_header=False,
                proxy_headers=False)


class ReceiverThread:
    """The receiver served by uvicorn on a background thread of this process, on a free loopback port (or
    the one given): for embedding it beside other work, such as the benchmark and the tests. A context
    manager; `url` is the delivery URL once started. `secret` may be a provider, asked at each delivery (a
    webhook registered after the receiver started, to know its URL, has its secret only then); `account`
    names whose journal it is (its own schema in a PostgreSQL journal)."""

    def __init__(self, journal_path: str | Path, secret: WebhookSecret | str | SecretProvider, *, host: str = "127.0.0.1",
                 port: int = 0, path: str = WEBHOOK_PATH, heartbeat_seconds: float = WEBHOOK_HEARTBEAT_SECONDS,
                 account: Account | None = None):
        self._sock = socket.socket()
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((host, port))
        self.root_url = f"http://{host}:{self._sock.getsockname()[1]}"
        self.url = self.root_url + path
        provider = secret if callable(secret) else lambda: secret
        app = create_receiver_app(journal_path, provider, path=path, url=self.url,
                                  heartbeat_seconds=heartbeat_seconds, account=account)
        self._server = uvicorn.Server(uvicorn.Config(app, log_config=None, access_log=False, lifespan="on",
                                                     server_header=False))
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="webhook-receiver", daemon=True)

    def __enter__(self) -> ReceiverThread:
        self._thread.start()
        deadline = time.monotonic() + 10
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("the webhook receiver did not start")
            time.sleep(0.01)
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.should_exit = True
        self._thread.join(10)
        self._sock.close()
