"""Webhooks and webhook notifications: create/list/get/edit/delete subscriptions, the event catalog and
sender IPs, the notification log and example payloads (delivery itself lives in sandbox.webhooks)."""

from __future__ import annotations

import asyncio
import re
from urllib.parse import urlsplit

from starlette.routing import Route

from ..includes import parse_include
from ..jsonapi import (
    ApiError,
    document,
    not_found,
    pagination_links,
    pagination_meta,
    parse_page,
    resolve_includes,
    self_url,
    slice_page,
)
from ..jsonapi import error as jsonapi_error
from ..webhooks import EVENTS, IPS, Notification, Webhook, WebhookHub, event_categories
from .common import read_data
from .context import Ctx, api

HEADER_NAME = re.compile(r"^[!#$%&'*+.^_`|~0-9A-Za-z-]{1,128}$")
LOCAL_HOSTS = frozenset({"127.0.0.1", "localhost", "::1"})
MAX_URL = 2048
MAX_HEADERS = 20


def _invalid(field: str, detail: str, code: str = "invalid") -> dict:
    return jsonapi_error(422, "Unprocessable Entity", detail, pointer=f"/data/attributes/{field}", code=code)


def url_allowed(url: str) -> bool:
    """`https://` to any host; `http://` only to this machine (127.0.0.1, localhost, ::1), for local use."""
    if len(url) > MAX_URL or any(c.isspace() or ord(c) < 32 for c in url):
        return False
    try:
        parts = urlsplit(url)
        host, _port = parts.hostname, parts.port
    except ValueError:
        return False
    if not host:
        return False
    return parts.scheme == "https" or (parts.scheme == "http" and host in LOCAL_HOSTS)


def capitalise(name: str) -> str:
    """Header names are auto-capitalised, as the live service: `x-secret-sauce` → `X-Secret-Sauce`."""
    return "-".join(p[:1].upper() + p[1:].lower() for p in name.split("-"))


def _headers(value: object, errors: list[dict]) -> list[dict] | None:
    if value is None:
        return None
    if not isinstance(value, list) or len(value) > MAX_HEADERS:
        errors.append(_invalid("headers", f"Headers must be an array of at most {MAX_HEADERS} "
                                          "{name, value} objects"))
        return None
    out = []
    for k, item in enumerate(value):
        name = item.get("name") if isinstance(item, dict) else None
        val = item.get("value") if isinstance(item, dict) else None
        if not isinstance(name, str) or not HEADER_NAME.match(name):
            errors.append(_invalid(f"headers/{k}/name", "Header name must be a valid HTTP header name"))
        elif not isinstance(val, str) or len(val) > 4096 or any(c in val for c in "\r\n\0"):
            errors.append(_invalid(f"headers/{k}/value", "Header value must be a string without line breaks"))
        else:
            out.append({"name": capitalise(name), "value": val})
    return out


def webhook_attributes(attrs: dict, *, create: bool) -> dict:
    """The validated webhook attributes of a create (url and active required) or edit body; every
    problem is reported at once in one 422 document."""
    errors: list[dict] = []
    out: dict = {}
    if create or "url" in attrs:
        url = attrs.get("url")
        if url is None or (isinstance(url, str) and not url.strip()):
            errors.append(_invalid("url", "Url can't be blank", "blank"))
        elif not isinstance(url, str) or not url_allowed(url.strip()):
            errors.append(_invalid("url", "Url must be an https URL (http only to 127.0.0.1, localhost or ::1)"))
        else:
            out["url"] = url.strip()
    if create or "active" in attrs:
        active = attrs.get("active")
        if active is None:
            errors.append(_invalid("active", "Active can't be blank", "blank"))
        elif not isinstance(active, bool):
            errors.append(_invalid("active", "Active must be true or false"))
        else:
            out["active"] = active
    if "events" in attrs:
        events = attrs["events"]
        if not isinstance(events, list) or not events or not all(isinstance(e, str) for e in events):
            errors.append(_invalid("events", "Events must be a non-empty array of event names"))
        elif unknown := [e for e in events if e not in EVENTS]:
            errors.append(_invalid("events", f"Events has unknown event names: {', '.join(unknown[:5])}"))
        elif len(set(events)) != len(events):
            errors.append(_invalid("events", "Events must be unique"))
        else:
            out["events"] = list(events)
    if "headers" in attrs:
        out["headers"] = _headers(attrs["headers"], errors)
    if errors:
        raise ApiError(422, errors)
    return out


def _hub(ctx: Ctx) -> WebhookHub:
    return ctx.state.webhooks


def _webhook(ctx: Ctx) -> Webhook:
    wid = ctx.request.path_params["id"]
    hook = _hub(ctx).webhook(ctx.principal.account, wid)
    if hook is None:
        raise not_found("Webhook", wid)
    return hook


@api()
async def list_webhooks(ctx: Ctx) -> dict:
    """GET /webhooks: newest first; as live, no meta and only links.self/current when there are none."""
    hooks = _hub(ctx).webhooks(ctx.principal.account)
    page = parse_page(ctx.params, 25)
    rows = [h.resource() for h in slice_page(hooks, page)]
    return document(rows, links=pagination_links(ctx.base(), ctx.raw_query, page, len(hooks), full=bool(hooks)))


@api(status=201)
async def create_webhook(ctx: Ctx) -> dict:
    """POST /webhooks: 201 with the webhook and its random `secret`; starts notifications for it."""
    data = await read_data(ctx, "webhook")
    attrs = webhook_attributes(data["attributes"], create=True)
    root = str(ctx.request.base_url).rstrip("/")
    hook = _hub(ctx).create(ctx.principal.account, attrs, ctx.now, root, asyncio.get_running_loop())
    return document(hook.resource(), links={"self": ctx.base(f"/v2/webhooks/{hook.id}")})


@api()
async def get_webhook(ctx: Ctx) -> dict:
    """GET /webhooks/{id}."""
    return document(_webhook(ctx).resource(), links={"self": self_url(ctx.base(), ctx.raw_query)})


@api()
async def patch_webhook(ctx: Ctx) -> dict:
    """PATCH /webhooks/{id}: url, active, events, headers (each validated as on create)."""
    hook = _webhook(ctx)
    data = await read_data(ctx, "webhook")
    hook = _hub(ctx).update(hook, webhook_attributes(data["attributes"], create=False))
    return document(hook.resource(), links={"self": ctx.base()})


@api()
async def delete_webhook(ctx: Ctx) -> dict:
    """DELETE /webhooks/{id}: 200; no more notifications or retries for it."""
    _hub(ctx).delete(_webhook(ctx))
    return {"meta": {}}


@api()
async def webhook_events(ctx: Ctx) -> dict:
    """GET /webhooks/events: the event catalog as `webhook_event_category` resources."""
    return document(event_categories(), links={"self": self_url(ctx.base(), ctx.raw_query)})


@api()
async def webhook_ips(ctx: Ctx) -> dict:
    """GET /webhooks/ips: the live service's published sender addresses."""
    return dict(IPS)


def _included(ctx: Ctx, notes: list[Notification], rows: list[dict]) -> list[dict] | None:
    """`include=` (webhook, reference_object, nested) resolved from the notifications' stored resources,
    the account's webhooks, then the REST resources at the request's time."""
    paths = parse_include(ctx.params.get("include"), rows)
    if not paths:
        return None
    stored: dict[tuple[str, str], dict] = {}
    for n in notes:
        for r in [*([n.reference] if n.reference else []), *n.included]:
            stored.setdefault((r["type"], r["id"]), r)
    hub, account = _hub(ctx), ctx.principal.account

    def get(type_: str, id_: str) -> dict | None:
        if type_ == "webhook":
            hook = hub.webhook(account, id_)
            return hook.resource() if hook else None
        return stored.get((type_, id_)) or ctx.get(type_, id_)

    return resolve_includes(rows, paths, get)


@api()
async def list_notifications(ctx: Ctx) -> dict:
    """GET /webhook_notifications: newest first, paged, meta with the pagination block as live."""
    notes = _hub(ctx).notifications(ctx.principal.account)
    page = parse_page(ctx.params, 25)
    shown = slice_page(notes, page)
    rows = [n.resource() for n in shown]
    included = _included(ctx, shown, rows)
    return document(rows, links=pagination_links(ctx.base(), ctx.raw_query, page, len(notes)),
                    meta=pagination_meta("pagination", page, len(notes)), included=included)


@api()
async def get_notification(ctx: Ctx) -> dict:
    """GET /webhook_notifications/{id}."""
    nid = ctx.request.path_params["id"]
    note = _hub(ctx).notification(ctx.principal.account, nid)
    if note is None:
        raise not_found("WebhookNotification", nid)
    row = note.resource()
    return document(row, links={"self": self_url(ctx.base(), ctx.raw_query)}, included=_included(ctx, [note], [row]))


@api()
async def notification_examples(ctx: Ctx) -> dict:
    """GET /webhook_notifications/examples?event=: an example built from the account's own world; an
    unknown or missing event is the live 400 with source.parameter `event`."""
    event = ctx.params.get("event")
    if event not in EVENTS:
        raise ApiError(400, [jsonapi_error(400, "Bad Request", None, parameter="event")])
    row, included = _hub(ctx).example(ctx.account, event, ctx.now)
    return document([row], links={"self": self_url(ctx.base(), ctx.raw_query)}, included=included)


ROUTES = [
    Route("/v2/webhooks", list_webhooks, methods=["GET"]),
    Route("/v2/webhooks", create_webhook, methods=["POST"]),
    Route("/v2/webhooks/events", webhook_events, methods=["GET"]),
    Route("/v2/webhooks/ips", webhook_ips, methods=["GET"]),
    Route("/v2/webhooks/{id}", get_webhook, methods=["GET"]),
    Route("/v2/webhooks/{id}", patch_webhook, methods=["PATCH"]),
    Route("/v2/webhooks/{id}", delete_webhook, methods=["DELETE"]),
    Route("/v2/webhook_notifications", list_notifications, methods=["GET"]),
    Route("/v2/webhook_notifications/examples", notification_examples, methods=["GET"]),
    Route("/v2/webhook_notifications/{id}", get_notification, methods=["GET"]),
]
