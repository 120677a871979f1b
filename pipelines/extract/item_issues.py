"""Per-item requests that still fail after their retries: recorded in `sync_issues`, skipped, retried.

A sync fetches some things one item at a time: a container's route map and its transport events, a
terminal, port or vessel by id. One of those failing for days (the service answers 500 for one map, or a
proxy's HTML 404) must not stop the account. So the item is skipped, everything else loads, and the
failure becomes a row of the `sync_issues` table: resource, item id, HTTP status, message, first seen,
last seen, attempts. Every later sync tries the item again. When it succeeds, dlt deletes the row through
its `hard_delete` merge hint, so the table lists only what is broken now.

Some failures mean the sync itself is wrong, and those are never isolated:
- a rejected key (401) or a refusal (403; the map code turns a missing routing entitlement into "maps
  off");
- the rate budget exhausted (429 after every retry);
- no response at all (the service hangs: each request already waited out its deadline);
- more than 5 % of a resource's items failing in one sync. The floor is two items, so one broken map
  does not stop a small account. In that case the sync loads what arrived and then fails, with one line;
- `MAX_FAILURES_IN_A_ROW` new failures in a row: the service is down, and asking every other item
  would spend the better part of a minute of retries on each. The sync fails at once, committing nothing.

An item that already failed the last sync (an open issue) is asked again with `OPEN_ITEM_ATTEMPTS`
attempts, not the full retries: it costs a request or two a sync until it answers.

The open issues live in the source state, which dlt commits with the load, so a killed sync changes
nothing. This sync's tallies are stored under its load id, so `issues_of_load` can tell them from an
older run's.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import dlt

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import (
    ApiError,
    AuthenticationError,
    AuthorizationError,
    NoResponseError,
    PipelineError,
    RateLimitedError,
)
from pipelines.extract.routing import routed_rows

logger = logging.getLogger(__name__)

TABLE = "sync_issues"
STATE_KEY = "item_issues"
MAX_FAILED_SHARE = 0.05
TOLERATED_FAILURES = 2
MAX_FAILURES_IN_A_ROW = 5
OPEN_ITEM_ATTEMPTS = 2
# Errors that mean the sync is wrong, not the item: never isolated.
FATAL = (AuthenticationError, AuthorizationError, RateLimitedError, NoResponseError)

COLUMNS: dict[str, dict[str, Any]] = {
    "resource": {"data_type": "text", "nullable": False},
    "item_id": {"data_type": "text", "nullable": False},
    "http_status": {"data_type": "bigint", "nullable": True},
    "error": {"data_type": "text", "nullable": True},
    "message": {"data_type": "text", "nullable": True},
    "first_seen_at": {"data_type": "timestamp", "nullable": True},
    "last_seen_at": {"data_type": "timestamp", "nullable": True},
    # syncs that tried the item and failed, each after its own retries
    "attempts": {"data_type": "bigint", "nullable": True},
    "resolved": {"data_type": "bool", "nullable": True, "hard_delete": True},
}

T = TypeVar("T")


class ItemIssues:
    """Runs one sync's per-item requests and keeps the record of those that fail.

    Build one per source, so one per run. Resources call `fetch` for each per-item request, `cover` for
    the items of the account they went through, and yield `pending()` to load the rows that changed."""

    def __init__(self, client: OceanTrackingClient) -> None:
        self._client = client
        self._rows: list[dict[str, Any]] = []
        self._failed_now: set[str] = set()
        self._covered_ids: dict[str, set[str]] = {}
        self._failures_in_a_row = 0

    def fetch(self, resource: str, item_id: str, request: Callable[..., T], *args: Any) -> T | None:
        """Run `request(*args)` for one item. If it fails in a way that can be isolated, record the failure and
        return None, so the caller skips the item. An item that already failed in this sync is not asked
        for again, because it has used its retries."""
        key = _key(resource, item_id)
        if key in self._failed_now:
            return None
        known = key in self._state()["open"]
        try:
            with self._client.attempts_at_most(OPEN_ITEM_ATTEMPTS) if known else nullcontext():
                result = request(*args)
        except FATAL:
            raise
        except ApiError as error:
            self._record_failure(resource, item_id, error)
            if not known:
                self._failures_in_a_row += 1
                if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
                    raise TooManyItemFailuresError(
                        f"{resource}: the last {self._failures_in_a_row} item requests failed in a row after their "
                        f"retries ({str(error).splitlines()[0]}): the service looks down. Nothing of this sync "
                        "was committed; try again later."
                    ) from None
            return None
        self._failures_in_a_row = 0
        opened = self._state()["open"].pop(key, None)
        if opened is not None:
            logger.info("%s %s fetched again after %d failed sync(s)", resource, item_id, opened["attempts"])
            self._rows.append({"resource": resource, "item_id": item_id, "resolved": True})
        return result

    def cover(self, resource: str, ids: Iterable[str]) -> None:
        """Count the distinct items of `resource` this sync went through: the denominator of the failure
        share (for terminals, ports and vessels, the ids the pages named)."""
        seen = self._covered_ids.setdefault(resource, set())
        seen.update(ids)
        self._tallies()["covered"][resource] = len(seen)

    def cover_count(self, resource: str, count: int) -> None:
        """Count `count` more items that are distinct by construction (a container is on one page only), so
        the ids need not be kept in memory."""
        covered = self._tallies()["covered"]
        covered[resource] = covered.get(resource, 0) + count

    def pending(self) -> list[Any]:
        """The `sync_issues` rows recorded since the last call, as one item routed to that table (or none)."""
        if not self._rows:
            return []
        rows, self._rows = self._rows, []
        return [routed_rows(rows, TABLE, ("resource", "item_id"), COLUMNS)]

    def _record_failure(self, resource: str, item_id: str, error: ApiError) -> None:
        key = _key(resource, item_id)
        self._failed_now.add(key)
        now = datetime.now(UTC)
        previous = self._state()["open"].get(key)
        entry = {
            "resource": resource,
            "item_id": item_id,
            "http_status": error.status,
            "error": type(error).__name__,
            "message": str(error).splitlines()[0],
            "first_seen_at": previous["first_seen_at"] if previous else now.isoformat(),
            "last_seen_at": now.isoformat(),
            "attempts": (previous["attempts"] if previous else 0) + 1,
        }
        self._state()["open"][key] = entry
        failed = self._tallies()["failed"]
        failed[resource] = failed.get(resource, 0) + 1
        self._rows.append({**entry, "resolved": False})
        logger.info(  # the load's summary warns once for all of them
            "%s %s skipped after retries (%s); recorded in %s, the next sync tries again",
            resource, item_id, entry["message"], TABLE,
        )

    def _state(self) -> dict[str, Any]:
        return dlt.current.source_state().setdefault(STATE_KEY, {"open": {}, "sync": {}})

    def _tallies(self) -> dict[str, Any]:
        """This sync's counts, kept under its load id (a new load id starts them afresh)."""
        load_id = dlt.current.load_package_state()["load_id"]
        state = self._state()
        if state["sync"].get("load_id") != load_id:
            state["sync"] = {"load_id": load_id, "covered": {}, "failed": {}}
        return state["sync"]


def _key(resource: str, item_id: str) -> str:
    return f"{resource}/{item_id}"


@dataclass(frozen=True)
class ItemIssuesReport:
    """What a load left in `sync_issues`: the items failing now, and this sync's failures per resource."""

    open: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    covered: dict[str, int] = field(default_factory=dict)

    def excessive(self) -> list[str]:
        """The resources whose failures in this sync are more than the tolerated share, each as a phrase."""
        out = []
        for resource, failed in sorted(self.failed.items()):
            items = max(self.covered.get(resource, 0), failed)
            if failed > max(TOLERATED_FAILURES, MAX_FAILED_SHARE * items):
                out.append(f"{resource}: {failed} of {items} items failed")
        return out

    def warning(self) -> str | None:
        """One line on the items skipped, or None when there are none."""
        if not self.open:
            return None
        first = self.open[0]
        more = f" and {len(self.open) - 1} more" if len(self.open) > 1 else ""
        return (
            f"{len(self.open)} item(s) skipped after retries, listed in {TABLE}: {first['resource']} "
            f"{first['item_id']} ({first['message']}){more}. Every other row loaded; the next sync tries "
            "them again."
        )


def issues_of_load(source_state: dict[str, Any], load_ids: Iterable[str]) -> ItemIssuesReport:
    """Read the issues from the source state that a load committed. This sync's tallies count only if
    they were taken under one of `load_ids`, the loads this run made."""
    state = source_state.get(STATE_KEY) or {}
    opened = sorted(state.get("open", {}).values(), key=lambda entry: (entry["resource"], entry["item_id"]))
    tallies = state.get("sync") or {}
    if tallies.get("load_id") not in set(load_ids):
        return ItemIssuesReport(open=opened)
    return ItemIssuesReport(opened, dict(tallies.get("failed", {})), dict(tallies.get("covered", {})))


class TooManyItemFailuresError(PipelineError):
    """More per-item requests failed in one sync than an isolated fault explains: the service, or the
    sync, is broken. Raised after what did arrive was loaded."""


def raise_if_excessive(report: ItemIssuesReport) -> None:
    """Fail the sync, in one line, when a resource's failures in it are above the tolerated share."""
    excessive = report.excessive()
    if excessive:
        raise TooManyItemFailuresError(
            f"{'; '.join(excessive)}: more than {MAX_FAILED_SHARE:.0%} of the items, so the service or the "
            f"sync is broken. Everything that arrived is loaded and the failures are listed in {TABLE}; check "
            "the service's status, then sync again."
        )
