"""The service's webhooks: `receiver` registers the account's webhook with the service (its secret stored) and
receives the deliveries, verified and journaled before they are acknowledged; `pipelines.journals` keeps every signed
notification durably, then has it consumed in order. Here, what a delivery is: its signature and its payload.

The signature (`valid_signature`): the service signs every delivery, `X-T49-Webhook-Signature` being the
lowercase hex HMAC-SHA256 of the raw request body, keyed with the webhook's `secret` (returned once, when the
webhook is created). The secret (`load_webhook_secret`) is resolved like the API key (`pipelines.api.config`):
`SOURCES__OCEAN_TRACKING__WEBHOOK_SECRET`, else `webhook_secret` under `[sources.ocean_tracking]` in
`.dlt/secrets.toml`; a named account's only from its own
`SOURCES__OCEAN_TRACKING__ACCOUNTS__<NAME>__WEBHOOK_SECRET` or `[sources.ocean_tracking.accounts.<name>]` (its
own webhook, its own secret). It is held in `WebhookSecret`, which never shows it in a repr, a log line or an
error.

The payload (`plan_batch`): from webhook notifications to what a targeted refresh loads, one shipment document
per shipment named. A notification (`webhook_notification`) names the object that changed and carries related
resources in `included`: the transport event, its container and shipment, the tracking request, ports,
terminals, vessels. Where those resources are complete (every attribute and relationship the full sync loads
for their table, `is_complete`), the rows come from them: no request at all. Where they are not (the live
service's payloads leave out some container attributes and relationships), the shipment is fetched once per
refresh with the same includes the listing uses. `/shipments` has no id filter, so that GET per shipment is the
cheapest way; the refresh batches every notification of a shipment into one.

Newer wins: of the notifications of one shipment, the newest complete rendering of the shipment and of each
container gives the rows (and, for the events, each event's newest rendering). A payload need not carry every
container of its shipment (a transport event brings its own): the others did not change with it and keep
their rows. Only a change that came without complete renderings (the vendor's "minimal" events, such as
`container.transport.available`, or attributes left out) and that no complete rendering at least as new
covers makes the shipment fetched. A notification older than what was already applied for its shipment
(`Batch.superseded`) is not applied at all, so a late delivery never regresses a row.

Pure functions over JSON-like documents; the refresh (`pipelines.sync`) does the HTTP and the load.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from functools import cache
from typing import Any

from pipelines.api import flatten_resource
from pipelines.api.config import ApiKey, lookup_setting
from pipelines.errors import ConfigurationError
from pipelines.settings import WEBHOOK_SECRET_KEY, Account
from pipelines.source import TABLES, api_columns, table_of_type


class WebhookSecret(ApiKey):
    """The webhook's HMAC key; masks itself like the API key (`reveal()` is for signing only)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"WebhookSecret(sha256:{self.fingerprint})"

    __str__ = __repr__


def validate_webhook_secret(raw: Any, account: Account | None = None) -> WebhookSecret:
    """Check the secret's shape (a non-empty string without surrounding whitespace); never echo it. Messages
    say where `account`'s secret is set."""
    account = account or Account()
    where = f"Set {account.setting_help(WEBHOOK_SECRET_KEY)}"
    if isinstance(raw, ApiKey):
        raw = raw.reveal()
    if raw is None or raw == "":
        owner, option = ("", "") if account.name is None else (f" of {account.label}", f" --account {account.name}")
        raise ConfigurationError(
            f"The webhook secret{owner} is missing or empty. {where} to the secret the service returned when the "
            f"webhook was created (`python -m pipelines webhooks register{option}` stores it)."
        )
    if not isinstance(raw, str):
        raise ConfigurationError(f"The webhook secret must be a string, got {type(raw).__name__}. {where}.")
    if raw != raw.strip():
        raise ConfigurationError(
            f"The webhook secret has leading or trailing whitespace (often a copied newline). {where} to the "
            "secret alone."
        )
    return WebhookSecret(raw)


def load_webhook_secret(secret: str | None = None, account: Account | None = None) -> WebhookSecret:
    """The webhook secret of `account` (default: the single account): `secret` when given, else the dlt way
    (environment, then .dlt/secrets.toml; a named account's own setting only, never the shared one)."""
    raw = secret if secret is not None else lookup_setting(WEBHOOK_SECRET_KEY, secret=True, account=account)
    return validate_webhook_secret(raw, account)


def signature(body: bytes, secret: WebhookSecret | str) -> str:
    """The signature the service sends for `body`: lowercase hex HMAC-SHA256 keyed with the secret."""
    key = secret.reveal() if isinstance(secret, ApiKey) else secret
    return hmac.new(key.encode("utf-8"), body, hashlib.sha256).hexdigest()


def valid_signature(body: bytes, received: str | None, secret: WebhookSecret | str) -> bool:
    """Whether `received` (the header's value) signs `body`, compared in constant time."""
    if not received:
        return False
    expected = signature(body, secret).encode("ascii")
    return hmac.compare_digest(expected, received.strip().lower().encode("latin-1", errors="replace"))


# Included references loaded as a page's are (vessels never come on a page: fetched by id, once).
REFERENCE_TABLES = {type_: table_of_type(type_) for type_ in ("port", "terminal")}
TRACKING_REQUEST = "tracking_request"
# Declared columns a resource need not carry to be complete, because the REST API does not send them either:
# `links.self` comes on some resources only; a table's own are in the registry (`RawTable.unsent_columns`).
OPTIONAL_COLUMNS = frozenset({"self_link"})


@dataclass(frozen=True)
class Notice:
    """What the refresh needs of one journaled notification: its id, when the service created it, and its
    parsed JSON:API document."""

    id: str
    created_at: datetime
    document: Mapping[str, Any]


@dataclass
class Batch:
    """The work of one targeted refresh, grouped per shipment.

    `documents`: shipment id → a JSON:API document of the shipment with its containers and events, built
    from complete payloads; `to_fetch`: shipments whose payloads were incomplete (one GET each);
    `tracking_requests`: tracking request id → its newest complete resource, `tracking_requests_to_fetch`
    the others; `versions`: shipment (or tracking request) key → the newest notification applied for it;
    `applied` the notification ids this batch applies, `superseded` those older than what was applied
    already (nothing to load), `unresolved` those naming no shipment or tracking request, with why."""

    documents: dict[str, dict[str, Any]] = field(default_factory=dict)
    to_fetch: set[str] = field(default_factory=set)
    tracking_requests: dict[str, dict[str, Any]] = field(default_factory=dict)
    tracking_requests_to_fetch: set[str] = field(default_factory=set)
    versions: dict[str, datetime] = field(default_factory=dict)
    applied: list[str] = field(default_factory=list)
    superseded: list[str] = field(default_factory=list)
    unresolved: dict[str, str] = field(default_factory=dict)


@cache
def required_columns(table: str) -> frozenset[str]:
    """The columns a resource must yield for `table` to count as complete: the declared ones, a nested
    object's columns (`import_deadlines__pickup_lfd_line`) counting as its parent attribute."""
    optional = OPTIONAL_COLUMNS | TABLES[table].unsent_columns
    return frozenset(name.split("__", 1)[0] for name in api_columns()[table]) - optional


def is_complete(resource: Mapping[str, Any], table: str) -> bool:
    """Whether a resource carries every attribute and relationship the full sync loads for `table`, so a
    row built from it equals the row a page would give."""
    try:
        row = flatten_resource(resource)
    except ValueError:
        return False
    return required_columns(table) <= row.keys()


def version_key(kind: str, item_id: str) -> str:
    """The key under which the newest applied notification of an item is remembered (`shipment/<id>`)."""
    return f"{kind}/{item_id}"


def _by_type(document: Mapping[str, Any]) -> dict[str, dict[str, dict[str, Any]]]:
    """The document's included resources by type and id (raw JSON:API resource objects)."""
    out: dict[str, dict[str, dict[str, Any]]] = {}
    for resource in document.get("included") or ():
        if isinstance(resource, Mapping) and resource.get("type") and resource.get("id"):
            out.setdefault(str(resource["type"]), {})[str(resource["id"])] = dict(resource)
    return out


def _related_id(resource: Mapping[str, Any], name: str, type_: str | None = None) -> str | None:
    data = ((resource.get("relationships") or {}).get(name) or {}).get("data")
    if isinstance(data, Mapping) and data.get("id") and (type_ is None or data.get("type") == type_):
        return str(data["id"])
    return None


def _related_ids(resource: Mapping[str, Any], name: str) -> list[str]:
    data = ((resource.get("relationships") or {}).get(name) or {}).get("data")
    return [str(item["id"]) for item in data if isinstance(item, Mapping) and item.get("id")] if isinstance(data, list) else []


def shipments_named(document: Mapping[str, Any]) -> set[str]:
    """The shipments a notification is about: those it includes, or those its included resources name
    (a transport event's, container's or estimate's `shipment`, a tracking request's tracked object)."""
    included = _by_type(document)
    named = set(included.get("shipment", {}))
    for type_, resources in included.items():
        for resource in resources.values():
            if type_ == TRACKING_REQUEST:
                if shipment := _related_id(resource, "tracked_object", "shipment"):
                    named.add(shipment)
            elif shipment := _related_id(resource, "shipment", "shipment"):
                named.add(shipment)
    return named


def tracking_requests_named(document: Mapping[str, Any]) -> set[str]:
    """The tracking requests a notification is about: the reference object when it is one, and those included."""
    named = set(_by_type(document).get(TRACKING_REQUEST, {}))
    reference = ((document.get("data") or {}).get("relationships") or {}).get("reference_object") or {}
    data = reference.get("data") or {}
    if isinstance(data, Mapping) and data.get("type") == TRACKING_REQUEST and data.get("id"):
        named.add(str(data["id"]))
    return named


@dataclass
class _ShipmentState:
    """What a batch saw of one shipment: the newest complete rendering of the shipment and of each of its
    containers (with when each came), and the changes no complete rendering covered when they came."""

    shipment: tuple[datetime, dict] | None = None
    containers: dict[str, tuple[datetime, dict]] = field(default_factory=dict)
    uncovered: list[tuple[datetime, frozenset[str]]] = field(default_factory=list)

    def covered(self) -> bool:
        """Whether every uncovered change has a complete shipment, and a complete rendering of each container
        it touched, at least as new: then the rows the batch holds are the service's current ones."""
        for at, touched in self.uncovered:
            if self.shipment is None or self.shipment[0] < at:
                return False
            if any(cid not in self.containers or self.containers[cid][0] < at for cid in touched):
                return False
        return self.shipment is not None


def plan_batch(notices: Iterable[Notice], applied: Mapping[str, datetime]) -> Batch:
    """Group notifications into one refresh: per shipment a document of its newest complete renderings, or
    one GET; per tracking request its newest complete resource, or one GET. `applied` maps version keys to
    the newest notification applied before; a notification older than that for everything it names is
    superseded, not applied.

    A payload carries the shipment and the containers the change is about, not always every container of the
    shipment (a transport event brings its own container): the containers it lacks did not change with it,
    so the shipment's document holds the containers the batch saw and the rest keep their rows. A change that
    came without complete renderings (a "minimal" event, or attributes missing) is covered only by complete
    renderings at least as new of the shipment and of the containers it touched; otherwise one GET."""
    batch = Batch()
    states: dict[str, _ShipmentState] = {}
    events: dict[str, tuple[datetime, dict]] = {}  # event id -> (when, resource), newest rendering
    references: dict[tuple[str, str], dict] = {}
    for notice in sorted(notices, key=lambda n: n.created_at):
        included = _by_type(notice.document)
        shipments = shipments_named(notice.document)
        requests_ = tracking_requests_named(notice.document)
        keys = [version_key("shipment", s) for s in shipments] + [version_key(TRACKING_REQUEST, t) for t in requests_]
        if not keys:
            batch.unresolved[notice.id] = "names no shipment or tracking request"
            continue
        if all(key in applied and notice.created_at < applied[key] for key in keys):
            batch.superseded.append(notice.id)
            continue
        batch.applied.append(notice.id)
        for key in keys:
            batch.versions[key] = max(notice.created_at, batch.versions.get(key, notice.created_at))
        for shipment_id in shipments:
            _observe(states.setdefault(shipment_id, _ShipmentState()), shipment_id, notice.created_at, included)
        for event_id, event in included.get("transport_event", {}).items():
            events[event_id] = (notice.created_at, event)
        for type_, table in REFERENCE_TABLES.items():
            for item_id, resource in included.get(type_, {}).items():
                if is_complete(resource, table):
                    references[(type_, item_id)] = resource
        for request_id in requests_:
            resource = included.get(TRACKING_REQUEST, {}).get(request_id)
            if resource is not None and is_complete(resource, "tracking_requests"):
                batch.tracking_requests[request_id] = resource
                batch.tracking_requests_to_fetch.discard(request_id)
            elif request_id not in batch.tracking_requests:
                batch.tracking_requests_to_fetch.add(request_id)
    for shipment_id, state in states.items():
        if state.covered():
            batch.documents[shipment_id] = shipment_document(state, events, references)
        else:
            batch.to_fetch.add(shipment_id)
    return batch


def _observe(state: _ShipmentState, shipment_id: str, at: datetime, included: Mapping[str, Mapping[str, dict]]) -> None:
    """Take a notification's renderings of one shipment into `state`: the shipment and the containers of it
    that came complete; what the change touched without a complete rendering is left uncovered."""
    shipment = included.get("shipment", {}).get(shipment_id)
    complete_shipment = shipment is not None and is_complete(shipment, "shipments")
    if complete_shipment:
        state.shipment = (at, shipment)
    members = set(_related_ids(shipment, "containers")) if shipment is not None else set()
    touched = {cid for cid, container in included.get("container", {}).items()
               if cid in members or _related_id(container, "shipment") == shipment_id}
    touched |= {cid for event in included.get("transport_event", {}).values()
                if _related_id(event, "shipment") == shipment_id and (cid := _related_id(event, "container"))}
    incomplete = set()
    for container_id in touched:
        container = included.get("container", {}).get(container_id)
        if container is not None and is_complete(container, "containers"):
            state.containers[container_id] = (at, container)
        else:
            incomplete.add(container_id)
    if not complete_shipment or incomplete:
        state.uncovered.append((at, frozenset(incomplete)))


def shipment_document(state: _ShipmentState, events: Mapping[str, tuple[datetime, dict]],
                      references: Mapping[tuple[str, str], dict]) -> dict[str, Any]:
    """A `/shipments` page of one shipment built from the batch's complete renderings (`_ShipmentState`):
    the shipment, the containers the batch saw, every complete event of theirs, the references they name."""
    assert state.shipment is not None  # covered() holds
    shipment = state.shipment[1]
    containers = [container for _, container in state.containers.values()]
    container_ids = set(state.containers)
    bundle_events = [
        event for _, event in events.values()
        if _related_id(event, "container") in container_ids and is_complete(event, "transport_events")
    ]
    return {"data": [shipment], "included": [*containers, *bundle_events, *references.values()]}
