"""Webhooks as the live service sends them: per-account webhook subscriptions, `webhook_notification`s made
from the world's change feed (`world.changes`), and their signed delivery with retries on the sim clock.

A tick (every `webhook_tick_seconds` real seconds on a daemon thread started with the first webhook, or
`POST /_sandbox/webhooks/tick`) reads the sim clock, takes the changes since the previous tick for each
account with an active webhook and makes one notification per (change, subscribed webhook created before
the change): no backfill, as live. Its `included` resources are rendered by the REST code when the tick
builds the notification, so they equal what `GET /v2/shipments/{id}` etc. answer then. Deliveries that fail (anything but
200/201/202/204, a timeout, a refused connection) are retried after 1, 2, 4, ... minutes of *sim* time,
at most MAX_RETRIES times, then the notification is `failed`. World reads run on the server's event loop
(the thread every request runs on), deliveries on `delivery.Deliverer` threads."""

from __future__ import annotations

import concurrent.futures
import json
import logging
import threading
import uuid
from collections import Counter, OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from .delivery import Deliverer, post, where
from .world.changes import Change, changes_between, latest_change
from .world.timeutil import iso, to_epoch

log = logging.getLogger("sandbox.webhooks")

MAX_RETRIES = 12
RETRY_BASE = 60            # sim seconds before the first retry; doubles with each retry
MAX_NOTIFICATIONS = 100_000  # newest kept per account
NAMESPACE = uuid.UUID("5b3f0c9e-49a1-4d2e-9c1b-77e5d4a0b149")
MINIMAL = frozenset({"container.transport.available", "container.transport.not_available",
                     "container.transport.delivered", "container.transport.estimated.vessel_departed",
                     "container.transport.estimated.vessel_arrived",
                     "container.transport.estimated.arrived_at_inland_destination",
                     "container.pickup_appointment.changed"})
IPS = {"webhook_notification_ips": ["35.222.62.171", "3.230.67.145", "44.217.15.129"],
       "last_updated": "2023-10-17T21:23:16Z"}

# The vendor's event catalog (docs/webhooks/event-catalog.mdx): category -> (event, description).
CATALOG: dict[str, tuple[tuple[str, str], ...]] = {
    "Tracking Request Events": (
        ("tracking_request.succeeded", "Shipment created and linked to the tracking request. Your tracking is active."),
        ("tracking_request.failed", "The tracking request failed. The carrier could not find the shipment."),
        ("tracking_request.awaiting_manifest", "The carrier has not yet manifested this shipment. Terminal49 will "
         "retry automatically."),
        ("tracking_request.tracking_stopped", "Terminal49 is no longer updating this tracking request (shipment "
         "delivered or manually stopped)."),
    ),
    "Transport Milestone Events": tuple((f"container.transport.{name}", desc) for name, desc in (
        ("empty_out", "Empty container picked up at port of lading."),
        ("full_in", "Full container returned to port of lading."),
        ("vessel_loaded", "Container loaded onto the vessel at port of lading."),
        ("vessel_departed", "Vessel departed the port of lading."),
        ("transshipment_arrived", "Container arrived at a transshipment port."),
        ("transshipment_discharged", "Container discharged at the transshipment port."),
        ("transshipment_loaded", "Container loaded onto a new vessel at the transshipment port."),
        ("transshipment_departed", "Vessel departed the transshipment port."),
        ("feeder_arrived", "Container arrived on a feeder vessel or barge."),
        ("feeder_discharged", "Container discharged from the feeder vessel or barge."),
        ("feeder_loaded", "Container loaded onto a feeder vessel or barge."),
        ("feeder_departed", "Feeder vessel or barge departed."),
        ("vessel_arrived", "Vessel arrived at the port of discharge."),
        ("vessel_berthed", "Vessel berthed at the port of discharge."),
        ("vessel_discharged", "Container discharged from the vessel at the port of discharge."),
        ("available", "Container is available for pickup at the destination."),
        ("not_available", "Container is no longer available for pickup at the destination."),
        ("full_out", "Container picked up (gated out) at the port of discharge."),
        ("delivered", "Container was manually marked as delivered."),
        ("empty_in", "Empty container returned at the destination."),
        ("rail_loaded", "Container loaded onto a rail car."),
        ("rail_departed", "Rail car departed."),
        ("rail_arrived", "Rail car arrived."),
        ("rail_unloaded", "Container unloaded from the rail car."),
        ("arrived_at_inland_destination", "Container arrived at the final inland destination. Fires only for "
         "shipments with an inland rail leg."),
    )),
    "Estimated Events": (
        ("container.transport.estimated.vessel_departed", "ETA changed for vessel departure at the port of lading."),
        ("shipment.estimated.arrival", "ETA changed for the port of discharge (shipment level)."),
        ("container.transport.estimated.vessel_arrived", "ETA changed for vessel arrival at the port of discharge "
         "(container level)."),
        ("container.transport.estimated.arrived_at_inland_destination", "ETA changed for the inland destination. "
         "Fires only for shipments with an inland rail leg."),
    ),
    "Container Update Events": (
        ("container.created", "A new container was added to a shipment."),
        ("container.updated", "Container attributes changed at the terminal: fees, holds, LFD, pickup appointment, "
         "availability, or POD terminal. The payload includes a `changeset` of the updated fields."),
        ("container.pod_terminal_changed", "The port of discharge terminal assignment changed for the container."),
        ("container.pickup_lfd.changed", "The coalesced `pickup_lfd` attribute changed (line, then terminal, then "
         "rail)."),
        ("container.pickup_lfd_line.changed", "The shipping line's Last Free Day changed."),
        ("container.pickup_lfd_terminal.changed", "The terminal-reported Last Free Day changed."),
        ("container.pickup_lfd_rail.changed", "The rail-carrier-reported Last Free Day changed. Rail Plan only."),
        ("container.pickup_appointment.changed", "The pickup appointment changed."),
    ),
    "Document Processing Events": (
        ("document.extracted", "Document classification and extraction completed successfully."),
        ("document.extraction_failed", "Document extraction did not complete successfully."),
    ),
}
EVENTS: tuple[str, ...] = tuple(name for group in CATALOG.values() for name, _ in group)


def event_categories() -> list[dict]:
    """`GET /webhooks/events`: the catalog as `webhook_event_category` resources."""
    return [{"id": name.lower().replace(" ", "-"), "type": "webhook_event_category",
             "attributes": {"name": name, "events": [{"name": e, "description": d} for e, d in group]}}
            for name, group in CATALOG.items()]


@dataclass
class Webhook:
    """One subscription of an account (`created_at`: sim epoch seconds)."""

    id: str
    account: str
    url: str
    active: bool
    events: list[str]
    secret: str
    headers: list[dict] | None
    created_at: int

    def resource(self) -> dict:
        """The `webhook` resource (the live shape: url, active, events, secret, headers, created_at)."""
        return {"id": self.id, "type": "webhook",
                "attributes": {"url": self.url, "active": self.active, "events": list(self.events),
                               "secret": self.secret, "headers": [dict(h) for h in self.headers]
                               if self.headers is not None else None, "created_at": iso(self.created_at)},
                "links": {"self": f"/v2/webhooks/{self.id}"}}


@dataclass
class Notification:
    """One `webhook_notification`: its delivered body (kept until its delivery is final) and state."""

    id: str
    webhook_id: str
    event: str
    created_at: int
    reference: dict | None          # the reference object resource
    body: bytes | None
    included: list[dict] = field(default_factory=list)
    status: str = "pending"
    attempts: int = 0
    next_at: float | None = None    # sim epoch seconds of the next retry

    def resource(self) -> dict:
        """The `webhook_notification` resource as the REST API and the delivered body show it."""
        ref = {"id": self.reference["id"], "type": self.reference["type"]} if self.reference else None
        return {"id": self.id, "type": "webhook_notification",
                "attributes": {"id": self.id, "event": self.event, "delivery_status": self.status,
                               "created_at": iso(self.created_at)},
                "relationships": {"webhook": {"data": {"id": self.webhook_id, "type": "webhook"}},
                                  "reference_object": {"data": ref},
                                  "webhook_notification_logs": {"data": []}}}


def _ident(resource: dict | None) -> dict | None:
    return {"id": resource["id"], "type": resource["type"]} if resource else None


def payload(account: Any, change: Change, key: str, now: int) -> tuple[dict | None, list[dict]]:
    """(reference object, included) of `change`, every REST resource rendered by `account.get` at `now`, when
    the notification is built (the tick that found the change), as a GET would show it then: a consumer loads
    the same rows a listing at that instant gives. The event families' included sets follow the vendor
    examples; the event resources carry the change's own time. None: nothing to send."""
    at, store = change.at, account.store

    def get(type_: str, id_: str | None) -> dict | None:
        return account.get(type_, id_, now) if id_ else None

    def rel(resource: dict | None, name: str) -> dict | None:
        data = ((resource or {}).get("relationships", {}).get(name) or {}).get("data")
        return get(data["type"], data["id"]) if isinstance(data, dict) else None

    def containers(ship: dict | None) -> list[dict]:
        refs = ((ship or {}).get("relationships", {}).get("containers") or {}).get("data") or []
        return [c for c in (get("container", r["id"]) for r in refs) if c]

    if change.kind == "tracking_request":
        ref = get("tracking_request", store.tr_id(change.tracking_request))
        if ref is None:
            return None, []
        if change.event.endswith((".succeeded", ".tracking_stopped")) and change.shipment is not None:
            ship = get("shipment", store.shipment_id(change.shipment))
            return ref, [ref, *([ship, *containers(ship)] if ship else [])]
        return ref, [ref]
    ship = get("shipment", store.shipment_id(change.shipment))
    if ship is None:
        return None, []
    if change.kind == "transport_event":
        ref = get("transport_event", store.event_id(change.shipment, change.slot, change.seq))
        if ref is None:
            return None, []
        if change.event in MINIMAL:
            return ref, [ref]
        extra = [rel(ref, name) for name in ("location", "terminal", "vessel")]
        return ref, [x for x in (ship, rel(ref, "container"), *extra) if x] + [ref]
    attrs = ship["attributes"]
    if change.kind == "estimated_event":
        port = rel(ship, "port_of_discharge")
        vessel = get("vessel", attrs.get("pod_vessel_imo"))
        ref = {"id": key, "type": "estimated_event",
               "attributes": {"created_at": iso(at), "estimated_timestamp": iso(change.estimate),
                              "voyage_number": attrs.get("pod_voyage_number"), "event": change.event,
                              "location_locode": attrs.get("port_of_discharge_locode"),
                              "data_source": "shipping_line", "timezone": attrs.get("pod_timezone")},
               "relationships": {"shipment": {"data": _ident(ship)}, "port": {"data": _ident(port)},
                                 "vessel": {"data": _ident(vessel)}}}
        return ref, [x for x in (ship, *containers(ship), port) if x] + [ref]
    container = get("container", store.container_id(change.shipment, change.slot))
    terminal = rel(container, "pod_terminal")
    ref = {"id": key, "type": "container_updated_event",
           "attributes": {"changeset": change.changeset, "timestamp": iso(at), "data_source": "terminal",
                          "timezone": (container or {}).get("attributes", {}).get("pod_timezone")},
           "relationships": {"container": {"data": _ident(container)}, "terminal": {"data": _ident(terminal)},
                             "shipment": {"data": _ident(ship)}}}
    return ref, [x for x in (ship, container, terminal) if x] + [ref]


class WebhookHub:
    """Webhooks, notifications and the delivery machinery of one app (see the module docstring)."""

    def __init__(self, world: Any, clock: Any, tick_seconds: float = 0.5, workers: int = 16) -> None:
        self.world, self.clock, self.tick_seconds = world, clock, tick_seconds
        self.lock = threading.RLock()
        self.hooks: dict[str, OrderedDict[str, Webhook]] = {}
        self.notes: dict[str, OrderedDict[str, Notification]] = {}
        self.retrying: dict[str, tuple[str, Notification]] = {}
        self.last_tick: int | None = None
        self.root_url = ""
        self.counters: Counter = Counter()
        self.deliverer = Deliverer(workers)
        self._loop: Any = None
        self._thread: threading.Thread | None = None
        self._stop = threading.Event()
        self._tick_lock = threading.Lock()

    # ----- subscriptions -------------------------------------------------------------------------

    def create(self, account: str, attrs: dict, now: Any, root_url: str, loop: Any = None) -> Webhook:
        """Store a new webhook (random id and secret) created at sim `now`; starts the tick thread."""
        import secrets

        at = to_epoch(now)
        hook = Webhook(str(uuid.uuid4()), account, attrs["url"], attrs["active"],
                       list(attrs.get("events") or EVENTS), secrets.token_hex(20), attrs.get("headers"), at)
        with self.lock:
            self.hooks.setdefault(account, OrderedDict())[hook.id] = hook
            self.root_url = root_url
            if self.last_tick is None:
                self.last_tick = at
        self._start(loop)
        return hook

    def webhooks(self, account: str) -> list[Webhook]:
        """The account's webhooks, newest first."""
        with self.lock:
            return list(reversed(self.hooks.get(account, {}).values()))

    def webhook(self, account: str, id_: str) -> Webhook | None:
        """One webhook of the account, or None."""
        with self.lock:
            return self.hooks.get(account, {}).get(id_)

    def update(self, hook: Webhook, attrs: dict) -> Webhook:
        """Apply validated attributes (url, active, events, headers) to a webhook."""
        with self.lock:
            for name in ("url", "active", "events", "headers"):
                if name in attrs:
                    setattr(hook, name, list(attrs[name]) if name == "events" else attrs[name])
        return hook

    def delete(self, hook: Webhook) -> None:
        """Remove a webhook; its pending retries stop."""
        with self.lock:
            self.hooks.get(hook.account, {}).pop(hook.id, None)
            for nid in [k for k, (_, n) in self.retrying.items() if n.webhook_id == hook.id]:
                del self.retrying[nid]

    # ----- notifications -------------------------------------------------------------------------

    def notifications(self, account: str) -> list[Notification]:
        """The account's notifications, newest first."""
        with self.lock:
            return list(reversed(self.notes.get(account, {}).values()))

    def notification(self, account: str, id_: str) -> Notification | None:
        """One notification of the account, or None."""
        with self.lock:
            return self.notes.get(account, {}).get(id_)

    def snapshot(self) -> dict:
        """Delivery counters for `/_sandbox/stats`."""
        with self.lock:
            c = self.counters
            return {"sent": c["sent"], "succeeded": c["succeeded"], "failed": c["failed"],
                    "retried": c["retried"], "notifications": c["notifications"],
                    "pending_retries": len(self.retrying)}

    def _notify(self, hook: Webhook, change: Change, ref: dict | None, included: list[dict]) -> Notification:
        nid = str(uuid.uuid5(NAMESPACE, f"{hook.id}:{change.key}"))
        note = Notification(nid, hook.id, change.event, change.at, ref, None, included)
        doc: dict = {"data": note.resource(), "included": included}
        if self.root_url:
            doc["links"] = {"self": f"{self.root_url}/v2/webhook_notifications/{nid}"}
        note.body = json.dumps(doc, separators=(",", ":"), ensure_ascii=False).encode()
        notes = self.notes.setdefault(hook.account, OrderedDict())
        notes[nid] = note
        self.counters["notifications"] += 1
        while len(notes) > MAX_NOTIFICATIONS:
            old_id, _ = notes.popitem(last=False)
            self.retrying.pop(old_id, None)
        return note

    # ----- ticks ---------------------------------------------------------------------------------

    def tick(self) -> list[threading.Event]:
        """One tick at the sim clock's now: notifications for the changes since the last tick, due retries
        queued. Returns one event per delivery queued, set once it was attempted. Call on the event loop."""
        with self._tick_lock:
            now = to_epoch(self.clock.now())
            with self.lock:
                t0 = self.last_tick
                if t0 is None:
                    return []
                self.last_tick = max(t0, now)
                active = {name: [h for h in hooks.values() if h.active] for name, hooks in self.hooks.items()}
            made: list[Notification] = []
            for name, hooks in active.items():
                if hooks and now > t0:
                    made.extend(self._account_tick(name, hooks, max(t0, min(h.created_at for h in hooks)), now))
            waits = [self._queue(n) for n in made]
            with self.lock:
                due = [(a, n) for a, n in self.retrying.values() if n.next_at is not None and n.next_at <= now]
                for _, n in due:
                    del self.retrying[n.id]
                    n.next_at = None
            waits.extend(self._queue(n) for _, n in due)
            return waits

    def _account_tick(self, name: str, hooks: list[Webhook], t0: int, t1: int) -> list[Notification]:
        account = self.world.account(name)
        made = []
        for change in changes_between(account, t0, t1):
            subs = [h for h in hooks if change.event in h.events and change.at > h.created_at]
            if not subs:
                continue
            key = str(uuid.uuid5(NAMESPACE, f"{self.world.seed}:{name}:{change.key}"))
            try:
                ref, included = payload(account, change, key, t1)
            except Exception:  # a world bug must not stop the feed
                log.exception("could not render %s", change.event)
                continue
            if ref is None:
                continue
            with self.lock:
                made.extend(self._notify(h, change, ref, included) for h in subs)
        return made

    def _queue(self, note: Notification) -> threading.Event:
        return self.deliverer.submit(note.webhook_id, lambda: self._attempt(note))

    def _attempt(self, note: Notification) -> None:
        """One delivery attempt (on a delivery thread): POST, then succeeded, a retry later, or failed."""
        with self.lock:
            hook = next((h.get(note.webhook_id) for h in self.hooks.values() if note.webhook_id in h), None)
            body = note.body
        if hook is None or body is None or note.status != "pending":
            return
        ok, what = post(hook.url, body, hook.secret, hook.headers)
        with self.lock:
            note.attempts += 1
            self.counters["sent"] += 1
            if note.attempts > 1:
                self.counters["retried"] += 1
            if ok:
                note.status = "succeeded"
                self.counters["succeeded"] += 1
            elif note.attempts > MAX_RETRIES:
                note.status = "failed"
                self.counters["failed"] += 1
            else:
                note.next_at = to_epoch(self.clock.now()) + RETRY_BASE * 2 ** (note.attempts - 1)
                self.retrying[note.id] = (hook.account, note)
            if note.status != "pending":
                note.body, note.included = None, []
        if not ok:
            log.info("webhook %s delivery to %s failed (%s), attempt %d%s", note.id, where(hook.url), what,
                     note.attempts, ", giving up" if note.status == "failed" else "")

    # ----- examples ------------------------------------------------------------------------------

    def example(self, account: Any, event: str, now: Any) -> tuple[dict, list[dict]]:
        """An example notification of `event` from the account's own world: its latest such change by `now`
        (reference object null and nothing included for events the world does not produce)."""
        at = to_epoch(now)
        change = latest_change(account, event, at)
        hooks = self.webhooks(account.name)
        hook_id = hooks[0].id if hooks else str(uuid.uuid5(NAMESPACE, f"example-webhook:{account.name}"))
        ref, included = None, []
        if change is not None:
            key = str(uuid.uuid5(NAMESPACE, f"{self.world.seed}:{account.name}:{change.key}"))
            ref, included = payload(account, change, key, at)
        note = Notification(str(uuid.uuid5(NAMESPACE, f"example:{account.name}:{event}")), hook_id, event,
                            change.at if change else at, ref, None)
        return note.resource(), included

    # ----- the tick thread -----------------------------------------------------------------------

    def _start(self, loop: Any) -> None:
        with self.lock:
            if self._thread is not None or self.tick_seconds <= 0 or self._stop.is_set():
                return
            self._loop = loop
            self._thread = threading.Thread(target=self._run, name="sandbox-webhook-ticks", daemon=True)
            self._thread.start()

    def on_loop(self, fn: Callable[[], Any], timeout: float = 120.0) -> Any:
        """Run `fn` on the server's event loop (where every request reads the world) and return its result;
        directly when there is no loop. RuntimeError once the loop is closed."""
        loop = self._loop
        if loop is None:
            return fn()
        fut: concurrent.futures.Future = concurrent.futures.Future()

        def run() -> None:
            try:
                fut.set_result(fn())
            except BaseException as exc:  # handed to the waiting thread
                fut.set_exception(exc)

        loop.call_soon_threadsafe(run)
        return fut.result(timeout)

    def _run(self) -> None:
        while not self._stop.wait(self.tick_seconds):
            try:
                self.on_loop(self.tick)
            except RuntimeError:   # the loop is gone: the server stopped
                return
            except Exception:
                log.exception("webhook tick failed")

    def stop(self) -> None:
        """Stop the tick thread and the delivery workers (the server is stopping)."""
        self._stop.set()
        self.deliverer.stop()
