"""When a shipment stops being tracked, and why (API-NOTES §7 Lifecycle).

A shipment stops naturally (`all_containers_terminated` once every container is empty-returned, or
`past_arrival_window` 56 days after arrival: the plan's `stopped_at`), early from the seed
(`booking_cancelled`, or `cancelled_by_user` with `line_tracking_stopped_by_user`), or through
`PATCH /shipments/{id}/stop_tracking` (overlay; `resume_tracking` clears it). After an early or
user stop the line is no longer polled, so nothing learnt after the stop is shown ("frozen").
"""

from __future__ import annotations

from typing import NamedTuple

from .identifiers import reference_uuid
from .shipments import Plan
from .store import EARLY_STOP_REASONS, AccountStore


class StopState(NamedTuple):
    """A shipment's tracking stop at an instant."""

    stopped_at: int
    reason: str
    by_user: bool
    frozen: bool          # early/user stop: data learnt after `stopped_at` is not shown


def stop_user_id(store: AccountStore) -> str:
    """Id of the account's (only) user, who stops shipments by hand."""
    return reference_uuid("user", f"{store.seed}:{store.name}")


def stop_state(store: AccountStore, plan: Plan, now: int) -> StopState | None:
    """The stop in force at `now` for `plan`'s shipment, or None while it is tracked."""
    i = plan.ident.index
    items: list[tuple[int, int, StopState | None]] = []
    natural = plan.stopped_at
    items.append((natural, 1, StopState(natural, plan.extra.get("stop_reason", "all_containers_terminated"),
                                        False, False)))
    if i < store.n and store.early_kind[i] > 0:
        at = int(store.early_at[i])
        reason = EARLY_STOP_REASONS[int(store.early_kind[i])]
        items.append((at, 0, StopState(at, reason, reason == "cancelled_by_user", True)))
    for k, (at, action) in enumerate(store.stop_overrides.get(i, ())):
        items.append((at, 2 + k, StopState(at, "cancelled_by_user", True, True) if action == "stop" else None))
    state: StopState | None = None
    for at, order, what in sorted(items, key=lambda x: (x[0], x[1])):
        if at > now:
            break
        if what is None:
            state = None
        elif state is None or (order == 0 and not state.frozen):
            state = what   # a seeded early stop wins over a natural one (the request's status says so)
    return state


def view_time(store: AccountStore, plan: Plan, now: int) -> int:
    """The instant whose knowledge a client sees: `now`, or the stop time of a frozen shipment."""
    st = stop_state(store, plan, now)
    return min(now, st.stopped_at) if st is not None and st.frozen else now


def request_stopped(store: AccountStore, plan: Plan, now: int) -> StopState | None:
    """The early or user stop that puts the shipment's tracking request in `tracking_stopped`."""
    st = stop_state(store, plan, now)
    return st if st is not None and st.frozen else None


def set_tracking(store: AccountStore, index: int, now: int, stop: bool) -> None:
    """Record a stop_tracking (`stop`) or resume_tracking call on shipment `index` at `now`."""
    with store.lock:
        store.stop_overrides.setdefault(index, []).append((now, "stop" if stop else "resume"))
