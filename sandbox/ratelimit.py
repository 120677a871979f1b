"""Per-budget, per-bucket sliding-window-log rate limiter (the service's rolling window), with honest
Retry-After values: after waiting that many seconds, the oldest counted request has left the window."""

from __future__ import annotations

import math
import threading
import time
from collections import deque
from collections.abc import Callable

DETAILS = {
    "default": "Your account has exceeded its API rate limit. Please try again later.",
    "tracking_requests_create": "You've hit the create tracking requests limit. Please try again in a minute.",
    "infer_number": "You've hit the infer number limit. Please try again in a minute.",
    "refresh": "You've hit the refresh limit. Please try again in a minute.",
}


def bucket_detail(bucket: str) -> str:
    """The 429 `detail` wording for a bucket (API-NOTES section 3)."""
    return DETAILS.get(bucket, DETAILS["default"])


class SlidingWindowLimiter:
    """Counts accepted requests per (budget, bucket) in a rolling window of `window` seconds. A budget is
    what `Principal.budget` names: an extra account (its keys share it) or one key of the primary/basic ones.

    Rejected requests are not logged, so a client that honours Retry-After is served on its retry.
    """

    def __init__(self, window: float, limits: dict[str, int], clock: Callable[[], float] = time.monotonic):
        self.window = float(window)
        self.limits = dict(limits)
        self._clock = clock
        self._logs: dict[tuple[str, str], deque[float]] = {}
        self._lock = threading.Lock()

    def hit(self, budget: str, bucket: str) -> int | None:
        """Record one request of `budget`; return None when allowed, else the integer Retry-After (seconds,
        >= 1)."""
        limit = self.limits.get(bucket, self.limits["default"])
        now = self._clock()
        with self._lock:
            log = self._logs.setdefault((budget, bucket), deque())
            while log and log[0] <= now - self.window:
                log.popleft()
            if len(log) < limit:
                log.append(now)
                return None
            wait = log[len(log) - limit] + self.window - now
            return max(1, math.ceil(wait + 1e-3))

    def reset(self) -> None:
        """Forget every counted request (used by tests and `POST /_sandbox/stats/reset`)."""
        with self._lock:
            self._logs.clear()
