"""The fleet: vessels running liner services on fixed weekly schedules.

Every service departs its first port once a week; a loop takes `m` weeks, so `m` vessels run it.
Departure number `w` of a service (counted from a fixed epoch) is sailed by vessel `w % m` on its
loop `w // m`. A vessel's position is therefore a pure function of time, and shipment legs carved
out of departure `w` see exactly the vessel and times that `World.get_vessel` reports.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from . import lanes
from .identifiers import make_imo, make_mmsi, reference_uuid, rng_for, stable_int
from .names import VESSEL_PREFIXES, VESSEL_WORDS
from .reference import Reference
from .services import HOP_KM, SERVICES, ServiceDef
from .timeutil import HOUR, MINUTE

WEEK = 7 * 86_400
EPOCH = 1_577_664_000  # 2019-12-30T00:00:00Z, a Monday
KM_PER_NM = 1.852
OUTBOUND_LETTER = {"TP": "E", "AE": "E", "OC": "E", "ME": "W", "TA": "W", "MD": "W", "SA": "N", "CA": "N",
                   "FD": "S", "RL": "S"}
RETURN_LETTER = {"E": "W", "W": "E", "N": "S", "S": "N"}


@dataclass(frozen=True)
class Vessel:
    id: str
    name: str
    imo: str
    mmsi: str
    service: int      # index into Fleet.services
    slot: int         # position among the service's vessels


@dataclass(frozen=True)
class Position:
    lon: float        # unwrapped
    lat: float
    heading: float
    speed_knots: float
    timestamp: int
    hop: int | None   # hop index when at sea, None in port
    loop_start: int
    port_index: int | None  # rotation index when in port


class Schedule:
    """Timetable of one service: offsets of every arrival/departure from the loop start."""

    def __init__(self, index: int, sdef: ServiceDef, ref: Reference) -> None:
        self.index, self.sdef, self.ref = index, sdef, ref
        rot = sdef.rotation
        self.n = len(rot)
        self.hop_s: list[int] = []
        for i in range(self.n):
            a, b = ref.ports[rot[i]], ref.ports[rot[(i + 1) % self.n]]
            gc = lanes.haversine_km(a.longitude, a.latitude, b.longitude, b.latitude)
            km = max(HOP_KM.get((a.locode, b.locode), 0.0), gc * 1.05, 25.0)
            hours = km / KM_PER_NM / sdef.speed_knots
            self.hop_s.append(math.ceil(hours * HOUR / MINUTE) * MINUTE)
        self.stay_s = [(14 + stable_int(sdef.code, p) % 22) * HOUR for p in rot]
        self.arr: list[int] = [0] * self.n
        self.dep: list[int] = [0] * self.n
        t = 0
        for i in range(1, self.n):
            t += self.hop_s[i - 1]
            self.arr[i] = t
            t += self.stay_s[i]
            self.dep[i] = t
        self.back = t + self.hop_s[-1]  # arrival back at rotation[0]
        self.weeks = max(1, math.ceil((self.back + self.stay_s[0]) / WEEK))
        self.period = self.weeks * WEEK
        self.offset = (stable_int("svc-epoch", sdef.code) % (WEEK // MINUTE)) * MINUTE
        letter = OUTBOUND_LETTER.get(sdef.code[:2], "E")
        self.out_letter, self.ret_letter = letter, RETURN_LETTER[letter]

    def loop_start(self, w: int) -> int:
        """Departure time from rotation[0] of global departure number `w`."""
        return EPOCH + self.offset + w * WEEK

    def next_departure(self, port_index: int, not_before: int) -> int:
        """The first departure number whose call at `port_index` leaves at or after `not_before`."""
        return math.ceil((not_before - EPOCH - self.offset - self.dep[port_index]) / WEEK)

    def voyage_number(self, w: int, hop: int) -> str:
        """Voyage number of departure `w`, e.g. "612E"; the closing hop gets the return letter."""
        loop = w // self.weeks
        base = 100 + (stable_int("voy", self.sdef.code, w % self.weeks) + loop) % 900
        return f"{base:03d}{self.ret_letter if hop == self.n - 1 else self.out_letter}"

    def port_point(self, i: int) -> tuple[float, float]:
        """(lon, lat) of rotation port `i` (modulo the rotation length)."""
        p = self.ref.ports[self.sdef.rotation[i % self.n]]
        return (p.longitude, p.latitude)

    def hop_path(self, hop: int) -> lanes.Path:
        """Geometry of hop `hop` (rotation[hop] -> rotation[hop+1])."""
        return lanes.sea_path(self.port_point(hop), self.port_point(hop + 1))

    def where(self, slot: int, t: int) -> tuple[int, int, int | None, int | None, float]:
        """(w, loop_start, hop at sea or None, port index in port or None, fraction of hop) at time t."""
        k = math.floor((t - EPOCH - self.offset - slot * WEEK) / self.period)
        w = slot + k * self.weeks
        start = self.loop_start(w)
        rel = t - start
        if rel < 0:  # pragma: no cover - guarded by the floor above
            rel += self.period
        for i in range(1, self.n):
            if rel < self.arr[i]:
                dep = self.dep[i - 1] if i > 1 else 0
                return w, start, i - 1, None, (rel - dep) / max(1, self.arr[i] - dep)
            if rel < self.dep[i]:
                return w, start, None, i, 0.0
        if rel < self.back:
            dep = self.dep[self.n - 1]
            return w, start, self.n - 1, None, (rel - dep) / max(1, self.back - dep)
        return w, start, None, 0, 0.0


class Fleet:
    """All services with their schedules and vessels; vessel identities come from the world seed."""

    def __init__(self, seed: int, ref: Reference) -> None:
        self.ref = ref
        self.schedules = [Schedule(i, s, ref) for i, s in enumerate(SERVICES)]
        self.by_code = {s.sdef.code: s for s in self.schedules}
        self.vessels: list[list[Vessel]] = []
        used: set[str] = set()
        rng = rng_for(seed, "fleet")
        for sched in self.schedules:
            fmt = VESSEL_PREFIXES.get(sched.sdef.operator, "{}")
            vs = []
            for slot in range(sched.weeks):
                name = ""
                while not name or name in used:
                    name = fmt.format(rng.choice(VESSEL_WORDS))
                    if name in used and rng.random() < 0.3:
                        name = f"{name} {rng.choice(['I', 'II', 'III', 'IV'])}"
                used.add(name)
                vid = reference_uuid("vessel", f"{seed}:{sched.sdef.code}:{slot}")
                vs.append(Vessel(vid, name, make_imo(rng), make_mmsi(rng), sched.index, slot))
            self.vessels.append(vs)

    @cached_property
    def by_key(self) -> dict[str, Vessel]:
        """Vessels by id and by IMO."""
        out: dict[str, Vessel] = {}
        for vs in self.vessels:
            for v in vs:
                out[v.id] = v
                out[v.imo] = v
        return out

    def find(self, id_or_imo: str) -> Vessel | None:
        """A vessel by UUID or IMO number."""
        return self.by_key.get(str(id_or_imo).strip().lower()) or self.by_key.get(str(id_or_imo).strip())

    def vessel_for(self, sched: Schedule, w: int) -> Vessel:
        """The vessel sailing departure `w` of a service."""
        return self.vessels[sched.index][w % sched.weeks]

    def position_time(self, v: Vessel, now: int) -> int:
        """Timestamp of the latest AIS fix at `now`: the 15-minute refresh grid, but never before the
        last departure (so a vessel that just sailed is reported at sea, not still alongside)."""
        sched = self.schedules[v.service]
        fix = now - (now % 900) - stable_int("ais", v.id) % 240
        _, start, hop, _, _ = sched.where(v.slot, now)
        if hop is not None:
            dep = start + (sched.dep[hop] if hop > 0 else 0)
            fix = max(fix, dep)
        return min(fix, now)

    def position(self, v: Vessel, now: int) -> Position:
        """Where vessel `v` was at its latest fix before `now`, with speed and heading."""
        sched = self.schedules[v.service]
        ts = self.position_time(v, now)
        w, start, hop, port_i, frac = sched.where(v.slot, ts)
        if hop is None:
            lon, lat = sched.port_point(port_i or 0)
            return Position(lon, lat, float(stable_int("hdg", v.id, w) % 360), 0.0, ts, None, start, port_i)
        path = sched.hop_path(hop)
        lon, lat, heading, _ = path.point_at(frac)
        hours = sched.hop_s[hop] / HOUR
        knots = path.length_km / KM_PER_NM / hours if hours else 0.0
        return Position(lon, lat, round(heading), round(knots, 1), ts, hop, start, None)

    def vessel_resource(self, v: Vessel, now: int) -> dict:
        """A `vessel` resource like the live capture, with the position at `now`."""
        from .timeutil import iso

        pos = self.position(v, now)
        return {
            "id": v.id, "type": "vessel",
            "attributes": {
                "name": v.name, "imo": v.imo, "mmsi": v.mmsi,
                "latitude": round(pos.lat, 6), "longitude": round(lanes.normalize_lon(pos.lon), 6),
                "nautical_speed_knots": pos.speed_knots, "navigational_heading_degrees": pos.heading,
                "position_timestamp": iso(pos.timestamp),
            },
        }
