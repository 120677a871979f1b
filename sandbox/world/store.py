"""The rows of one account: its seeded shipments, containers, tracking requests and parties, plus the
in-memory overlays written through the API (tracking requests, parties, patches, documents).

Construction only draws a few numpy arrays (created_at, container counts and their prefix sums,
tracking-request times); every row is generated from (seed, account, index) when it is read, and
ids decode back to indices (`IdCodec`), so 100k-shipment accounts stay lazy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import numpy as np

from .identifiers import IdCodec, rng_for
from .names import COMPANY_FIRST, COMPANY_SECOND, COMPANY_SUFFIX
from .shipments import Identity, Plan, ShipmentFactory
from .timeutil import DAY, HOUR, MINUTE

if TYPE_CHECKING:  # pragma: no cover
    from .reference import Reference
    from .routing import RouteBook

FAILED_REASONS = (("not_found", 30), ("invalid_number", 15), ("expired", 12), ("duplicate", 8),
                  ("retries_exhausted", 8), ("booking_cancelled", 6), ("shipping_line_unreachable", 5),
                  ("unrecognized_response", 4), ("data_unavailable", 4), ("internal_processing_error", 2),
                  ("scac_auto_detect_failed", 6))


NEVER = np.iinfo(np.int64).max
MANIFEST_CHECK_AFTER = 60        # a BL/booking request not found at its first check awaits the manifest
EARLY_STOP_REASONS = (None, "booking_cancelled", "cancelled_by_user")


class LazySeq(Sequence):
    """A read-only sequence of `n` rows produced by `getter(position)`; slices build only their rows."""

    def __init__(self, n: int, getter: Callable[[int], Any]) -> None:
        self._n, self._get = n, getter

    def __len__(self) -> int:
        return self._n

    def __getitem__(self, key):  # type: ignore[override]
        if isinstance(key, slice):
            return [self._get(p) for p in range(*key.indices(self._n))]
        if key < 0:
            key += self._n
        if not 0 <= key < self._n:
            raise IndexError(key)
        return self._get(key)


@dataclass
class ApiRequest:
    """A tracking request created through the API (an overlay)."""

    k: int
    id: str
    attrs: dict
    customer_id: str | None
    created_at: int
    resolve_at: int
    outcome: str                 # created | failed
    scac: str | None             # final scac
    failed_reason: str | None
    shipment_index: int | None = None
    extra: dict = field(default_factory=dict)


class AccountStore:
    """Seeded rows and overlays of one account, addressed by index and by id.

    Indices: shipments 0..n-1 are seeded and n+k is the shipment of API request k; tracking requests
    0..n-1 are the seeded shipments' own, then the seeded failing ones, then API request k at
    `seeded_tr_count + k`; parties are the seeded names, then those created through the API.
    """

    def __init__(self, seed: int, name: str, n: int, stream: int, start_ts: int, ref: Reference,
                 routes: RouteBook) -> None:
        """Draw the account's arrays from seed stream `stream`; rows before `start_ts` are history."""
        self.seed, self.name, self.n, self.ref = seed, name, n, ref
        self.codec = IdCodec(f"{seed}:{name}")
        self.lock = threading.RLock()
        start = start_ts
        rng = np.random.default_rng(stream)
        offsets = np.sort(10 * MINUTE + 120 * DAY * rng.uniform(0.0, 1.0, n) ** 1.6)  # accounts grow
        self.created = (start - offsets).astype(np.int64)
        self.counts = rng.choice(np.array([1, 2, 3, 4]), p=[0.45, 0.30, 0.15, 0.10], size=n).astype(np.int64)
        self.prefix = np.concatenate([[0], np.cumsum(self.counts)]).astype(np.int64)
        # tracking requests: one per shipment, then failing ones (failed by now, or still retrying)
        self.failed_n, self.pending_n = max(3, n // 25), max(2, n // 100)
        nf = self.failed_n + self.pending_n
        fail_created = np.concatenate([start - rng.uniform(DAY, 120 * DAY, self.failed_n),
                                       start - rng.uniform(10 * MINUTE, 20 * HOUR, self.pending_n)]).astype(np.int64)
        reasons = [r for r, _ in FAILED_REASONS]
        weights = np.array([w for _, w in FAILED_REASONS], dtype=float)
        reason_idx = rng.choice(len(reasons), p=weights / weights.sum(), size=nf)
        reason_idx[self.failed_n:] = reasons.index("retries_exhausted")
        reason_idx[self.failed_n::2] = reasons.index("expired")   # recent BL/booking not found: awaiting_manifest
        delay = rng.integers(30, 15 * MINUTE, nf)
        delay = np.where(reason_idx == reasons.index("expired"), 7 * DAY, delay)
        delay = np.where(reason_idx == reasons.index("retries_exhausted"), DAY, delay)
        self.fail_reason = [reasons[r] for r in reason_idx]
        self.tr_created = np.concatenate([self.created - rng.integers(20, 91, n), fail_created])
        self.tr_resolve = np.concatenate([self.created, fail_created + delay])
        self.tr_kind = np.concatenate([np.zeros(n, np.int8), np.ones(nf, np.int8)])
        self.seeded_tr_count = n + nf
        # tracking stops and manifest waits, from their own stream (the draws above stay unchanged)
        srng = np.random.default_rng([stream, 0x57095])
        kinds = srng.choice(np.array([0, 1, 2], np.int8), p=[0.93, 0.04, 0.03], size=n)
        when = np.where(kinds == 1, srng.uniform(HOUR, 3 * DAY, n), srng.uniform(6 * HOUR, 12 * DAY, n))
        self.early_kind = kinds                        # 0 none, 1 booking_cancelled, 2 cancelled_by_user
        self.early_at = np.where(kinds > 0, self.created + when.astype(np.int64), NEVER).astype(np.int64)
        waited = srng.random(n) < 0.08                 # BL/booking first not found at the line: awaited the manifest
        wait = srng.uniform(2 * HOUR, 6 * DAY, n).astype(np.int64)
        self.tr_created[:n] = np.where(waited, self.created - wait, self.tr_created[:n])
        expired = np.array([r == "expired" for r in self.fail_reason], dtype=bool)
        self.tr_awaiting = np.concatenate([np.where(waited, self.tr_created[:n] + MANIFEST_CHECK_AFTER, NEVER),
                                           np.where(expired, fail_created + MANIFEST_CHECK_AFTER, NEVER)])
        self.tr_order = np.argsort(-self.tr_created, kind="stable")
        # parties
        prng = rng_for(seed, name, "parties")
        count = prng.randint(5, 12)
        names: list[str] = []
        while len(names) < count:
            nm = " ".join(x for x in (prng.choice(COMPANY_FIRST), prng.choice(COMPANY_SECOND),
                                      prng.choice(COMPANY_SUFFIX)) if x)
            if nm not in names:
                names.append(nm)
        self.party_names = names
        self.factory = ShipmentFactory(seed, name, ref, routes, len(names))
        # overlays
        self.api_requests: list[ApiRequest] = []
        self.api_parties: list[str] = []
        self.documents_list: list[dict] = []
        self.shipment_patches: dict[str, dict] = {}
        self.container_patches: dict[str, dict] = {}
        self.tr_patches: dict[str, dict] = {}
        self.stop_overrides: dict[int, list[tuple[int, str]]] = {}   # shipment index -> [(t, stop|resume)]
        self.idents: OrderedDict[int, Identity] = OrderedDict()

    # ----- ids -----------------------------------------------------------------------------------

    def shipment_id(self, i: int) -> str:
        """Id of shipment index `i`."""
        return self.codec.encode("shipment", i)

    def container_id(self, i: int, slot: int) -> str:
        """Id of container `slot` of shipment `i`."""
        return self.codec.encode("container", i, slot)

    def event_id(self, i: int, slot: int, seq: int) -> str:
        """Id of event `seq` of a container."""
        return self.codec.encode("transport_event", i, slot * 64 + seq)

    def tr_id(self, t: int) -> str:
        """Id of tracking request index `t`."""
        return self.codec.encode("tracking_request", t)

    def party_id(self, p: int) -> str:
        """Id of party index `p`."""
        return self.codec.encode("party", p)

    def document_id(self, d: int) -> str:
        """Id of document index `d`."""
        return self.codec.encode("document", d)

    # ----- shipments -----------------------------------------------------------------------------

    def seeded_identity(self, i: int) -> Identity:
        """Identity of seeded shipment `i`, uncached (used to build indexes)."""
        return self.factory.seeded_identity(i, int(self.created[i]), int(self.counts[i]), int(self.prefix[i]))

    def identity(self, i: int) -> Identity:
        """Identity of shipment index `i` (seeded below n, API-created from n on), LRU-cached."""
        hit = self.idents.get(i)
        if hit is not None:
            return hit
        if i < self.n:
            ident = self.seeded_identity(i)
        else:
            req = self.api_requests[i - self.n]
            carrier = self.ref.carrier(req.scac)
            ident = self.factory.api_identity(i, req.resolve_at, req.attrs, carrier, self.party_index(req.customer_id))
        with self.lock:
            self.idents[i] = ident
            if len(self.idents) > 8192:
                self.idents.popitem(last=False)
        return ident

    def plan(self, i: int) -> Plan:
        """The full plan of shipment index `i`."""
        return self.factory.plan(self.identity(i))

    def shipment_visible(self, i: int, now: int) -> bool:
        """Whether shipment index `i` exists at `now` (API-created ones once their request resolved)."""
        if 0 <= i < self.n:
            return True
        k = i - self.n
        if 0 <= k < len(self.api_requests):
            req = self.api_requests[k]
            return req.outcome == "created" and req.resolve_at <= now
        return False

    def api_shipments(self, now: int) -> list[int]:
        """Indices of API-created shipments visible at `now`, newest first."""
        reqs = [r for r in self.api_requests if r.outcome == "created" and r.resolve_at <= now]
        reqs.sort(key=lambda r: (r.resolve_at, r.k), reverse=True)
        return [r.shipment_index for r in reqs if r.shipment_index is not None]

    def container_at(self, g: int) -> tuple[int, int]:
        """(shipment index, slot) of seeded container `g` in the flat, newest-first container order."""
        i = int(np.searchsorted(self.prefix, g, side="right")) - 1
        return i, g - int(self.prefix[i])

    def container_ref(self, container_id: str, now: int) -> tuple[Plan, int] | None:
        """(plan, slot) of a container id visible at `now`, or None."""
        dec = self.codec.decode(container_id)
        if dec is None or dec[0] != "container" or not self.shipment_visible(dec[1], now):
            return None
        plan = self.plan(dec[1])
        return (plan, dec[2]) if dec[2] < len(plan.containers) else None

    # ----- seeded failing tracking requests ------------------------------------------------------

    def failing(self, j: int) -> dict:
        """Row of seeded failing tracking request `j` (tracking request index n + j)."""
        rng = rng_for(self.seed, self.name, "failing", j)
        reason = self.fail_reason[j]
        carrier = self.factory._carriers[rng.randrange(len(self.factory._carriers))]
        prefix = carrier.bol_prefix or carrier.scac
        number = f"{prefix}{rng.randrange(10**8, 10**10)}"
        kind = "bill_of_lading"
        if rng.random() < 0.15:
            kind, number = "booking_number", f"{rng.randrange(10**8, 10**10)}"
        refs = self.factory._refs(rng, 0.3)
        return {"number": number, "type": kind, "refs": refs, "reason": reason,
                "scac": None if reason == "scac_auto_detect_failed" else carrier.scac,
                "party": rng.randrange(len(self.party_names)), "tags": []}

    # ----- parties -------------------------------------------------------------------------------

    def all_party_names(self) -> list[str]:
        """Company names by party index: the seeded ones, then those created through the API."""
        return self.party_names + self.api_parties

    def party_name(self, p: int | None) -> str | None:
        """Company name of party index `p` (customer_name)."""
        if p is None:
            return None
        names = self.all_party_names()
        return names[p] if 0 <= p < len(names) else None

    def party_index(self, party_id: str | None) -> int | None:
        """Index of a party id of this account, or None."""
        if not party_id:
            return None
        dec = self.codec.decode(party_id)
        if dec and dec[0] == "party" and dec[1] < len(self.party_names) + len(self.api_parties):
            return dec[1]
        return None

    def add_party(self, company_name: str) -> int:
        """Append a party created through the API; returns its index."""
        with self.lock:
            self.api_parties.append(company_name)
            return len(self.party_names) + len(self.api_parties) - 1

    # ----- patches -------------------------------------------------------------------------------

    def patch_shipment(self, id_: str, ref_numbers=None, tags=None) -> None:
        """Overlay ref_numbers and/or tags on shipment `id_` (tags deduplicated, order kept)."""
        with self.lock:
            patch = self.shipment_patches.setdefault(id_, {})
            if ref_numbers is not None:
                patch["ref_numbers"] = [str(r) for r in ref_numbers]
            if tags is not None:
                patch["tags"] = list(dict.fromkeys(str(x) for x in tags))

    def patch_container(self, id_: str, ref_numbers=None) -> None:
        """Overlay ref_numbers on container `id_`."""
        with self.lock:
            if ref_numbers is not None:
                self.container_patches[id_] = {"ref_numbers": [str(r) for r in ref_numbers]}

    def container_base_refs(self, plan: Plan, slot: int) -> list[str]:
        """Container refs before patches."""
        return list(plan.ident.containers[slot].ref_numbers)

    def effective_refs(self, i: int, ident: Identity | None = None) -> tuple[list[str], list[list[str]]]:
        """(shipment refs, refs per container) with patches applied."""
        ident = ident or self.identity(i)
        sp = self.shipment_patches.get(self.shipment_id(i), {})
        srefs = sp.get("ref_numbers", ident.ref_numbers)
        crefs = [self.container_patches.get(self.container_id(i, c.slot), {}).get("ref_numbers", c.ref_numbers)
                 for c in ident.containers]
        return srefs, crefs

    def patched_indices(self) -> set[int]:
        """Shipment indices with a shipment or container patch."""
        out = set()
        for id_ in list(self.shipment_patches) + list(self.container_patches):
            dec = self.codec.decode(id_)
            if dec:
                out.add(dec[1])
        return out

    # ----- documents -----------------------------------------------------------------------------

    def add_document(self, make: Callable[[str], dict]) -> dict:
        """Append the document `make(id)` builds for the next document id; returns it."""
        with self.lock:
            doc = make(self.document_id(len(self.documents_list)))
            self.documents_list.append(doc)
        return doc
