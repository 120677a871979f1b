"""An account of the world as the HTTP layer sees it (see docs/sandbox-internals.md for the contract):
a thin facade composing the account's rows and overlays (`store`), tracking-request lifecycle
(`lifecycle`), rendering (`render`), list views (`listing`), search (`search`) and maps (`mapgeo`).

Every method takes `now` (a datetime or epoch seconds) and returns resource dicts, so the account's
state is a pure function of (seed, account, overlays, now).
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Protocol

from . import lifecycle, listing, mapgeo, render, stops
from .search import AccountSearch, SearchIndex
from .shipments import Plan
from .store import AccountStore
from .timeutil import to_epoch

if TYPE_CHECKING:  # pragma: no cover
    from .fleet import Fleet
    from .reference import Reference
    from .routing import RouteBook


class WorldView(Protocol):
    """What an account reads from its world: seed, start, shared reference data and reference lookups.
    A protocol, so accounts need not import the `World` that builds them."""

    seed: int
    start_ts: int
    ref: Reference
    fleet: Fleet
    routes: RouteBook

    def get_port(self, id_or_locode: str) -> dict | None: ...

    def get_terminal(self, terminal_id: str) -> dict | None: ...

    def get_vessel(self, id_or_imo: str, now: datetime) -> dict | None: ...

    def get_shipping_line(self, id: str) -> dict | None: ...


def _now(now: datetime | int) -> int:
    return now if isinstance(now, int) else to_epoch(now)


class Account:
    """One account of the world: its shipments, containers, tracking requests, parties and documents."""

    def __init__(self, world: WorldView, name: str, n: int, stream: int) -> None:
        """Draw the account's `n` seeded shipments from seed stream `stream` (rows stay lazy)."""
        self.world, self.name, self.n = world, name, n
        self.store = AccountStore(world.seed, name, n, stream, world.start_ts, world.ref, world.routes)
        self.search = AccountSearch(self.store)
        self.factory = self.store.factory
        self._idents = self.store.idents  # the identity LRU cache (tests clear and measure it)

    # ----- rows by index -------------------------------------------------------------------------

    def shipment_id(self, i: int) -> str:
        """Id of shipment index `i`."""
        return self.store.shipment_id(i)

    def container_id(self, i: int, slot: int) -> str:
        """Id of container `slot` of shipment `i`."""
        return self.store.container_id(i, slot)

    def plan(self, i: int) -> Plan:
        """The full plan of shipment index `i`."""
        return self.store.plan(i)

    def search_index(self) -> SearchIndex:
        """The account's search index, built on first use."""
        return self.search.index()

    # ----- lists ---------------------------------------------------------------------------------

    def shipments(self, now, *, q: str | None = None, number: str | None = None,
                  tracking_stopped: bool | None = None) -> Sequence[dict]:
        """Shipments newest first; `q` searches BL, ref and container numbers (substring, case-
        insensitive); `number` matches the tracking request number exactly (case-insensitive);
        `tracking_stopped` keeps only stopped (True) or tracked (False) shipments."""
        return listing.shipments(self.store, self.search, _now(now), q=q, number=number,
                                 tracking_stopped=tracking_stopped)

    def containers(self, now) -> Sequence[dict]:
        """Containers newest first (by their shipment's created_at), lazily rendered."""
        return listing.containers(self.store, _now(now))

    def tracking_requests(self, now, *, status=None, scac=None, request_number=None, q=None,
                          created_start=None, created_end=None, updated_start=None, updated_end=None) -> Sequence[dict]:
        """Tracking requests newest first, filtered like `GET /tracking_requests` (all filters AND)."""
        return listing.tracking_requests(self.store, self.search, _now(now), status=status, scac=scac,
                                         request_number=request_number, q=q, created_start=created_start,
                                         created_end=created_end, updated_start=updated_start,
                                         updated_end=updated_end)

    def parties(self) -> Sequence[dict]:
        """Customer parties: the seeded ones, then those created through the API."""
        return listing.parties(self.store)

    def documents(self) -> Sequence[dict]:
        """Documents created through the API, newest first."""
        return list(reversed(self.store.documents_list))

    # ----- single resources ----------------------------------------------------------------------

    def get(self, type_: str, id_: str, now) -> dict | None:
        """Any resource visible to this account (or reference data) by JSON:API type and id."""
        t = _now(now)
        w, store = self.world, self.store
        if type_ == "port":
            return w.get_port(id_)
        if type_ == "terminal":
            return w.get_terminal(id_)
        if type_ == "vessel":
            return w.get_vessel(id_, now if isinstance(now, datetime) else datetime.fromtimestamp(t, tz=UTC))
        if type_ == "shipping_line":
            return w.get_shipping_line(id_)
        if type_ == "document":
            return next((d for d in store.documents_list if d["id"] == id_), None)
        dec = store.codec.decode(id_)
        if dec is None or dec[0] != type_:
            return None
        kind, index, sub = dec
        if kind == "party":
            names = store.all_party_names()
            return render.party_resource(store, index, names[index]) if index < len(names) else None
        if kind == "tracking_request":
            if index < store.seeded_tr_count or index - store.seeded_tr_count < len(store.api_requests):
                return render.tracking_request_resource(store, index, t)
            return None
        if not store.shipment_visible(index, t):
            return None
        plan = store.plan(index)
        if kind == "shipment":
            return render.shipment_resource(store, plan, t)
        if kind == "container":
            return render.container_resource(store, plan, sub, t) if sub < len(plan.containers) else None
        if kind == "transport_event":
            slot, seq = divmod(sub, 64)
            if slot >= len(plan.containers):
                return None
            ev = next((e for e in plan.containers[slot].detail().events if e.seq == seq), None)
            if ev is None or not render.event_live(ev, stops.view_time(store, plan, t)):
                return None
            return render.event_resource(store, plan, slot, ev, t)
        return None

    def transport_events(self, container_id: str, now) -> list[dict] | None:
        """Events of a container known by `now`, oldest first (invalidated ones flagged, still listed)."""
        t = _now(now)
        found = self.store.container_ref(container_id, t)
        if found is None:
            return None
        plan, slot = found
        events = plan.containers[slot].detail().events
        vt = stops.view_time(self.store, plan, t)
        return [render.event_resource(self.store, plan, slot, e, vt) for e in events if render.event_live(e, vt)]

    def map_geojson(self, container_id: str, now) -> dict | None:
        """The container's route FeatureCollection at `now` (None: no such container)."""
        t = _now(now)
        found = self.store.container_ref(container_id, t)
        if found is None:
            return None
        return mapgeo.build(found[0], t, self.world.ref, self.world.fleet)

    def find_for_deeplink(self, query: str, now) -> tuple[str, str | None] | None:
        """(shipment_id, container_id or None) for the web app's `/shipments/find?q=`, by the spec's
        order: exact container, exact shipment/ref number, partial container, partial shipment."""
        return self.search.find_for_deeplink(query, _now(now))

    # ----- writes (overlays) ---------------------------------------------------------------------

    def create_tracking_request(self, attributes: dict, customer_id: str | None, now) -> dict:
        """Record a new tracking request (pending); it resolves 20-90 sim seconds later to `created`
        (a new shipment appears) or `failed` with the live failed_reason."""
        t = _now(now)
        tr = lifecycle.create(self.store, attributes, customer_id, t)
        return render.tracking_request_resource(self.store, tr, t, creation_response=True)

    def create_party(self, company_name: str, now) -> dict:
        """Add a customer party (overlay) and return its resource."""
        return render.party_resource(self.store, self.store.add_party(company_name), company_name)

    def patch_shipment(self, id_, now, *, ref_numbers=None, tags=None) -> dict | None:
        """Overlay ref_numbers and/or tags on a shipment; returns the updated resource."""
        t = _now(now)
        store = self.store
        dec = store.codec.decode(id_)
        if dec is None or dec[0] != "shipment" or not store.shipment_visible(dec[1], t):
            return None
        with store.lock:
            store.patch_shipment(id_, ref_numbers=ref_numbers, tags=tags)
            self.search.refresh(dec[1])
        return render.shipment_resource(store, store.plan(dec[1]), t)

    def patch_container(self, id_, now, *, ref_numbers=None) -> dict | None:
        """Overlay ref_numbers on a container; returns the updated resource."""
        t = _now(now)
        store = self.store
        found = store.container_ref(id_, t)
        if found is None:
            return None
        with store.lock:
            store.patch_container(id_, ref_numbers=ref_numbers)
            self.search.refresh(found[0].ident.index)
        return render.container_resource(store, found[0], found[1], t)

    def set_tracking(self, id_, now, *, stop: bool) -> dict | None:
        """`PATCH /shipments/{id}/stop_tracking` (`stop`) or `resume_tracking`: record the call (overlay)
        and return the shipment; None if there is no such shipment."""
        t = _now(now)
        store = self.store
        dec = store.codec.decode(id_)
        if dec is None or dec[0] != "shipment" or not store.shipment_visible(dec[1], t):
            return None
        stops.set_tracking(store, dec[1], t, stop)
        return render.shipment_resource(store, store.plan(dec[1]), t)

    def patch_tracking_request(self, id_, now, attributes: dict) -> dict | None:
        """`PATCH /tracking_requests/{id}`: overlay the editable attributes (already validated; the
        spec's `ref_number` becomes `ref_numbers: [ref_number]`); None if there is no such request."""
        t = _now(now)
        if self.get("tracking_request", id_, t) is None:
            return None
        store = self.store
        with store.lock:
            patch = store.tr_patches.setdefault(id_, {})
            if "ref_number" in attributes:
                ref = attributes["ref_number"]
                patch["ref_numbers"] = [str(ref)] if ref not in (None, "") else []
        dec = store.codec.decode(id_)
        return render.tracking_request_resource(store, dec[1], t)

    def create_document(self, name: str, blob: dict, now, *, shipment_id=None, container_id=None) -> dict:
        """Record a document attached to an uploaded blob (overlay) and return its resource."""
        t = _now(now)
        return self.store.add_document(
            lambda did: render.document_resource(did, name, blob, t, shipment_id, container_id))
