"""The simulated clock: the only place where sandbox time flows.

The world never reads the wall clock; the HTTP layer calls `SimClock.now()` once per request and
passes the value down, so world state is a pure function of (seed, overlays, now).
"""

from __future__ import annotations

import threading
import time
from datetime import UTC, datetime, timedelta


class SimClock:
    """Simulated time: `start` + wall-clock elapsed * `speed` + every explicit `advance`."""

    def __init__(self, start: datetime, speed: float = 1.0) -> None:
        """Start the clock at `start` (naive datetimes are taken as UTC) running at `speed`x."""
        if start.tzinfo is None:
            start = start.replace(tzinfo=UTC)
        self._start = start.astimezone(UTC)
        self._speed = float(speed)
        self._t0 = time.monotonic()
        self._advanced = 0.0
        self._lock = threading.Lock()

    def now(self) -> datetime:
        """Current simulated time, tz-aware UTC."""
        with self._lock:
            elapsed = (time.monotonic() - self._t0) * self._speed + self._advanced
        return self._start + timedelta(seconds=elapsed)

    def advance(self, seconds: float) -> datetime:
        """Jump forward by `seconds` of simulated time (negative values are refused) and return now()."""
        if seconds < 0:
            raise ValueError("the simulated clock only moves forward")
        with self._lock:
            self._advanced += float(seconds)
        return self.now()
