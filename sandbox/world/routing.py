"""Import routes: chains of service legs from a foreign port of lading to a US port of discharge.

Routes are enumerated once from the service rotations: direct (one leg), one transshipment
(feeder/relay into a mainline) and two transshipments. A shipment picks a route template, then its
legs are carved out of concrete departures of those services (see `carve_legs`).
"""

from __future__ import annotations

import random
from dataclasses import dataclass
from functools import cached_property

from .fleet import Fleet, Schedule, Vessel
from .timeutil import DAY, HOUR


@dataclass(frozen=True)
class LegTemplate:
    service: int
    a: int  # rotation index of the departure port
    b: int  # rotation index of the arrival port


@dataclass(frozen=True)
class Leg:
    sched: Schedule
    a: int
    b: int
    w: int              # departure number of the service
    vessel: Vessel
    voyage: str
    atd: int            # actual departure from rotation[a]
    ata: int            # actual arrival at rotation[b]

    @property
    def origin(self) -> str:
        return self.sched.sdef.rotation[self.a]

    @property
    def destination(self) -> str:
        return self.sched.sdef.rotation[self.b]

    @property
    def loop_start(self) -> int:
        return self.sched.loop_start(self.w)


class RouteBook:
    """All route templates by number of legs, built from the fleet's schedules."""

    def __init__(self, fleet: Fleet) -> None:
        self.fleet = fleet

    @cached_property
    def templates(self) -> dict[int, list[tuple[LegTemplate, ...]]]:
        ref = self.fleet.ref
        scheds = self.fleet.schedules
        us = {code for code, p in ref.ports.items() if p.is_us and ref.terminals_by_port.get(code)}

        def legs_from(s: Schedule, a_code: str | None = None):
            rot = s.sdef.rotation
            for a in range(len(rot)):
                if a_code is not None and rot[a] != a_code:
                    continue
                if ref.ports[rot[a]].is_us:
                    continue
                for b in range(a + 1, len(rot)):
                    yield a, b

        direct, one, two = [], [], []
        for s in scheds:
            for a, b in legs_from(s):
                if s.sdef.rotation[b] in us:
                    direct.append((LegTemplate(s.index, a, b),))
        for s1 in scheds:
            for a, h in legs_from(s1):
                hub = s1.sdef.rotation[h]
                if ref.ports[hub].is_us:
                    continue
                origin = s1.sdef.rotation[a]
                for s2 in scheds:
                    if s2 is s1 or hub not in s2.sdef.rotation or origin in s2.sdef.rotation:
                        continue
                    for a2, b2 in legs_from(s2, hub):
                        dest = s2.sdef.rotation[b2]
                        if dest in us:
                            one.append((LegTemplate(s1.index, a, h), LegTemplate(s2.index, a2, b2)))
                        elif not ref.ports[dest].is_us:
                            for s3 in scheds:
                                if s3 in (s1, s2) or dest not in s3.sdef.rotation:
                                    continue
                                if origin in s3.sdef.rotation or hub in s3.sdef.rotation:
                                    continue
                                for a3, b3 in legs_from(s3, dest):
                                    if s3.sdef.rotation[b3] in us:
                                        two.append((LegTemplate(s1.index, a, h), LegTemplate(s2.index, a2, b2),
                                                    LegTemplate(s3.index, a3, b3)))
        return {1: direct, 2: one, 3: two}

    def pick(self, rng: random.Random) -> tuple[LegTemplate, ...]:
        """A route template: 60% direct, 30% one transshipment, 10% two."""
        r = rng.random()
        n = 1 if r < 0.6 else 2 if r < 0.9 else 3
        pool = self.templates[n] or self.templates[1]
        return pool[rng.randrange(len(pool))]

    def carve_legs(self, route: tuple[LegTemplate, ...], ready: int, rng: random.Random) -> list[Leg]:
        """Concrete legs: the first departure after `ready`, then the first connection after each
        arrival plus a minimum connection time, each on the vessel sailing that departure."""
        legs: list[Leg] = []
        t = ready
        for tmpl in route:
            sched = self.fleet.schedules[tmpl.service]
            w = sched.next_departure(tmpl.a, t)
            if rng.random() < 0.12:
                w += 1  # rolled to the next sailing
            start = sched.loop_start(w)
            atd = start + sched.dep[tmpl.a]
            ata = start + sched.arr[tmpl.b]
            legs.append(Leg(sched, tmpl.a, tmpl.b, w, self.fleet.vessel_for(sched, w),
                            sched.voyage_number(w, tmpl.a), atd, ata))
            t = ata + DAY + rng.randrange(0, 12) * HOUR
        return legs
