"""Time helpers: the world computes in integer epoch seconds and renders ISO-8601 UTC with `Z`."""

from __future__ import annotations

import time
from datetime import UTC, datetime

DAY = 86_400
HOUR = 3_600
MINUTE = 60


def to_epoch(dt: datetime) -> int:
    """Whole epoch seconds of a datetime (naive datetimes are taken as UTC)."""
    if dt.tzinfo is None:
        dt = dt.replace(tzinfo=UTC)
    return int(dt.timestamp())


def iso(ts: float | None) -> str | None:
    """ISO-8601 UTC with a `Z` suffix and whole seconds, as the live service renders timestamps."""
    if ts is None:
        return None
    t = time.gmtime(int(ts))
    return f"{t.tm_year:04d}-{t.tm_mon:02d}-{t.tm_mday:02d}T{t.tm_hour:02d}:{t.tm_min:02d}:{t.tm_sec:02d}Z"


def parse_iso(value: str | datetime | None) -> int | None:
    """Epoch seconds of an ISO-8601 string or datetime (used by tracking-request date filters)."""
    if value is None:
        return None
    if isinstance(value, datetime):
        return to_epoch(value)
    text = value.strip().replace("Z", "+00:00")
    dt = datetime.fromisoformat(text)
    return to_epoch(dt)


def at_or_before(ts: float | None, now: int) -> float | None:
    """`ts` when it has happened by `now`, else None: the basic reveal rule of the timeline."""
    return ts if ts is not None and ts <= now else None
