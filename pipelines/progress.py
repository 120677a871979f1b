"""A live terminal line while a sync runs: requests spent per bucket, time waited for budget, 429s."""

from __future__ import annotations

import threading
from collections.abc import Callable
from contextlib import contextmanager
from typing import Any

from rich.console import Console
from rich.live import Live
from rich.text import Text


def describe_stats(stats: dict[str, Any]) -> str:
    """One line from `OceanTrackingClient.stats()`: what the budget went on so far."""
    buckets = stats.get("requests") or {}
    spent = ", ".join(f"{name} {count}" for name, count in sorted(buckets.items())) or "none yet"
    waited = sum((stats.get("wait_seconds") or {}).values())
    return (
        f"requests: {spent} | waited for budget {waited:.1f}s | "
        f"retries {stats.get('retries', 0)} | 429s {stats.get('responses_429', 0)}"
    )


@contextmanager
def live_stats(read_stats: Callable[[], dict[str, Any]], console: Console | None = None, enabled: bool = True):
    """Refresh a status line from `read_stats` twice a second until the block ends."""
    if not enabled:
        yield
        return
    console = console or Console(stderr=True)
    stop = threading.Event()
    with Live(Text("starting…"), console=console, refresh_per_second=4, transient=True) as live:

        def refresh() -> None:
            while not stop.wait(0.5):
                live.update(Text(describe_stats(read_stats())))

        thread = threading.Thread(target=refresh, name="sync-progress", daemon=True)
        thread.start()
        try:
            yield
        finally:
            stop.set()
            thread.join(2)
