"""Tracking-request lifecycle: the state of each request at a sim instant (pending, created, failed,
retries) and the creation of requests through the API (carrier validation, outcome, resolve delay).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .identifiers import is_valid_container_number, norm_container, stable_int
from .store import AccountStore, ApiRequest

STATUS_CODES = ("created", "pending", "failed", "awaiting_manifest", "tracking_stopped")
RETRYING_REASONS = ("retries_exhausted",)
MAX_RETRIES = 14
MANIFEST_DAYS = 7          # an awaited BL/booking is re-checked daily, then fails `expired`
MANIFEST_SHARE = 10        # 1 in MANIFEST_SHARE API BL/booking requests is not yet at the line


class ValidationIssue(ValueError):
    """A request the world refuses (carrier semantics), for the HTTP layer to turn into a 422."""

    def __init__(self, pointer: str, detail: str, code: str | None = None, title: str = "Unprocessable Entity"):
        super().__init__(detail)
        self.pointer, self.detail, self.code, self.title = pointer, detail, code, title


class FailingState(NamedTuple):
    """State of a seeded tracking request at an instant."""

    status: str                  # pending | awaiting_manifest | failed | created | tracking_stopped
    updated_at: int
    failed_reason: str | None
    is_retrying: bool
    retry_count: int | None


def seeded_states(store: AccountStore, now: int) -> tuple[np.ndarray, np.ndarray]:
    """(status code, updated_at) of every seeded tracking request at `now`, by tracking request index;
    codes index `STATUS_CODES`. Requests are pending until their resolve time (awaiting_manifest from
    their awaiting time); a shipment's own request is tracking_stopped after an early or user stop."""
    pending = now < store.tr_resolve
    waiting = pending & (now >= store.tr_awaiting)
    codes = np.where(pending, np.where(waiting, 3, 1), np.where(store.tr_kind == 0, 0, 2))
    updated = np.where(pending, np.where(waiting, store.tr_awaiting, store.tr_created), store.tr_resolve)
    n = store.n
    stopped = (store.early_at <= now) & ~pending[:n]
    codes[:n] = np.where(stopped, 4, codes[:n])
    updated[:n] = np.where(stopped, store.early_at, updated[:n])
    for i in np.flatnonzero(pending[n:]) + n:  # a failing request still pending moves with each retry or re-check
        updated[i] = failing_state(store, int(i), now).updated_at
    for i in list(store.stop_overrides):
        if i < n and not pending[i]:
            status, upd = own_state(store, i, now)
            codes[i], updated[i] = STATUS_CODES.index(status), upd
    return codes, updated


def own_state(store: AccountStore, tr: int, now: int) -> tuple[str, int]:
    """(status, updated_at) of seeded shipment `tr`'s own tracking request at `now`."""
    resolve, awaiting = int(store.tr_resolve[tr]), int(store.tr_awaiting[tr])
    if now < resolve:
        return ("awaiting_manifest", awaiting) if now >= awaiting else ("pending", int(store.tr_created[tr]))
    if int(store.early_at[tr]) <= now or tr in store.stop_overrides:
        from .stops import request_stopped

        st = request_stopped(store, store.plan(tr), now)
        if st is not None:
            return "tracking_stopped", st.stopped_at
        moves = [at for at, _ in store.stop_overrides.get(tr, ()) if at <= now]
        return "created", max([resolve, *moves])
    return "created", resolve


def failing_state(store: AccountStore, tr: int, now: int) -> FailingState:
    """State at `now` of seeded failing request `tr`: pending (retrying with backoff for the retrying
    reasons) or awaiting_manifest (re-checked daily, `expired` after 7 days) until its resolve time,
    then failed with its reason. Each retry and each daily re-check is a change to the request and moves its
    `updated_at`, as any change to a record does (inferred: the live service's records are Rails models), so a
    client following `filter[updated_at]` sees the retry count it shows."""
    created, resolve = int(store.tr_created[tr]), int(store.tr_resolve[tr])
    awaiting = int(store.tr_awaiting[tr])
    reason = store.fail_reason[tr - store.n]
    pending = now < resolve
    if reason == "expired":
        if pending and now >= awaiting:
            checks = (now - awaiting) // 86400
            return FailingState("awaiting_manifest", awaiting + checks * 86400, None, False, checks)
        if not pending:
            return FailingState("failed", resolve, reason, False, MANIFEST_DAYS)
    retrying = reason in RETRYING_REASONS
    retries, last_retry = retries_after(now - created) if pending and retrying else (MAX_RETRIES if retrying else None, 0)
    return FailingState("pending" if pending else "failed", created + last_retry if pending else resolve,
                        None if pending else reason, bool(pending and retrying), retries)


def api_state(req: ApiRequest, now: int) -> tuple[str, int, str | None]:
    """(status, updated_at, scac) of an API-created request at `now`: pending, then awaiting_manifest
    for a BL/booking not yet at the line, then created or failed."""
    given = req.attrs.get("scac")
    if now < req.resolve_at:
        awaiting = req.extra.get("awaiting_from")
        if awaiting is not None and now >= awaiting:
            return "awaiting_manifest", awaiting, given.upper() if given else None
        return "pending", req.created_at, given.upper() if given else None
    return req.outcome, req.resolve_at, req.scac


def retries_after(elapsed: int) -> tuple[int, int]:
    """Retries made after `elapsed` seconds with exponential backoff from 10 minutes (max 14), and when the last
    of them was made, seconds after the start (0: none yet)."""
    count, wait, t, last = 0, 600, 600, 0
    while t <= elapsed and count < MAX_RETRIES:
        count += 1
        last = t
        wait *= 2
        t += wait
    return count, last


def create(store: AccountStore, attributes: dict, customer_id: str | None, now: int) -> int:
    """Record a new tracking request (pending) and return its index; it resolves 20-90 sim seconds
    later to `created` (a new shipment appears) or `failed` with the live failed_reason. Raises
    `ValidationIssue` for a blank number or an unknown, unsupported or missing SCAC."""
    attrs = dict(attributes)
    number = str(attrs.get("request_number") or "").strip()
    if not number:
        raise ValidationIssue("/data/attributes/request_number", "Request number can't be blank", "blank")
    scac = (attrs.get("scac") or "").strip().upper() or None
    ref = store.ref
    outcome, reason, final_scac = "created", None, scac
    if scac is None:
        if not attrs.get("auto_detect_vocc_scac"):
            raise ValidationIssue("/data/attributes/scac", "Scac can't be blank", "blank")
        carrier = ref.detect_carrier(number)
        if carrier is None or not carrier.supports(attrs.get("request_type")):
            outcome, reason = "failed", "scac_auto_detect_failed"
        else:
            final_scac = carrier.scac
    else:
        support = ref.carrier_support(scac)
        if support == "unknown":
            raise ValidationIssue("/data/attributes/scac", "Scac is not recognized", "invalid")
        if support == "unsupported":
            raise ValidationIssue("/data/attributes/scac", "Scac is not supported at this time", "invalid")
        line = ref.carrier(scac)
        if not line.supports(attrs.get("request_type")):
            raise ValidationIssue("/data/attributes/scac", "Scac is not supported at this time", "invalid")
        final_scac = line.scac
        if final_scac == "TEST":
            if number.upper() != "TEST-TR-SUCCEEDED":
                outcome, reason = "failed", "not_found"
        elif attrs.get("request_type") == "container" and not is_valid_container_number(norm_container(number)):
            outcome, reason = "failed", "invalid_number"
    with store.lock:
        k = len(store.api_requests)
        tr = store.seeded_tr_count + k
        delay = 20 + stable_int(store.seed, store.name, "delay", k, number) % 71
        req = ApiRequest(k, store.tr_id(tr), attrs, customer_id, now, now + delay, outcome,
                         final_scac if outcome == "created" else scac, reason)
        kind = attrs.get("request_type") or "bill_of_lading"
        wait = stable_int(store.seed, store.name, "manifest", number.upper())
        if kind != "container" and final_scac not in (None, "TEST") and wait % MANIFEST_SHARE == 0:
            # not at the line yet: awaiting_manifest, re-checked daily; found after 1-6 days or expired
            days = 1 + (wait // MANIFEST_SHARE) % 9
            req.extra["awaiting_from"] = req.resolve_at
            if days < MANIFEST_DAYS and outcome == "created":
                req.resolve_at += days * 86400
            else:
                req.outcome, req.failed_reason = "failed", "expired"
                req.resolve_at += MANIFEST_DAYS * 86400
        if req.outcome == "created":
            req.shipment_index = store.n + k
        store.api_requests.append(req)
    return tr
