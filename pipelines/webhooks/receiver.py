"""The webhook receiver (a Starlette app that verifies each delivery and journals it before answering), and its
registration with the service.

    POST <path>    a delivery: 413 over 1 MiB, 401 without a valid signature (checked over the raw bytes,
                   before parsing), 400 when signed but not a notification, else journaled (committed) and
                   200; a delivery already journaled (a retry) is answered 200 and left alone
    GET /healthz   200 with the journal's counts per status

Only 200/201/202/204 count as delivered to the service; anything else makes it retry (up to 12 times), so
the receiver answers 2xx only once the notification is durably committed (its SQLite file or its PostgreSQL
database), and 503 when the journal could not be written. Journal calls run in a thread pool so the event loop keeps answering. A heartbeat in the journal
every 10 s lets a monitor tell that the receiver is down. Logs: one line per refused delivery (the reason,
never the body or a header's value); no access log.

Registering the receiver with the service and keeping its secret: `register_webhook` makes the account's
webhook for a URL exist, active, with the given events: it lists `/webhooks`; one with that URL is PATCHed (its
secret kept), else one is POSTed (the service returns a new secret). `store_secret` writes the secret into
`.dlt/secrets.toml` under `[sources.ocean_tracking] webhook_secret` (a named account's under
`[sources.ocean_tracking.accounts.<name>]`), where the receiver resolves it, keeping the file's other keys and
comments; the file is rewritten atomically and readable by its owner only. Neither ever prints or raises the
secret. """

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import socket
import tempfile
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterable
from contextlib import asynccontextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import tomlkit
import uvicorn
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route
from tomlkit.exceptions import TOMLKitError

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import (
    ApiError,
    ConfigurationError,
    InputError,
    MalformedResponseError,
    NotFoundError,
    PipelineError,
)
from pipelines.journals import NotificationJournal
from pipelines.settings import (
    WEBHOOK_HEARTBEAT_SECONDS,
    WEBHOOK_MAX_BODY_BYTES,
    WEBHOOK_PATH,
    WEBHOOK_SECRET_KEY,
    WEBHOOK_SIGNATURE_HEADER,
    Account,
)
from pipelines.webhooks import WebhookSecret, valid_signature, validate_webhook_secret

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


# The vendor's event catalog (API-NOTES §8): used when the account's own list (GET /webhooks/events) is
# not available.
CATALOG_EVENTS = (
    "tracking_request.succeeded", "tracking_request.failed", "tracking_request.awaiting_manifest",
    "tracking_request.tracking_stopped",
    "container.transport.empty_out", "container.transport.full_in", "container.transport.vessel_loaded",
    "container.transport.vessel_departed",
    "container.transport.transshipment_arrived", "container.transport.transshipment_discharged",
    "container.transport.transshipment_loaded", "container.transport.transshipment_departed",
    "container.transport.feeder_arrived", "container.transport.feeder_discharged",
    "container.transport.feeder_loaded", "container.transport.feeder_departed",
    "container.transport.vessel_arrived", "container.transport.vessel_berthed",
    "container.transport.vessel_discharged", "container.transport.available", "container.transport.not_available",
    "container.transport.full_out", "container.transport.delivered", "container.transport.empty_in",
    "container.transport.rail_loaded", "container.transport.rail_departed", "container.transport.rail_arrived",
    "container.transport.rail_unloaded", "container.transport.arrived_at_inland_destination",
    "container.transport.estimated.vessel_departed", "container.transport.estimated.vessel_arrived",
    "container.transport.estimated.arrived_at_inland_destination", "shipment.estimated.arrival",
    "container.created", "container.updated", "container.pod_terminal_changed", "container.pickup_lfd.changed",
    "container.pickup_lfd_line.changed", "container.pickup_lfd_terminal.changed",
    "container.pickup_lfd_rail.changed", "container.pickup_appointment.changed",
    "document.extracted", "document.extraction_failed",
)


@dataclass(frozen=True)
class Registration:
    """What `register_webhook` did: the webhook's id and URL, its events, whether it was created (else
    updated), and its secret (masked in every repr)."""

    webhook_id: str
    url: str
    events: tuple[str, ...]
    created: bool
    secret: WebhookSecret = field(repr=False)


def check_webhook_url(url: str) -> str:
    """An absolute http(s) URL with a host (the service delivers only to HTTPS; a sandbox may use http)."""
    parsed = urlparse(url)
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigurationError("--url must be an absolute https URL such as https://example.com/webhooks/terminal49.")
    return url


def available_events(client: OceanTrackingClient) -> tuple[str, ...]:
    """Every event the account can subscribe to (GET /webhooks/events), else the vendor's catalog."""
    try:
        document = client.get("/webhooks/events")
    except (NotFoundError, MalformedResponseError):
        return CATALOG_EVENTS
    names: list[str] = []
    for category in document.get("data") or []:
        attributes = category.get("attributes") if isinstance(category, dict) else None
        for event in (attributes or {}).get("events") or []:
            name = event.get("name") if isinstance(event, dict) else event
            if isinstance(name, str) and name and name not in names:
                names.append(name)
    return tuple(names) or CATALOG_EVENTS


def _secret_of(resource: Any) -> str | None:
    attributes = resource.get("attributes") if isinstance(resource, dict) else None
    secret = (attributes or {}).get("secret")
    return secret if isinstance(secret, str) and secret else None


def _find(client: OceanTrackingClient, url: str) -> dict[str, Any] | None:
    for page in client.paginate("/webhooks"):
        for resource in page.get("data") or []:
            if isinstance(resource, dict) and (resource.get("attributes") or {}).get("url") == url:
                return resource
    return None


def register_webhook(client: OceanTrackingClient, url: str, events: Iterable[str] | None = None) -> Registration:
    """Make the account's webhook for `url` exist, active, subscribed to `events` (default: every event the
    account can have); an existing one keeps its secret. The POST is not retried on a lost answer: running
    this again finds the webhook it may have created by its URL and updates it instead."""
    url = check_webhook_url(url)
    chosen = tuple(dict.fromkeys(e.strip() for e in events if e.strip())) if events else available_events(client)
    if not chosen:
        raise ConfigurationError("--events named no event; give at least one (comma-separated).")
    existing = _find(client, url)
    if existing is not None:
        webhook_id = str(existing["id"])
        body = {"data": {"id": webhook_id, "type": "webhook",
                         "attributes": {"events": list(chosen), "active": True}}}
        answer = client.patch(f"/webhooks/{webhook_id}", body) or {}
        secret = _secret_of(answer.get("data")) or _secret_of(existing)
        if secret is None:
            secret = _secret_of(client.get(f"/webhooks/{webhook_id}").get("data"))
        created = False
    else:
        body = {"data": {"type": "webhook", "attributes": {"url": url, "active": True, "events": list(chosen)}}}
        answer = client.post("/webhooks", body) or {}
        data = answer.get("data") if isinstance(answer.get("data"), dict) else {}
        webhook_id, secret, created = str(data.get("id") or ""), _secret_of(data), True
        if not webhook_id:
            raise ApiError("the service created the webhook but returned no id", method="POST", path="/webhooks")
    if secret is None:
        raise ApiError(f"the service returned no secret for webhook {webhook_id}; delete it and register again",
                       method="GET", path=f"/webhooks/{webhook_id}")
    return Registration(webhook_id, url, chosen, created, validate_webhook_secret(secret))


def store_secret(path: str | Path, secret: WebhookSecret | str, account: Account | None = None) -> Path:
    """Write the secret to `path` (a dlt secrets TOML) in the table `account`'s settings are read from
    (`[sources.ocean_tracking]`, or `[sources.ocean_tracking.accounts.<name>]`) as `webhook_secret`, keeping
    every other key and comment. The file is replaced atomically by one with mode 0600 (created, with its
    folder, when missing). ConfigurationError when the existing file is not TOML."""
    target = Path(path)
    section = (account or Account()).config_section.split(".")
    value = validate_webhook_secret(secret, account).reveal()
    try:
        document = tomlkit.parse(target.read_text(encoding="utf-8")) if target.exists() else tomlkit.document()
    except TOMLKitError as error:
        raise ConfigurationError(
            f"{target} is malformed: {str(error).splitlines()[0]}. Fix the file (it is TOML) or remove it."
        ) from None
    table: Any = document
    created = False
    for depth, name in enumerate(section):
        child = table.get(name)
        created = child is None
        if created:
            # tables on the way are headers only, so the file reads `[sources.ocean_tracking.accounts.emea]`
            child = tomlkit.table(is_super_table=depth < len(section) - 1)
            table[name] = child
        if not isinstance(child, dict):
            raise ConfigurationError(f"{target}: `{'.'.join(section[:depth + 1])}` is not a table; fix the file.")
        table = child
    table[WEBHOOK_SECRET_KEY] = value
    if created:
        table.add(tomlkit.nl())  # a blank line before whatever table follows
    target.parent.mkdir(parents=True, exist_ok=True)
    handle, temporary = tempfile.mkstemp(prefix=".secrets-", suffix=".toml", dir=target.parent)
    try:
        os.fchmod(handle, 0o600)
        with os.fdopen(handle, "w", encoding="utf-8") as out:
            out.write(tomlkit.dumps(document))
            out.flush()
            os.fsync(out.fileno())
        os.replace(temporary, target)
    except BaseException:
        Path(temporary).unlink(missing_ok=True)
        raise
    return target
