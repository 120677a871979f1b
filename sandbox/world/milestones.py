"""A container's milestone as known at a moment: the one lookup the rendering, the inland leg and the raw
events share (its own module, so the inland leg can use it without importing the rendering back)."""

from __future__ import annotations

from typing import Any

PREFIX = "container.transport."


def milestone(cp: Any, name: str, now: int) -> int | None:
    """Timestamp of the currently valid version of a container milestone known by `now` (`cp`: a
    `shipments.ContainerPlan`, not imported: the plans import this module)."""
    full = PREFIX + name
    for e in reversed(cp.events):
        if e.name == full and e.known_at <= now and not (e.invalidated_at is not None and e.invalidated_at <= now):
            return e.ts
    return None
