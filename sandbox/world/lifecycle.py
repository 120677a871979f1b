"""Tracking-request lifecycle: the state of each request at a sim instant (pending, created, failed,
retries) and the creation of requests through the API (carrier validation, outcome, resolve delay).
"""

from __future__ import annotations

from typing import NamedTuple

import numpy as np

from .identifiers import is_valid_container_number, norm_container, stable_int
from .store import AccountStore, ApiRequest

STATUS_CODES = ("created", "pending", "failed")
RETRYING_REASONS = ("retries_exhausted", "expired")
MAX_RETRIES = 14


class ValidationIssue(ValueError):
    """A request the world refuses (carrier semantics), for the HTTP layer to turn into a 422."""

    def __init__(self, pointer: str, detail: str, code: str | None = None, title: str = "Unprocessable Entity"):
        super().__init__(detail)
        self.pointer, self.detail, self.code, self.title = pointer, detail, code, title


class FailingState(NamedTuple):
    """State of a seeded failing tracking request at an instant."""

    status: str                  # pending | failed
    updated_at: int
    failed_reason: str | None
    is_retrying: bool
    retry_count: int | None


def seeded_states(store: AccountStore, now: int) -> tuple[np.ndarray, np.ndarray]:
    """(status code, updated_at) of every seeded tracking request at `now`, by tracking request index;
    codes index `STATUS_CODES`. Requests are pending until their resolve time."""
    pending = now < store.tr_resolve
    codes = np.where(pending, 1, np.where(store.tr_kind == 0, 0, 2))
    return codes, np.where(pending, store.tr_created, store.tr_resolve)


def failing_state(store: AccountStore, tr: int, now: int) -> FailingState:
    """State at `now` of seeded failing request `tr`: pending (retrying with backoff for the retrying
    reasons) until its resolve time, then failed with its reason."""
    created, resolve = int(store.tr_created[tr]), int(store.tr_resolve[tr])
    reason = store.fail_reason[tr - store.n]
    pending = now < resolve
    retrying = reason in RETRYING_REASONS
    retries = retries_after(now - created) if pending and retrying else (MAX_RETRIES if retrying else None)
    return FailingState("pending" if pending else "failed", created if pending else resolve,
                        None if pending else reason, bool(pending and retrying), retries)


def api_state(req: ApiRequest, now: int) -> tuple[str, int, str | None]:
    """(status, updated_at, scac) of an API-created request at `now`."""
    given = req.attrs.get("scac")
    if now < req.resolve_at:
        return "pending", req.created_at, given.upper() if given else None
    return req.outcome, req.resolve_at, req.scac


def retries_after(elapsed: int) -> int:
    """Retries made after `elapsed` seconds with exponential backoff from 10 minutes (max 14)."""
    count, wait, t = 0, 600, 600
    while t <= elapsed and count < MAX_RETRIES:
        count += 1
        wait *= 2
        t += wait
    return count


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
        if carrier is None or carrier.support != "supported":
            outcome, reason = "failed", "scac_auto_detect_failed"
        else:
            final_scac = carrier.scac
    else:
        support = ref.carrier_support(scac)
        if support == "unknown":
            raise ValidationIssue("/data/attributes/scac", "Scac is not recognized", "invalid")
        if support == "unsupported":
            raise ValidationIssue("/data/attributes/scac", "Scac is not supported at this time", "invalid")
        final_scac = ref.carrier(scac).scac
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
        if outcome == "created":
            req.shipment_index = store.n + k
        store.api_requests.append(req)
    return tr
