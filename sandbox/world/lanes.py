"""Sea-lane geometry between two ports, computed with `searoute` and cached per port pair.

`searoute` returns longitudes beyond +-180 on trans-Pacific routes; geometry is kept *unwrapped*
(continuous) for interpolation and normalised to [-180, 180] only when rendered, so antimeridian
crossings show up as a jump of more than 180 degrees between consecutive coordinates, as the spec
says the live service does. Loading the sea network takes about 2 s, so it happens on first use
(or in `warm_up`), never while a World is being constructed.
"""

from __future__ import annotations

import itertools
import math
import threading
from bisect import bisect_right
from dataclasses import dataclass
from functools import lru_cache

_LOCK = threading.Lock()
EARTH_KM = 6371.0088


def normalize_lon(lon: float) -> float:
    """Longitude folded into [-180, 180]."""
    folded = ((lon + 180.0) % 360.0) - 180.0
    if folded == -180.0 and lon > 0:
        return 180.0
    return folded


def haversine_km(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Great-circle distance in km."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dp, dl = p2 - p1, math.radians(lon2 - lon1)
    a = math.sin(dp / 2) ** 2 + math.cos(p1) * math.cos(p2) * math.sin(dl / 2) ** 2
    return 2 * EARTH_KM * math.asin(min(1.0, math.sqrt(a)))


def bearing_deg(lon1: float, lat1: float, lon2: float, lat2: float) -> float:
    """Initial bearing from point 1 to point 2 in degrees [0, 360)."""
    p1, p2 = math.radians(lat1), math.radians(lat2)
    dl = math.radians(lon2 - lon1)
    x = math.sin(dl) * math.cos(p2)
    y = math.cos(p1) * math.sin(p2) - math.sin(p1) * math.cos(p2) * math.cos(dl)
    return (math.degrees(math.atan2(x, y)) + 360.0) % 360.0


@dataclass(frozen=True)
class Path:
    """An unwrapped polyline with cumulative distances, for interpolation by travelled fraction."""

    coords: tuple[tuple[float, float], ...]   # (lon, lat), lon continuous (may exceed +-180)
    cum_km: tuple[float, ...]

    @property
    def length_km(self) -> float:
        return self.cum_km[-1]

    def point_at(self, fraction: float) -> tuple[float, float, float, int]:
        """(lon, lat, heading, vertex index before the point) at `fraction` of the length."""
        fraction = min(1.0, max(0.0, fraction))
        target = fraction * self.length_km
        i = max(0, min(len(self.coords) - 2, bisect_right(self.cum_km, target) - 1))
        seg = self.cum_km[i + 1] - self.cum_km[i]
        t = 0.0 if seg <= 0 else (target - self.cum_km[i]) / seg
        (x1, y1), (x2, y2) = self.coords[i], self.coords[i + 1]
        lon, lat = x1 + (x2 - x1) * t, y1 + (y2 - y1) * t
        heading = bearing_deg(x1, y1, x2, y2) if (x1, y1) != (x2, y2) else 0.0
        return lon, lat, heading, i

    def split_at(self, fraction: float) -> tuple[list[tuple[float, float]], list[tuple[float, float]]]:
        """Coordinates travelled up to `fraction` and those still ahead; both include the split point."""
        lon, lat, _, i = self.point_at(fraction)
        here = (lon, lat)
        before = [*self.coords[: i + 1], here]
        after = [here, *self.coords[i + 1:]]
        return before, after


def _unwrap(coords: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for lon, lat in coords:
        if out:
            prev = out[-1][0]
            while lon - prev > 180:
                lon -= 360
            while lon - prev < -180:
                lon += 360
        out.append((lon, lat))
    return out


def _dedupe(coords: list[tuple[float, float]]) -> list[tuple[float, float]]:
    out: list[tuple[float, float]] = []
    for c in coords:
        if not out or abs(out[-1][0] - c[0]) > 1e-9 or abs(out[-1][1] - c[1]) > 1e-9:
            out.append(c)
    if len(out) == 1:
        out.append(out[0])
    return out


def make_path(coords: list[tuple[float, float]]) -> Path:
    """A Path from (lon, lat) points: unwraps longitudes and accumulates distances."""
    pts = _dedupe(_unwrap(coords))
    cum = [0.0]
    for (x1, y1), (x2, y2) in itertools.pairwise(pts):
        cum.append(cum[-1] + haversine_km(x1, y1, x2, y2))
    return Path(tuple(pts), tuple(cum))


@lru_cache(maxsize=4096)
def sea_path(a: tuple[float, float], b: tuple[float, float]) -> Path:
    """Sea route from port point `a` to port point `b` ((lon, lat) each), starting/ending at the ports."""
    import searoute  # deferred: loading the network is slow

    with _LOCK:
        try:
            route = searoute.searoute([a[0], a[1]], [b[0], b[1]])
            line = [(float(x), float(y)) for x, y in route["geometry"]["coordinates"]]
        except Exception:  # pragma: no cover - searoute failure: fall back to a straight line
            line = []
    return make_path([a, *line, b])


def warm_up() -> None:
    """Load the searoute network now (about 2 s) instead of on the first map/vessel request."""
    sea_path((121.47, 31.23), (129.04, 35.10))


def concat(paths: list[list[tuple[float, float]]]) -> list[tuple[float, float]]:
    """Join coordinate runs end to start into one continuous (unwrapped) run without duplicates."""
    out: list[tuple[float, float]] = []
    for run in paths:
        run = _unwrap(run)
        if out and run:
            shift = round((out[-1][0] - run[0][0]) / 360.0) * 360.0
            run = [(x + shift, y) for x, y in run]
        out.extend(run)
    return _dedupe(_unwrap(out))


def render(coords: list[tuple[float, float]], digits: int = 5) -> list[list[float]]:
    """GeoJSON coordinates: [lon, lat] with lon normalised to [-180, 180]."""
    return [[round(normalize_lon(x), digits), round(y, digits)] for x, y in coords]
