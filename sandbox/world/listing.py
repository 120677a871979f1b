"""The list views of one account: shipments, containers, tracking requests and parties, newest first
and filtered like the live list endpoints, as lazy sequences of resources rendered at `now`.

API-created rows (few) come first and are evaluated one by one; the seeded rows follow in their
precomputed order, filtered on the numpy arrays or through the search index.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import render
from .lifecycle import STATUS_CODES, api_state, seeded_states
from .search import SEP, AccountSearch
from .stops import stop_state
from .store import AccountStore, LazySeq
from .timeutil import parse_iso


def shipments(store: AccountStore, search: AccountSearch, t: int, *, q: str | None = None,
              number: str | None = None, tracking_stopped: bool | None = None) -> Sequence[dict]:
    """Shipments newest first; `q` searches BL, ref and container numbers (substring, case-
    insensitive); `number` matches the tracking request number exactly (case-insensitive);
    `tracking_stopped` (`filter[tracking_stopped]`) keeps stopped (True) or still tracked (False) ones."""
    api = store.api_shipments(t)
    if tracking_stopped is not None:
        if q or number:
            base = list(search.matching_shipments(t, q=q, number=number))
        else:
            base = api + list(range(store.n))
        idx = [i for i in base if (stop_state(store, store.plan(i), t) is not None) == tracking_stopped]
        return LazySeq(len(idx), lambda p: render.shipment_resource(store, store.plan(idx[p]), t))
    if not q and not number:
        def get(p: int) -> dict:
            i = api[p] if p < len(api) else p - len(api)
            return render.shipment_resource(store, store.plan(i), t)

        return LazySeq(len(api) + store.n, get)
    idx = [i for i in search.matching_shipments(t, q=q, number=number)]
    return LazySeq(len(idx), lambda p: render.shipment_resource(store, store.plan(idx[p]), t))


def containers(store: AccountStore, t: int) -> Sequence[dict]:
    """Containers newest first (by their shipment's created_at), lazily rendered."""
    api_pairs = [(i, c.slot) for i in store.api_shipments(t) for c in store.identity(i).containers]
    total = len(api_pairs) + int(store.prefix[-1])

    def get(p: int) -> dict:
        i, slot = api_pairs[p] if p < len(api_pairs) else store.container_at(p - len(api_pairs))
        return render.container_resource(store, store.plan(i), slot, t)

    return LazySeq(total, get)


def parties(store: AccountStore) -> Sequence[dict]:
    """Customer parties: the seeded ones, then those created through the API."""
    return [render.party_resource(store, p, nm) for p, nm in enumerate(store.all_party_names())]


def tracking_requests(store: AccountStore, search: AccountSearch, t: int, *, status=None, scac=None,
                      request_number=None, q=None, created_start=None, created_end=None, updated_start=None,
                      updated_end=None) -> Sequence[dict]:
    """Tracking requests newest first, filtered like `GET /tracking_requests` (all filters AND)."""
    cs, ce, us, ue = (parse_iso(x) for x in (created_start, created_end, updated_start, updated_end))
    statuses = _as_set(status)
    scacs = {s.upper() for s in _as_set(scac)} if scac else None
    rn = request_number.strip().lower() if request_number else None
    ql = q.strip().lower() if q else None
    # API-created ones (few): evaluated one by one
    api: list[int] = []
    for req in sorted(store.api_requests, key=lambda r: (r.created_at, r.k), reverse=True):
        st, upd, sc = api_state(req, t)
        num = str(req.attrs.get("request_number", "")).lower()
        refs = [str(x).lower() for x in (req.attrs.get("ref_numbers") or [])]
        if statuses and st not in statuses:
            continue
        if scacs and (sc or "") not in scacs:
            continue
        if rn and num != rn:
            continue
        if ql and ql not in num and not any(ql in r for r in refs):
            continue
        if not _in_range(req.created_at, cs, ce) or not _in_range(upd, us, ue):
            continue
        api.append(store.seeded_tr_count + req.k)
    # seeded ones: vectorised on the numpy arrays, text filters through the lazy index
    order = store.tr_order
    codes, updated = seeded_states(store, t)
    mask = np.ones(len(order), dtype=bool)
    created_sorted = store.tr_created[order]
    updated_sorted = updated[order]
    if statuses:
        mask &= np.isin(codes[order], [STATUS_CODES.index(s) for s in statuses if s in STATUS_CODES])
    for lo, hi, arr in ((cs, ce, created_sorted), (us, ue, updated_sorted)):
        if lo is not None:
            mask &= arr >= lo
        if hi is not None:
            mask &= arr <= hi
    positions = order[mask]
    if scacs or rn or ql:
        texts = search.index().tracking_text()
        keep = []
        for tr in positions.tolist():
            num, sc, refs = texts[tr].split(SEP, 2)
            if scacs and sc.upper() not in scacs:
                continue
            if rn and num != rn:
                continue
            if ql and ql not in num and ql not in refs:
                continue
            keep.append(tr)
        positions = np.array(keep, dtype=np.int64)
    seeded = positions
    na = len(api)
    return LazySeq(na + len(seeded),
                   lambda p: render.tracking_request_resource(store, api[p] if p < na else int(seeded[p - na]), t))


def _as_set(value) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return {v.strip() for v in value.split(",") if v.strip()}
    return {str(v) for v in value}


def _in_range(ts: int, lo: int | None, hi: int | None) -> bool:
    return (lo is None or ts >= lo) and (hi is None or ts <= hi)
