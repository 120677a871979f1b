"""The account's change feed: every world change that becomes visible through the API in a time window,
in time order, for the HTTP layer's webhooks (pure: no HTTP, no clock, no wall time).

A change is a transport event becoming known (its own event name, one per container), a POD ETA revision
becoming known (`shipment.estimated.arrival`), a container's terminal attributes changing
(`container.updated` with a `{field: [previous, current]}` changeset), or a tracking request resolving
(`tracking_request.succeeded` / `.failed` / `.awaiting_manifest`) or stopping (`.tracking_stopped`).
What is already known when a shipment appears is its initial state, not a change.

The seeded rows' changes are gathered once per account into numpy arrays sorted by
(time, kind, shipment or request index, container slot, seq) (a couple of seconds at 10k shipments); a
window is then two binary searches. Overlays are read live at every call: API-created requests and their
shipments (rows cached per request: their plans never change), and stop/resume overrides (which freeze
or unfreeze what a shipment shows). Changes learnt while a shipment was frozen are not replayed on resume.
"""

from __future__ import annotations

import threading
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from .milestones import milestone
from .render import latest_estimate
from .shipments import ContainerPlan, Plan
from .stops import request_stopped, view_time
from .store import NEVER, AccountStore
from .timeutil import iso

# kinds, in their order within one second
TRACKING_REQUEST, TRANSPORT_EVENT, CONTAINER_UPDATED, ESTIMATED = 0, 1, 2, 3
KIND_NAMES = ("tracking_request", "transport_event", "container_updated_event", "estimated_event")
SUCCEEDED, FAILED, AWAITING, STOPPED = (f"tracking_request.{s}" for s in
                                        ("succeeded", "failed", "awaiting_manifest", "tracking_stopped"))
UPDATED, ETA = "container.updated", "shipment.estimated.arrival"
STATE_MILESTONES = ("vessel_arrived", "full_out", "rail_loaded", "available")


@dataclass(frozen=True)
class Change:
    """One change visible from `at` (epoch seconds). `kind` names the notification's reference object type;
    `shipment`/`slot`/`seq` locate it (seq: transport event seq or ETA revision index); `tracking_request` is
    the request index for request events; `changeset` ({field: [previous, current]}) for container.updated;
    `estimate` (epoch seconds) for shipment.estimated.arrival."""

    at: int
    event: str
    kind: str
    shipment: int | None = None
    slot: int | None = None
    seq: int | None = None
    tracking_request: int | None = None
    changeset: dict | None = None
    estimate: int | None = None

    @property
    def key(self) -> str:
        """A stable identity for the change (notification ids derive from it)."""
        return f"{self.kind}:{self.event}:{self.at}:{self.shipment}:{self.slot}:{self.seq}:{self.tracking_request}"


def terminal_state(cp: ContainerPlan, t: int) -> dict:
    """The container attributes that `container.updated` reports, as `render.container_resource` shows
    them at `t` (holds, availability, coalesced LFD, pickup appointment)."""
    arrived, out = milestone(cp, "vessel_arrived", t), milestone(cp, "full_out", t)
    at_terminal = arrived is not None and out is None and not (cp.rail is not None and milestone(cp, "rail_loaded", t))
    holds = [{"name": h.name, "status": h.status, "description": h.description}
             for h in cp.holds if at_terminal and h.appear <= t < h.clear]
    return {
        "available_for_pickup": None if arrived is None else bool(milestone(cp, "available", t)) and out is None,
        "pickup_lfd": iso(cp.lfd_line or cp.lfd_terminal) if t >= cp.lfd_known else None,
        "holds_at_pod_terminal": holds,
        "pickup_appointment_at": iso(cp.appointment[1]) if cp.appointment and t >= cp.appointment[0] else None,
    }


def changeset(cp: ContainerPlan, t: int) -> dict:
    """`{field: [previous, current]}` of the terminal attributes that changed at `t`."""
    before, after = terminal_state(cp, t - 1), terminal_state(cp, t)
    return {k: [before[k], after[k]] for k in after if before[k] != after[k]}


class _Rows:
    """Column lists of change rows (time, kind, index, slot, seq, event-name code)."""

    def __init__(self, names: dict[str, int]) -> None:
        self.names = names
        self.cols: tuple[list[int], ...] = ([], [], [], [], [], [])

    def add(self, at: int, kind: int, index: int, slot: int, seq: int, event: str) -> None:
        code = self.names.setdefault(event, len(self.names))
        for col, v in zip(self.cols, (at, kind, index, slot, seq, code), strict=True):
            col.append(v)

    def shipment(self, plan: Plan, created: int) -> None:
        """Rows of one shipment's transport events, POD ETA revisions and terminal attribute changes."""
        i = plan.ident.index
        for slot, cp in enumerate(plan.containers):
            cp.detail()
            points = set()
            for e in cp.events:
                if e.known_at > created:
                    self.add(e.known_at, TRANSPORT_EVENT, i, slot, e.seq, e.name)
                if e.name.rsplit(".", 1)[-1] in STATE_MILESTONES:
                    points.add(e.known_at)
                    if e.invalidated_at is not None:
                        points.add(e.invalidated_at)
            points.update(p for h in cp.holds for p in (h.appear, h.clear))
            points.add(cp.lfd_known)
            if cp.appointment:
                points.add(cp.appointment[0])
            prev = terminal_state(cp, created)
            for t in sorted(p for p in points if p > created):
                cur = terminal_state(cp, t)
                if cur != prev:
                    self.add(t, CONTAINER_UPDATED, i, slot, 0, UPDATED)
                prev = cur
        revs = plan.eta_revisions[-1]
        for r, (known, _est) in enumerate(revs):
            last_of_second = r + 1 == len(revs) or revs[r + 1][0] != known
            if known > created and last_of_second and latest_estimate(revs, known) != latest_estimate(revs, known - 1):
                self.add(known, ESTIMATED, i, -1, r, ETA)

    def arrays(self) -> tuple[np.ndarray, ...]:
        """The columns as numpy arrays sorted by (time, kind, index, slot, seq)."""
        cols = [np.asarray(c, dtype=np.int64) for c in self.cols]
        order = np.lexsort((cols[4], cols[3], cols[2], cols[1], cols[0]))
        return tuple(c[order] for c in cols)


class ChangeIndex:
    """The seeded rows' changes of one account, sorted by time, plus per-request rows of API shipments."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store
        self.names: dict[str, int] = {}
        rows = _Rows(self.names)
        n = store.n
        factory = store.factory
        for i in range(n):  # uncached plans: building the index must not evict the API's working set
            rows.shipment(factory._plan(store.seeded_identity(i)), int(store.created[i]))
        for tr in range(store.seeded_tr_count):
            if int(store.tr_awaiting[tr]) != NEVER:
                rows.add(int(store.tr_awaiting[tr]), TRACKING_REQUEST, tr, -1, 0, AWAITING)
            rows.add(int(store.tr_resolve[tr]), TRACKING_REQUEST, tr, -1, 1, SUCCEEDED if tr < n else FAILED)
            if tr < n and int(store.early_at[tr]) != NEVER:
                rows.add(int(store.early_at[tr]), TRACKING_REQUEST, tr, -1, 2, STOPPED)
        self.time, self.kind, self.index, self.slot, self.seq, self.code = rows.arrays()
        self.frozen_from = store.early_at.copy()   # a seeded early stop hides what is learnt after it
        self.event_names = sorted(self.names, key=self.names.__getitem__)
        self._api: dict[int, tuple[np.ndarray, ...]] = {}
        self._lock = threading.Lock()

    def api_rows(self, k: int) -> tuple[np.ndarray, ...]:
        """Rows of the shipment of API request `k` (built once: its plan is fixed once created)."""
        with self._lock:
            hit = self._api.get(k)
        if hit is None:
            store = self.store
            i = store.n + k
            rows = _Rows(self.names)
            rows.shipment(store.plan(i), store.identity(i).created_at)
            hit = rows.arrays()
            with self._lock:
                self.event_names = sorted(self.names, key=self.names.__getitem__)
                self._api[k] = hit
        return hit


_INDEXES: weakref.WeakKeyDictionary[AccountStore, ChangeIndex] = weakref.WeakKeyDictionary()
_INDEX_LOCK = threading.Lock()


def index_for(account: Any) -> ChangeIndex:
    """The account's change index, built on first use (once, even under concurrent callers)."""
    store = account.store
    with _INDEX_LOCK:
        idx = _INDEXES.get(store)
        if idx is None:
            idx = _INDEXES[store] = ChangeIndex(store)
    return idx


def _window(cols: tuple[np.ndarray, ...], t0: float, t1: float) -> list[tuple[int, ...]]:
    time = cols[0]
    lo, hi = np.searchsorted(time, t0, side="right"), np.searchsorted(time, t1, side="right")
    return list(zip(*(c[lo:hi].tolist() for c in cols), strict=True))


def changes_between(account: Any, t0: float, t1: float) -> list[Change]:
    """Every change of `account` that becomes visible in (t0, t1] (epoch seconds), in time order
    (then kind, index, slot, seq): deterministic for the same world, overlays and window."""
    if t1 <= t0:
        return []
    idx = index_for(account)
    store = idx.store
    n, stopped = store.n, dict(store.stop_overrides)
    out: list[tuple[int, ...]] = []
    for row in _window((idx.time, idx.kind, idx.index, idx.slot, idx.seq, idx.code), t0, t1):
        at, kind, i = row[0], row[1], row[2]
        if kind == TRACKING_REQUEST:
            if not (row[4] == 2 and i in stopped):   # a stopped shipment's stops are read live below
                out.append(row)
        elif i in stopped:
            if _unfrozen(store, i, at):
                out.append(row)
        elif at <= idx.frozen_from[i]:
            out.append(row)
    for k, req in enumerate(list(store.api_requests)):
        tr = store.seeded_tr_count + k
        awaiting = req.extra.get("awaiting_from")
        if awaiting is not None and t0 < awaiting <= t1 and awaiting < req.resolve_at:
            out.append((awaiting, TRACKING_REQUEST, tr, -1, 0, idx.names.setdefault(AWAITING, len(idx.names))))
        if t0 < req.resolve_at <= t1:
            name = SUCCEEDED if req.outcome == "created" else FAILED
            out.append((req.resolve_at, TRACKING_REQUEST, tr, -1, 1, idx.names.setdefault(name, len(idx.names))))
        if req.outcome == "created" and req.resolve_at < t1:
            i = n + k
            out.extend(r for r in _window(idx.api_rows(k), t0, t1) if i not in stopped or _unfrozen(store, i, r[0]))
    for i, moves in stopped.items():
        out.extend(_stop_rows(idx, i, [at for at, _ in moves], t0, t1))
    out.sort()
    names = sorted(idx.names, key=idx.names.__getitem__)
    return [_change(store, row, names) for row in out]


def _unfrozen(store: AccountStore, i: int, at: int) -> bool:
    """Whether shipment `i` shows what is learnt at `at` (not frozen by an early or user stop then)."""
    return view_time(store, store.plan(i), at) >= at


def _stop_rows(idx: ChangeIndex, i: int, moves: list[int], t0: float, t1: float) -> list[tuple[int, ...]]:
    """tracking_stopped rows of a shipment with stop/resume overrides: each instant its request turns
    tracking_stopped (seeded early stop or user stop) within the window."""
    store = idx.store
    early = int(store.early_at[i]) if i < store.n else NEVER
    if not store.shipment_visible(i, int(t1)):
        return []
    plan = store.plan(i)
    tr = i if i < store.n else store.seeded_tr_count + (i - store.n)
    code = idx.names.setdefault(STOPPED, len(idx.names))
    rows = []
    for at in sorted({*moves, early}):
        if at != NEVER and t0 < at <= t1 and request_stopped(store, plan, at - 1) is None \
                and request_stopped(store, plan, at) is not None:
            rows.append((at, TRACKING_REQUEST, tr, -1, 2, code))
    return rows


def _change(store: AccountStore, row: tuple[int, ...], names: list[str]) -> Change:
    at, kind, index, slot, seq, code = row
    event = names[code]
    if kind == TRACKING_REQUEST:
        ship = index if index < store.n else None
        if index >= store.seeded_tr_count:
            req = store.api_requests[index - store.seeded_tr_count]
            ship = req.shipment_index if req.outcome == "created" else None
        return Change(at, event, KIND_NAMES[kind], shipment=ship, tracking_request=index)
    plan = store.plan(index)
    if kind == CONTAINER_UPDATED:
        return Change(at, event, KIND_NAMES[kind], index, slot, None,
                      changeset=changeset(plan.containers[slot].detail(), at))
    if kind == ESTIMATED:
        return Change(at, event, KIND_NAMES[kind], index, None, seq,
                      estimate=latest_estimate(plan.eta_revisions[-1], at))
    return Change(at, event, KIND_NAMES[kind], index, slot, seq)


def latest_change(account: Any, event: str, now: float) -> Change | None:
    """The newest seeded change named `event` visible by `now` (example payloads), or None."""
    idx = index_for(account)
    code = idx.names.get(event)
    if code is None:
        return None
    cols = (idx.time, idx.kind, idx.index, idx.slot, idx.seq, idx.code)
    hi = int(np.searchsorted(idx.time, now, side="right"))
    for j in np.nonzero(idx.code[:hi] == code)[0][::-1][:64].tolist():
        row = tuple(int(c[j]) for c in cols)
        if row[1] == TRACKING_REQUEST or row[0] <= idx.frozen_from[row[2]]:
            return _change(idx.store, row, sorted(idx.names, key=idx.names.__getitem__))
    return None
