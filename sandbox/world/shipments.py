"""Deterministic generation of one shipment: its identity (numbers) and its plan (timeline).

Everything about shipment `i` of an account is regenerated on demand from (seed, account, i):
`identity` is the cheap part (numbers, carrier, refs; enough for search indexes) and `plan` adds the
legs carved out of vessel voyages and every milestone with the time it becomes known. The plan holds
*all* future times; what a client sees at `now` is decided by `render`, so state is a pure function of
`now`.
"""

from __future__ import annotations

import itertools
import random
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from functools import lru_cache
from zoneinfo import ZoneInfo

from . import inland as inland_mod
from .identifiers import container_number, rng_for
from .milestones import PREFIX
from .reference import Carrier, Reference, Terminal
from .routing import Leg, LegTemplate, RouteBook
from .timeutil import DAY, HOUR, MINUTE, iso

CARRIER_WEIGHTS = {"MSCU": 18, "MAEU": 16, "CMDU": 12, "COSU": 10, "HLCU": 9, "ONEY": 8, "EGLV": 8, "OOLU": 4,
                   "YMLU": 4, "HDMU": 3, "ZIMU": 3, "APLU": 2, "SUDU": 2, "WHLC": 2, "MATS": 1, "PCIU": 1,
                   "ANNU": 1, "SAFM": 1, "SEAU": 1}
# How each line's first (published) arrival estimate misses the actual arrival: a lateness bias and a scale
# of the spread, so carriers differ in schedule reliability and ETA accuracy the way published rankings show
# (no draw depends on them: the rest of the world is the same for every profile).
RELIABILITY = {"MAEU": (0, 0.35), "HLCU": (2, 0.45), "ONEY": (4, 0.6), "EGLV": (6, 0.7), "COSU": (8, 0.8),
               "MSCU": (14, 1.0), "CMDU": (20, 1.1), "ZIMU": (26, 1.3)}  # SCAC: (bias hours, spread factor)
DEFAULT_RELIABILITY = (10, 0.9)
STRIP_PREFIX = {"MAEU", "SAFM", "SUDU", "SEAU"}   # carriers whose normalized_number drops the prefix
HOLD_KINDS = (  # name, probability, description, status
    ("customs", 0.30, "CBP hold - entry not released", "hold"),
    ("freight", 0.15, "Line hold - freight charges outstanding", "hold"),
    ("USDA", 0.05, "USDA inspection hold", "hold"),
    ("VACIS", 0.04, "VACIS exam requested", "hold"),
    ("TMF", 0.04, "Traffic Mitigation Fee not paid", "pending"),
    ("other", 0.03, None, "hold"),
)
EQUIPMENT = (("dry", 40, "high_cube", 46), ("dry", 40, "standard", 20), ("dry", 20, "standard", 18),
             ("reefer", 40, "high_cube", 6), ("dry", 45, "high_cube", 4), ("open top", 40, "standard", 2),
             ("flat rack", 40, "standard", 2), ("tank", 20, "standard", 2))


@dataclass
class ContainerIdentity:
    slot: int
    number: str
    ref_numbers: list[str]


@dataclass
class Identity:
    """The cheap, searchable part of a shipment."""

    index: int
    carrier: Carrier
    request_type: str
    request_number: str
    bl_number: str
    normalized_number: str
    ref_numbers: list[str]
    tags: list[str]
    party: int | None
    containers: list[ContainerIdentity]
    route: tuple[LegTemplate, ...]
    created_at: int


@dataclass
class Event:
    seq: int
    name: str               # full event name, e.g. container.transport.vessel_loaded
    ts: int
    known_at: int
    locode: str
    vessel: object | None   # fleet.Vessel
    voyage: str | None
    terminal: str | None
    data_source: str = "shipping_line"
    value: str | None = None
    version: int = 0
    invalidated_at: int | None = None
    previous_seq: int | None = None


@dataclass
class Hold:
    name: str
    description: str | None
    status: str
    appear: int
    clear: int


@dataclass
class ContainerPlan:
    """Key times of a container (always generated) plus details filled on first access."""

    ident: ContainerIdentity
    holds: list[Hold]
    discharged: int
    available: int
    full_out: int
    empty_in: int
    free_days: int
    has_line_lfd: bool
    tz: str
    events: list[Event] = field(default_factory=list)
    equipment: tuple[str, int, str] = ("dry", 40, "high_cube")
    weight_lbs: int | None = None
    seal: str | None = None
    lfd_terminal: int = 0
    lfd_line: int | None = None
    lfd_known: int = 0
    demurrage_rate: int = 150
    exam_fee: int = 350
    appointment: tuple[int, int] | None = None      # (known_at, appointment time)
    chassis: str | None = None
    yard: str | None = None
    rail: inland_mod.RailTimes | None = None        # inland shipments: the container's rail leg
    _build: Callable[[], None] | None = None

    def detail(self) -> ContainerPlan:
        """This plan with events/LFDs/equipment generated (once)."""
        if self._build is not None:
            build, self._build = self._build, None
            build()
        return self


@dataclass
class Plan:
    ident: Identity
    legs: list[Leg]
    pol_terminal: Terminal | None
    pod_terminal: Terminal
    route_known_at: int | None
    eta_revisions: list[list[tuple[int, int]]]   # per leg: (known_at, eta of arrival)
    etd_revisions: list[list[tuple[int, int]]]   # per leg: (known_at, etd of departure)
    containers: list[ContainerPlan]
    stopped_at: int
    phase: int
    extra: dict = field(default_factory=dict)

    @property
    def ports(self) -> list[str]:
        return [self.legs[0].origin, *[leg.destination for leg in self.legs]]


def _weighted(rng: random.Random, items: list, weights: list[float]):
    return rng.choices(items, weights=weights, k=1)[0]


def _end_of_local_day(ts: int, days: int, tz: str) -> int:
    local = datetime.fromtimestamp(ts, ZoneInfo(tz)) + timedelta(days=days)
    end = local.replace(hour=23, minute=59, second=59, microsecond=0)
    return int(end.timestamp())


class ShipmentFactory:
    """Generates identities and plans for one account's stream of shipments."""

    def __init__(self, seed: int, account: str, ref: Reference, routes: RouteBook, party_count: int) -> None:
        self.seed, self.account, self.ref, self.routes = seed, account, ref, routes
        self.party_count = party_count
        carriers = [ref.carriers[s] for s in CARRIER_WEIGHTS if s in ref.carriers]
        self._carriers = carriers
        self._carrier_weights = [CARRIER_WEIGHTS[c.scac] for c in carriers]
        self._carrier_cum = list(itertools.accumulate(self._carrier_weights))
        self._cache: OrderedDict[int, Plan] = OrderedDict()

    def plan(self, ident: Identity) -> Plan:
        """The plan of `ident`, from a small LRU cache (plans are pure functions of the identity)."""
        hit = self._cache.get(ident.index)
        if hit is not None:
            self._cache.move_to_end(ident.index)
            return hit
        plan = self._plan(ident)
        self._cache[ident.index] = plan
        if len(self._cache) > 4096:
            self._cache.popitem(last=False)
        return plan

    # ----- identity ------------------------------------------------------------------------------

    def seeded_identity(self, i: int, created_at: int, n_containers: int, first_container: int) -> Identity:
        """Identity of seeded shipment `i` (numbers are unique per account by construction)."""
        rng = rng_for(self.seed, self.account, "id", i)
        carrier = self._carriers[bisect_right(self._carrier_cum, rng.random() * self._carrier_cum[-1])]
        route = self.routes.pick(rng)
        request_type = "bill_of_lading" if rng.random() < 0.85 else "booking_number"
        serial = (stable_offset(self.seed, self.account) + i * 104_729) % 1_000_000_000
        pol = self.routes.fleet.schedules[route[0].service].sdef.rotation[route[0].a]
        bl, normalized = self._bl_number(carrier, serial, pol, rng, request_type)
        refs = self._refs(rng, 0.4)
        tags = rng.sample(TAGS, rng.choice((1, 1, 2))) if rng.random() < 0.2 else []
        party = _ri(rng, 0, self.party_count) if self.party_count else None
        conts = []
        owner = carrier.container_owner
        for slot in range(n_containers):
            cserial = (stable_offset(self.seed, self.account, "c") + (first_container + slot) * 7_919) % 1_000_000
            conts.append(ContainerIdentity(slot, container_number(owner, cserial), self._refs(rng, 0.12)))
        return Identity(i, carrier, request_type, bl, bl, normalized, refs, tags, party, conts, route, created_at)

    def api_identity(self, i: int, created_at: int, attrs: dict, carrier: Carrier, party: int | None) -> Identity:
        """Identity of a shipment produced by a tracking request created through the API."""
        number = str(attrs.get("request_number", "")).strip()
        rng = rng_for(self.seed, self.account, "api-id", i, number.upper())
        route = self.routes.pick(rng)
        request_type = attrs.get("request_type") or "bill_of_lading"
        owner = carrier.container_owner
        conts: list[ContainerIdentity] = []
        refs = [str(r) for r in (attrs.get("ref_numbers") or [])]
        if request_type == "container":
            first = "".join(number.split()).replace("-", "").upper()
            conts.append(ContainerIdentity(0, first, list(refs)))
            pol = self.routes.fleet.schedules[route[0].service].sdef.rotation[route[0].a]
            bl, normalized = self._bl_number(carrier, _ri(rng, 0, 10**9), pol, rng, "bill_of_lading")
        else:
            bl = number
            normalized = number[4:] if carrier.scac in STRIP_PREFIX and len(number) > 8 else number
            count = rng.choices((1, 2, 3, 4), weights=(45, 30, 15, 10))[0]
            for slot in range(count):
                conts.append(ContainerIdentity(slot, container_number(owner, _ri(rng, 0, 10**6)), list(refs)))
        tags = [str(t) for t in (attrs.get("shipment_tags") or [])]
        return Identity(i, carrier, request_type, number, bl, normalized, list(refs), tags, party, conts, route,
                        created_at)

    def _bl_number(self, carrier: Carrier, serial: int, pol: str, rng: random.Random, kind: str) -> tuple[str, str]:
        prefix = carrier.bol_prefix or carrier.scac
        if kind == "booking_number":
            number = f"{serial % 10**9 + 10**9}" if rng.random() < 0.5 else f"{pol[2:]}{serial % 10**7:07d}"
            return number, number
        if carrier.scac in ("HLCU", "MSCU"):
            number = f"{prefix}{pol[2:]}{serial % 10**7:07d}"
        else:
            number = f"{prefix}{serial:09d}"
        normalized = number[len(prefix):] if carrier.scac in STRIP_PREFIX else number
        return number, normalized

    @staticmethod
    def _refs(rng: random.Random, p: float) -> list[str]:
        if rng.random() >= p:
            return []
        style = _ri(rng, 0, 3)
        first = (f"PO-{_ri(rng, 10**5, 10**6)}", f"INV{_ri(rng, 10**6, 10**7)}",
                 f"SO{_ri(rng, 10**4, 10**5)}-{_ri(rng, 10, 99)}")[style]
        return [first] if rng.random() < 0.8 else [first, f"REF{_ri(rng, 10**5, 10**6)}"]

    # ----- plan ----------------------------------------------------------------------------------

    def _plan(self, ident: Identity) -> Plan:
        """All milestones of a shipment (future ones included), carved from vessel voyages."""
        rng = rng_for(self.seed, self.account, "plan", ident.index, ident.request_number)
        created = ident.created_at
        ready = created + int(rng.uniform(-16 * DAY, 14 * DAY))
        legs = self.routes.carve_legs(ident.route, ready, rng)
        pol, pod = legs[0].origin, legs[-1].destination
        pod_port = self.ref.ports[pod]
        pol_terms = self.ref.terminals_by_port.get(pol, [])
        pod_terms = self.ref.terminals_by_port[pod]
        pol_terminal = pol_terms[_ri(rng, 0, len(pol_terms))] if pol_terms else None
        pod_terminal = pod_terms[_ri(rng, 0, len(pod_terms))]
        route_known = None if rng.random() < 0.04 else created + _ri(rng, 2 * MINUTE, 6 * HOUR)
        published = legs[0].atd - 14 * DAY
        profile = RELIABILITY.get(ident.carrier.scac, DEFAULT_RELIABILITY)
        eta_revs = [self._revisions(rng, published, leg.atd, leg.ata, arrival=True, profile=profile) for leg in legs]
        etd_revs = [self._revisions(rng, published, leg.atd - 3 * DAY, leg.atd, arrival=False) for leg in legs]
        leg = inland_mod.pick(self.seed, self.account, ident.index, ident.request_number, pod)
        containers = [self._container(rng, ident, c, legs, pol_terminal, pod_terminal, pod_port.time_zone, leg)
                      for c in ident.containers]
        stopped = max(c.empty_in for c in containers) + _ri(rng, 1, 12) * HOUR
        extra: dict = {"inland": leg}
        if stopped > legs[-1].ata + 56 * DAY:
            stopped, extra["stop_reason"] = legs[-1].ata + 56 * DAY, "past_arrival_window"
        return Plan(ident, legs, pol_terminal, pod_terminal, route_known, eta_revs, etd_revs, containers,
                    stopped, _ri(rng, 0, 3 * HOUR), extra)

    @staticmethod
    def _revisions(rng: random.Random, published: int, start: int, actual: int, arrival: bool,
                   profile: tuple[int, float] = (0, 1.0)) -> list[tuple[int, int]]:
        """Estimate history ending at `actual`: a first (original) estimate, off by the carrier's `profile`
        (bias hours, spread factor), revisions with a shrinking error while under way, and a last one
        shortly before the event."""
        bias_hours, spread = profile
        err0 = (int(_ri(rng, -2 * DAY, 3 * DAY) * spread) - bias_hours * HOUR if arrival
                else -_ri(rng, -6 * HOUR, 2 * DAY))
        err0 = err0 // (15 * MINUTE) * (15 * MINUTE)
        revs = [(published, actual + err0)]
        k = rng.randint(2, 5) if arrival else rng.randint(1, 2)
        span_start, span_end = max(published + HOUR, start), actual - 18 * HOUR
        for j in range(1, k + 1):
            if span_end <= span_start:
                break
            at = span_start + (span_end - span_start) * j // (k + 1)
            shrink = 1 - j / (k + 1)
            err = int(err0 * shrink + _ri(rng, -6 * HOUR, 6 * HOUR) * shrink)
            revs.append((at, actual + err // MINUTE * MINUTE))
        revs.append((actual - _ri(rng, 4 * HOUR, 14 * HOUR), actual + _ri(rng, -60, 60) * MINUTE))
        revs.sort()
        return revs

    def _container(self, rng: random.Random, ident: Identity, c: ContainerIdentity, legs: list[Leg],
                   pol_terminal: Terminal | None, pod_terminal: Terminal, tz: str,
                   leg: inland_mod.InlandLeg | None = None) -> ContainerPlan:
        """Key times of one container (cheap); its event list is generated lazily by `_details`."""
        ata = legs[-1].ata
        discharged = ata + _ri(rng, 6 * HOUR, 40 * HOUR)
        holds = []
        for name, p, desc, status in HOLD_KINDS:
            if rng.random() < p:
                appear = ata - _ri(rng, 0, 2 * DAY)
                clear = max(appear + HOUR, discharged + _ri(rng, -DAY, 4 * DAY))
                holds.append(Hold(name, desc, status, appear, clear))
        available = max([discharged + _ri(rng, 2 * HOUR, 30 * HOUR)] + [h.clear + 30 * MINUTE for h in holds])
        free_days = rng.choice((3, 4, 4, 5, 5, 7))
        late = rng.random() < 0.15
        full_out = available + (_ri(rng, 5 * DAY, 12 * DAY) if late else _ri(rng, 8 * HOUR, 4 * DAY))
        empty_in = full_out + _ri(rng, 2 * DAY, 14 * DAY)
        cp = ContainerPlan(ident=c, holds=holds, discharged=discharged, available=available, full_out=full_out,
                           empty_in=empty_in, free_days=free_days, has_line_lfd=rng.random() < 0.3, tz=tz)
        if leg is not None:   # by rail to an inland ramp: available there after the train is unloaded
            irng = rng_for(self.seed, self.account, "rail", ident.index, c.slot)
            cp.rail = rail = inland_mod.container_times(irng, leg, discharged)
            cp.available = max([rail.unloaded + _ri(irng, 2 * HOUR, 30 * HOUR)] + [h.clear + 30 * MINUTE for h in holds])
            cp.full_out = cp.available + _ri(irng, 8 * HOUR, 3 * DAY)
            cp.empty_in = cp.full_out + _ri(irng, 2 * DAY, 10 * DAY)
        cp._build = lambda: self._details(cp, ident, legs, pol_terminal, pod_terminal, leg)
        return cp

    def _rail_events(self, cp: ContainerPlan, ident: Identity, leg: inland_mod.InlandLeg, pod: str,
                     pod_terminal: Terminal, add: Callable) -> None:
        """Events of an inland container after discharge (see `_rail_events_impl`)."""
        _rail_events_impl(self, cp, ident, leg, pod, pod_terminal, add)

    def _details(self, cp: ContainerPlan, ident: Identity, legs: list[Leg], pol_terminal: Terminal | None,
                 pod_terminal: Terminal, leg: inland_mod.InlandLeg | None = None) -> None:
        """Fill a container's events, LFDs, equipment and terminal details (on first access)."""
        rng = rng_for(self.seed, self.account, "cdetail", ident.index, cp.ident.slot, ident.request_number)
        created = ident.created_at
        first, last = legs[0], legs[-1]
        pol, pod = first.origin, last.destination
        events: list[Event] = []

        def add(name: str, ts: int, locode: str, vessel=None, voyage=None, terminal=None, lag: int | None = None,
                source: str = "shipping_line", value: str | None = None) -> None:
            lag = _ri(rng, 10 * MINUTE, 3 * HOUR) if lag is None else lag
            events.append(Event(len(events), name, ts, max(ts + lag, created), locode, vessel, voyage, terminal,
                                source, value))

        pol_tid = pol_terminal.id if pol_terminal else None
        add(PREFIX + "empty_out", first.atd - _ri(rng, 5 * DAY, 10 * DAY), pol)
        add(PREFIX + "full_in", first.atd - _ri(rng, DAY, 4 * DAY), pol, terminal=pol_tid)
        add(PREFIX + "vessel_loaded", first.atd - _ri(rng, 3 * HOUR, 20 * HOUR), pol, first.vessel, first.voyage,
            pol_tid)
        add(PREFIX + "vessel_departed", first.atd, pol, first.vessel, first.voyage, lag=0)
        for prev, nxt in itertools.pairwise(legs):
            hub = prev.destination
            add(PREFIX + "transshipment_arrived", prev.ata, hub, prev.vessel, prev.voyage, lag=0)
            add(PREFIX + "transshipment_discharged", prev.ata + _ri(rng, 3 * HOUR, 20 * HOUR), hub,
                prev.vessel, prev.voyage)
            add(PREFIX + "transshipment_loaded", nxt.atd - _ri(rng, 3 * HOUR, 20 * HOUR), hub, nxt.vessel,
                nxt.voyage)
            add(PREFIX + "transshipment_departed", nxt.atd, hub, nxt.vessel, nxt.voyage, lag=0)
        ata = last.ata
        add(PREFIX + "vessel_arrived", ata, pod, last.vessel, last.voyage, lag=0, source="ais")
        add(PREFIX + "vessel_berthed", ata + _ri(rng, 20 * MINUTE, 8 * HOUR), pod, last.vessel, last.voyage,
            pod_terminal.id, lag=0, source="ais")
        add(PREFIX + "vessel_discharged", cp.discharged, pod, last.vessel, last.voyage, pod_terminal.id)
        if leg is None or cp.rail is None:
            cp.lfd_terminal = _end_of_local_day(cp.discharged, cp.free_days, cp.tz)
            cp.lfd_line = _end_of_local_day(cp.discharged, cp.free_days + 2, cp.tz) if cp.has_line_lfd else None
            cp.lfd_known = cp.discharged + _ri(rng, HOUR, 8 * HOUR)
            add("container.pickup_lfd.changed", cp.lfd_known, pod, terminal=pod_terminal.id, lag=0,
                source="terminal", value=iso(cp.lfd_line or cp.lfd_terminal))
            add(PREFIX + "available", cp.available, pod, terminal=pod_terminal.id, source="terminal")
            add(PREFIX + "full_out", cp.full_out, pod, terminal=pod_terminal.id)
            add(PREFIX + "empty_in", cp.empty_in, pod)
        else:
            self._rail_events(cp, ident, leg, pod, pod_terminal, add)
        # occasionally a reported milestone is corrected: the first version gets invalidated later
        if rng.random() < 0.12:
            candidates = [e for e in events if e.name.endswith(("full_in", "vessel_loaded", "vessel_discharged",
                                                                 "transshipment_discharged"))]
            bad = candidates[_ri(rng, 0, len(candidates))]
            true_ts = bad.ts
            bad.ts = true_ts + rng.choice((-1, 1)) * _ri(rng, 2 * HOUR, 10 * HOUR)
            bad.known_at = max(min(bad.known_at, true_ts + HOUR), created)
            fix_at = bad.known_at + _ri(rng, 6 * HOUR, 3 * DAY)
            bad.invalidated_at = fix_at
            events.append(Event(len(events), bad.name, true_ts, fix_at, bad.locode, bad.vessel, bad.voyage,
                                bad.terminal, bad.data_source, bad.value, version=1, previous_seq=bad.seq))
        events.sort(key=lambda e: (e.ts, e.seq))
        cp.events = events
        if rng.random() < 0.5:
            cp.appointment = (cp.available, cp.full_out - _ri(rng, 0, 3 * HOUR))
        cp.equipment = _weighted(rng, [e[:3] for e in EQUIPMENT], [e[3] for e in EQUIPMENT])
        cp.weight_lbs = _ri(rng, 8_000, 52_000) if rng.random() < 0.6 else None
        cp.seal = f"{ident.carrier.scac[:2]}{_ri(rng, 10**6, 10**7)}" if rng.random() < 0.5 else None
        cp.demurrage_rate = rng.choice((125, 150, 175, 200, 250, 300))
        cp.exam_fee = rng.choice((350, 450, 600, 850))
        cp.chassis = (f"{rng.choice(('TRAC', 'DCLI', 'FLXZ', 'MCHZ'))}{_ri(rng, 10**5, 10**6)}"
                      if rng.random() < 0.7 else None)
        cp.yard = f"{rng.choice('ABCDEFGH')}{_ri(rng, 1, 40):02d}-{_ri(rng, 1, 60):02d}-{_ri(rng, 1, 6)}"


def _rail_events_impl(factory: ShipmentFactory, cp: ContainerPlan, ident: Identity, leg: inland_mod.InlandLeg,
                      pod: str, pod_terminal: Terminal, add: Callable) -> None:
    """Rail milestones, the ramp's last free day and the pickup at the ramp of an inland container."""
    rail = cp.rail
    assert rail is not None
    irng = rng_for(factory.seed, factory.account, "raildetail", ident.index, cp.ident.slot)
    ramp = leg.terminal_id
    add(PREFIX + "rail_loaded", rail.loaded, pod, terminal=pod_terminal.id, lag=_ri(irng, 20 * MINUTE, 4 * HOUR))
    add(PREFIX + "rail_departed", rail.departed, pod, terminal=pod_terminal.id, lag=_ri(irng, 10 * MINUTE, 2 * HOUR))
    add(PREFIX + "rail_arrived", rail.arrived, leg.locode, terminal=ramp, lag=_ri(irng, 10 * MINUTE, 2 * HOUR))
    add(PREFIX + "rail_unloaded", rail.unloaded, leg.locode, terminal=ramp, lag=_ri(irng, 20 * MINUTE, 3 * HOUR))
    tz = factory.ref.ports[leg.locode].time_zone
    rail.lfd = _end_of_local_day(rail.unloaded, 2, tz)
    rail.lfd_known = rail.unloaded + _ri(irng, HOUR, 6 * HOUR)
    cp.lfd_terminal, cp.lfd_line, cp.lfd_known = rail.lfd, None, rail.lfd_known
    add("container.pickup_lfd_rail.changed", rail.lfd_known, leg.locode, terminal=ramp, lag=0, value=iso(rail.lfd))
    add(PREFIX + "available", cp.available, leg.locode, terminal=ramp, lag=_ri(irng, 10 * MINUTE, 3 * HOUR))
    add(PREFIX + "full_out", cp.full_out, leg.locode, terminal=ramp, lag=_ri(irng, 10 * MINUTE, 3 * HOUR))
    add(PREFIX + "empty_in", cp.empty_in, leg.locode, lag=_ri(irng, 10 * MINUTE, 3 * HOUR))


def _ri(rng: random.Random, lo: int, hi: int) -> int:
    """Fast integer in [lo, hi) (random.randrange is several times slower)."""
    return lo + int(rng.random() * (hi - lo))

TAGS = ("priority", "hot", "seasonal", "promo", "reefer", "hazmat", "retail", "ecommerce")


@lru_cache(maxsize=64)
def stable_offset(*parts: object) -> int:
    """A per-account offset that scatters sequential serial numbers."""
    from .identifiers import stable_int

    return stable_int("offset", *parts) % 1_000_000_000
