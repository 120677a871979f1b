"""Registering the receiver with the service and keeping its secret.

`register_webhook` makes the account's webhook for a URL exist, active, with the given events: it lists
`/webhooks`; one with that URL is PATCHed (its secret kept), else one is POSTed (the service returns a new
secret). `store_secret` writes the secret into `.dlt/secrets.toml` under `[sources.ocean_tracking]
webhook_secret` (a named account's under `[sources.ocean_tracking.accounts.<name>]`), where the receiver
resolves it, keeping the file's other keys and comments; the file is rewritten atomically and readable by its
owner only. Neither ever prints or raises the secret.
"""

from __future__ import annotations

import os
import tempfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import tomlkit
from tomlkit.exceptions import TOMLKitError

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError, ConfigurationError, MalformedResponseError, NotFoundError
from pipelines.settings import WEBHOOK_SECRET_KEY, Account
from pipelines.webhooks.signing import WebhookSecret, validate_webhook_secret

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
