"""An account: its seeded shipments, containers, tracking requests and parties, plus the in-memory
overlays (API-created tracking requests and parties, patches, documents).

Construction only draws a few numpy arrays (created_at, container counts and their prefix sums,
tracking-request times); every row is generated from (seed, account, index) when it is read, and
ids decode back to indices (`IdCodec`), so 100k-shipment accounts stay lazy.
"""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import numpy as np

from . import mapgeo, render
from .identifiers import IdCodec, is_valid_container_number, rng_for, stable_int
from .names import COMPANY_FIRST, COMPANY_SECOND, COMPANY_SUFFIX
from .search import SEP, SearchIndex, norm_container
from .shipments import Identity, Plan, ShipmentFactory
from .timeutil import DAY, HOUR, MINUTE, iso, parse_iso, to_epoch

if TYPE_CHECKING:  # pragma: no cover
    from . import World

FAILED_REASONS = (("not_found", 30), ("invalid_number", 15), ("expired", 12), ("duplicate", 8),
                  ("retries_exhausted", 8), ("booking_cancelled", 6), ("shipping_line_unreachable", 5),
                  ("unrecognized_response", 4), ("data_unavailable", 4), ("internal_processing_error", 2),
                  ("scac_auto_detect_failed", 6))
STATUS_CODES = ("created", "pending", "failed")


class ValidationIssue(ValueError):
    """A request the world refuses (carrier semantics), for the HTTP layer to turn into a 422."""

    def __init__(self, pointer: str, detail: str, code: str | None = None, title: str = "Unprocessable Entity"):
        super().__init__(detail)
        self.pointer, self.detail, self.code, self.title = pointer, detail, code, title


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


def _now(now: datetime | int) -> int:
    return now if isinstance(now, int) else to_epoch(now)


class Account:
    """One account of the world (see docs/sandbox-internals.md for the contract)."""

    def __init__(self, world: World, name: str, n: int, stream: int) -> None:
        self.world, self.name, self.n = world, name, n
        self.codec = IdCodec(f"{world.seed}:{name}")
        self._lock = threading.RLock()
        start = world.start_ts
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
        delay = rng.integers(30, 15 * MINUTE, nf)
        delay = np.where(reason_idx == reasons.index("expired"), 7 * DAY, delay)
        delay = np.where(reason_idx == reasons.index("retries_exhausted"), DAY, delay)
        self.fail_reason = [reasons[r] for r in reason_idx]
        self.tr_created = np.concatenate([self.created - rng.integers(20, 91, n), fail_created])
        self.tr_resolve = np.concatenate([self.created, fail_created + delay])
        self.tr_kind = np.concatenate([np.zeros(n, np.int8), np.ones(nf, np.int8)])
        self.seeded_tr_count = n + nf
        self.tr_order = np.argsort(-self.tr_created, kind="stable")
        # parties
        prng = rng_for(world.seed, name, "parties")
        count = prng.randint(5, 12)
        names: list[str] = []
        while len(names) < count:
            nm = " ".join(x for x in (prng.choice(COMPANY_FIRST), prng.choice(COMPANY_SECOND),
                                      prng.choice(COMPANY_SUFFIX)) if x)
            if nm not in names:
                names.append(nm)
        self.party_names = names
        self.factory = ShipmentFactory(world.seed, name, world.ref, world.routes, len(names))
        # overlays
        self.api_requests: list[ApiRequest] = []
        self.api_parties: list[str] = []
        self.documents_list: list[dict] = []
        self.shipment_patches: dict[str, dict] = {}
        self.container_patches: dict[str, dict] = {}
        self._idents: OrderedDict[int, Identity] = OrderedDict()
        self._index: SearchIndex | None = None

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

    # ----- generation ----------------------------------------------------------------------------

    def seeded_identity(self, i: int) -> Identity:
        """Identity of seeded shipment `i`, uncached (used to build indexes)."""
        return self.factory.seeded_identity(i, int(self.created[i]), int(self.counts[i]), int(self.prefix[i]))

    def identity(self, i: int) -> Identity:
        """Identity of shipment index `i` (seeded below n, API-created from n on), LRU-cached."""
        hit = self._idents.get(i)
        if hit is not None:
            return hit
        if i < self.n:
            ident = self.seeded_identity(i)
        else:
            req = self.api_requests[i - self.n]
            carrier = self.world.ref.carrier(req.scac)
            ident = self.factory.api_identity(i, req.resolve_at, req.attrs, carrier, self._party_index(req.customer_id))
        with self._lock:
            self._idents[i] = ident
            if len(self._idents) > 8192:
                self._idents.popitem(last=False)
        return ident

    def plan(self, i: int) -> Plan:
        """The full plan of shipment index `i`."""
        return self.factory.plan(self.identity(i))

    def party_name(self, p: int | None) -> str | None:
        """Company name of party index `p` (customer_name)."""
        if p is None:
            return None
        names = self.party_names + self.api_parties
        return names[p] if 0 <= p < len(names) else None

    def _party_index(self, party_id: str | None) -> int | None:
        if not party_id:
            return None
        dec = self.codec.decode(party_id)
        if dec and dec[0] == "party" and dec[1] < len(self.party_names) + len(self.api_parties):
            return dec[1]
        return None

    def container_base_refs(self, plan: Plan, slot: int) -> list[str]:
        """Container refs before patches."""
        return list(plan.ident.containers[slot].ref_numbers)

    def _shipment_visible(self, i: int, now: int) -> bool:
        if 0 <= i < self.n:
            return True
        k = i - self.n
        if 0 <= k < len(self.api_requests):
            req = self.api_requests[k]
            return req.outcome == "created" and req.resolve_at <= now
        return False

    def _api_shipments(self, now: int) -> list[int]:
        """Indices of API-created shipments visible at `now`, newest first."""
        reqs = [r for r in self.api_requests if r.outcome == "created" and r.resolve_at <= now]
        reqs.sort(key=lambda r: (r.resolve_at, r.k), reverse=True)
        return [r.shipment_index for r in reqs if r.shipment_index is not None]

    # ----- lists ---------------------------------------------------------------------------------

    def shipments(self, now, *, q: str | None = None, number: str | None = None) -> Sequence[dict]:
        """Shipments newest first; `q` searches BL, ref and container numbers (substring, case-
        insensitive); `number` matches the tracking request number exactly (case-insensitive)."""
        t = _now(now)
        api = self._api_shipments(t)
        if not q and not number:
            return LazySeq(len(api) + self.n, lambda p: self._shipment_at(api, p, t))
        idx = [i for i in self.matching_shipments(t, q=q, number=number)]
        return LazySeq(len(idx), lambda p: render.shipment_resource(self, self.plan(idx[p]), t))

    def _shipment_at(self, api: list[int], p: int, t: int) -> dict:
        i = api[p] if p < len(api) else p - len(api)
        return render.shipment_resource(self, self.plan(i), t)

    def matching_shipments(self, t: int, *, q: str | None = None, number: str | None = None) -> list[int]:
        """Shipment indices in list order matching the `q` / `number` filters."""
        index = self.search_index()
        api = self._api_shipments(t)
        out: list[int] = []
        ql = q.strip().lower() if q else None
        nl = number.strip().lower() if number else None

        def ok(i: int, text: str, reqnum: str) -> bool:
            return (ql is None or ql in text) and (nl is None or nl == reqnum)

        for i in api:
            ident = self.identity(i)
            if ok(i, self.shipment_search_text(i, ident), ident.request_number.lower()):
                out.append(i)
        texts, reqs = index.ship_text, index.request_number
        if nl is not None and ql is None:
            out.extend(i for i in range(self.n) if reqs[i] == nl)
        elif nl is None:
            out.extend(i for i in range(self.n) if ql in texts[i])
        else:
            out.extend(i for i in range(self.n) if reqs[i] == nl and ql in texts[i])
        return out

    def shipment_search_text(self, i: int, ident: Identity) -> str:
        """Lower-case searchable text of a shipment, with patched ref numbers applied."""
        if not (self.shipment_patches or self.container_patches):  # fast path: no overlay to consult
            parts = [ident.bl_number, ident.normalized_number, *ident.ref_numbers]
            for c in ident.containers:
                parts.append(c.number)
                parts.extend(c.ref_numbers)
            return SEP.join(parts).lower()
        srefs, crefs = self._effective_refs(i, ident)
        parts = [ident.bl_number, ident.normalized_number, *srefs]
        for c, refs in zip(ident.containers, crefs, strict=True):
            parts.append(c.number)
            parts.extend(refs)
        return SEP.join(parts).lower()

    def containers(self, now) -> Sequence[dict]:
        """Containers newest first (by their shipment's created_at), lazily rendered."""
        t = _now(now)
        api_pairs = [(i, c.slot) for i in self._api_shipments(t) for c in self.identity(i).containers]
        total = len(api_pairs) + int(self.prefix[-1])

        def get(p: int) -> dict:
            if p < len(api_pairs):
                i, slot = api_pairs[p]
            else:
                g = p - len(api_pairs)
                i = int(np.searchsorted(self.prefix, g, side="right")) - 1
                slot = g - int(self.prefix[i])
            return render.container_resource(self, self.plan(i), slot, t)

        return LazySeq(total, get)

    def parties(self) -> Sequence[dict]:
        """Customer parties: the seeded ones, then those created through the API."""
        names = self.party_names + self.api_parties
        return [self._party_resource(p, nm) for p, nm in enumerate(names)]

    def _party_resource(self, p: int, name: str) -> dict:
        pid = self.party_id(p)
        return {"id": pid, "type": "party", "attributes": {"company_name": name},
                "relationships": {}, "links": {"self": f"/v2/parties/{pid}"}}

    # ----- tracking requests ---------------------------------------------------------------------

    def tracking_requests(self, now, *, status=None, scac=None, request_number=None, q=None,
                          created_start=None, created_end=None, updated_start=None, updated_end=None) -> Sequence[dict]:
        """Tracking requests newest first, filtered like `GET /tracking_requests` (all filters AND)."""
        t = _now(now)
        cs, ce, us, ue = (parse_iso(x) for x in (created_start, created_end, updated_start, updated_end))
        statuses = _as_set(status)
        scacs = {s.upper() for s in _as_set(scac)} if scac else None
        rn = request_number.strip().lower() if request_number else None
        ql = q.strip().lower() if q else None
        # API-created ones (few): evaluated one by one
        api: list[int] = []
        for req in sorted(self.api_requests, key=lambda r: (r.created_at, r.k), reverse=True):
            st, upd, sc = self._api_state(req, t)
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
            api.append(self.seeded_tr_count + req.k)
        # seeded ones: vectorised on the numpy arrays, text filters through the lazy index
        order = self.tr_order
        pending = t < self.tr_resolve
        mask = np.ones(len(order), dtype=bool)
        created_sorted = self.tr_created[order]
        updated_sorted = np.where(pending, self.tr_created, self.tr_resolve)[order]
        if statuses:
            st_code = np.where(pending, 1, np.where(self.tr_kind == 0, 0, 2))[order]
            mask &= np.isin(st_code, [STATUS_CODES.index(s) for s in statuses if s in STATUS_CODES])
        for lo, hi, arr in ((cs, ce, created_sorted), (us, ue, updated_sorted)):
            if lo is not None:
                mask &= arr >= lo
            if hi is not None:
                mask &= arr <= hi
        positions = order[mask]
        if scacs or rn or ql:
            texts = self.search_index().tracking_text()
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
                       lambda p: self.tracking_request_resource(api[p] if p < na else int(seeded[p - na]), t))

    def seeded_tr_text(self, tr: int) -> str:
        """"number SEP scac SEP refs" (lower case) of seeded tracking request `tr`, for filters."""
        if tr < self.n:
            ident = self.identity(tr)
            return SEP.join([ident.request_number.lower(), ident.carrier.scac.lower(),
                             " ".join(ident.ref_numbers).lower()])
        f = self._failing(tr - self.n)
        return SEP.join([f["number"].lower(), (f["scac"] or "").lower(), " ".join(f["refs"]).lower()])

    def _failing(self, j: int) -> dict:
        rng = rng_for(self.world.seed, self.name, "failing", j)
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

    def tracking_request_resource(self, tr: int, now: int, *, creation_response: bool = False) -> dict:
        """A `tracking_request` resource (live shape: shipment_tags, is_retrying, retry_count)."""
        tid = self.tr_id(tr)
        tracked = None
        if tr < self.n:
            ident = self.identity(tr)
            attrs = {"request_number": ident.request_number, "request_type": ident.request_type,
                     "scac": ident.carrier.scac, "ref_numbers": list(ident.ref_numbers),
                     "shipment_tags": list(ident.tags), "created_at": iso(int(self.tr_created[tr])),
                     "updated_at": iso(int(self.tr_resolve[tr])), "status": "created", "failed_reason": None,
                     "is_retrying": False, "retry_count": None}
            tracked = self.shipment_id(tr)
            customer = self.party_id(ident.party) if ident.party is not None else None
        elif tr < self.seeded_tr_count:
            j = tr - self.n
            f = self._failing(j)
            created, resolve = int(self.tr_created[tr]), int(self.tr_resolve[tr])
            pending = now < resolve
            retrying = f["reason"] in ("retries_exhausted", "expired")
            retries = _retries(now - created) if pending and retrying else (14 if retrying else None)
            attrs = {"request_number": f["number"], "request_type": f["type"], "scac": f["scac"],
                     "ref_numbers": list(f["refs"]), "shipment_tags": [], "created_at": iso(created),
                     "updated_at": iso(created if pending else resolve),
                     "status": "pending" if pending else "failed",
                     "failed_reason": None if pending else f["reason"],
                     "is_retrying": bool(pending and retrying), "retry_count": retries}
            customer = self.party_id(f["party"])
        else:
            req = self.api_requests[tr - self.seeded_tr_count]
            st, upd, sc = self._api_state(req, now)
            attrs = {"request_number": req.attrs.get("request_number"),
                     "request_type": req.attrs.get("request_type") or "bill_of_lading", "scac": sc,
                     "ref_numbers": [] if creation_response else list(req.attrs.get("ref_numbers") or []),
                     "shipment_tags": list(req.attrs.get("shipment_tags") or []),
                     "created_at": iso(req.created_at), "updated_at": iso(upd), "status": st,
                     "failed_reason": req.failed_reason if st == "failed" else None,
                     "is_retrying": False, "retry_count": None}
            if st == "created" and req.shipment_index is not None:
                tracked = self.shipment_id(req.shipment_index)
            customer = req.customer_id
        return {
            "id": tid, "type": "tracking_request", "attributes": attrs,
            "relationships": {
                "tracked_object": {"data": {"id": tracked, "type": "shipment"} if tracked else None},
                "customer": {"data": {"id": customer, "type": "party"} if customer else None},
                "user": {"data": None},
            },
            "links": {"self": f"/v2/tracking_requests/{tid}"},
        }

    def _api_state(self, req: ApiRequest, now: int) -> tuple[str, int, str | None]:
        """(status, updated_at, scac) of an API-created request at `now`."""
        given = req.attrs.get("scac")
        if now < req.resolve_at:
            return "pending", req.created_at, given.upper() if given else None
        return req.outcome, req.resolve_at, req.scac

    def create_tracking_request(self, attributes: dict, customer_id: str | None, now) -> dict:
        """Record a new tracking request (pending); it resolves 20-90 sim seconds later to `created`
        (a new shipment appears) or `failed` with the live failed_reason."""
        t = _now(now)
        attrs = dict(attributes)
        number = str(attrs.get("request_number") or "").strip()
        if not number:
            raise ValidationIssue("/data/attributes/request_number", "Request number can't be blank", "blank")
        scac = (attrs.get("scac") or "").strip().upper() or None
        ref = self.world.ref
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
        with self._lock:
            k = len(self.api_requests)
            tr = self.seeded_tr_count + k
            delay = 20 + stable_int(self.world.seed, self.name, "delay", k, number) % 71
            req = ApiRequest(k, self.tr_id(tr), attrs, customer_id, t, t + delay, outcome,
                             final_scac if outcome == "created" else scac, reason)
            if outcome == "created":
                req.shipment_index = self.n + k
            self.api_requests.append(req)
        return self.tracking_request_resource(tr, t, creation_response=True)

    def create_party(self, company_name: str, now) -> dict:
        """Add a customer party (overlay) and return its resource."""
        with self._lock:
            self.api_parties.append(company_name)
            p = len(self.party_names) + len(self.api_parties) - 1
        return self._party_resource(p, company_name)

    # ----- single resources ----------------------------------------------------------------------

    def get(self, type_: str, id_: str, now) -> dict | None:
        """Any resource visible to this account (or reference data) by JSON:API type and id."""
        t = _now(now)
        w = self.world
        if type_ == "port":
            return w.get_port(id_)
        if type_ == "terminal":
            return w.get_terminal(id_)
        if type_ == "vessel":
            return w.get_vessel(id_, now if isinstance(now, datetime) else datetime.fromtimestamp(t, tz=UTC))
        if type_ == "shipping_line":
            return w.get_shipping_line(id_)
        if type_ == "document":
            return next((d for d in self.documents_list if d["id"] == id_), None)
        dec = self.codec.decode(id_)
        if dec is None or dec[0] != type_:
            return None
        kind, index, sub = dec
        if kind == "party":
            names = self.party_names + self.api_parties
            return self._party_resource(index, names[index]) if index < len(names) else None
        if kind == "tracking_request":
            if index < self.seeded_tr_count or index - self.seeded_tr_count < len(self.api_requests):
                return self.tracking_request_resource(index, t)
            return None
        if not self._shipment_visible(index, t):
            return None
        plan = self.plan(index)
        if kind == "shipment":
            return render.shipment_resource(self, plan, t)
        if kind == "container":
            return render.container_resource(self, plan, sub, t) if sub < len(plan.containers) else None
        if kind == "transport_event":
            slot, seq = divmod(sub, 64)
            if slot >= len(plan.containers):
                return None
            ev = next((e for e in plan.containers[slot].detail().events if e.seq == seq), None)
            if ev is None or not render.event_live(ev, t):
                return None
            return render.event_resource(self, plan, slot, ev, t)
        return None

    def _container_ref(self, container_id: str, now: int) -> tuple[Plan, int] | None:
        dec = self.codec.decode(container_id)
        if dec is None or dec[0] != "container" or not self._shipment_visible(dec[1], now):
            return None
        plan = self.plan(dec[1])
        return (plan, dec[2]) if dec[2] < len(plan.containers) else None

    def transport_events(self, container_id: str, now) -> list[dict] | None:
        """Events of a container known by `now`, oldest first (invalidated ones flagged, still listed)."""
        t = _now(now)
        found = self._container_ref(container_id, t)
        if found is None:
            return None
        plan, slot = found
        return [render.event_resource(self, plan, slot, e, t) for e in plan.containers[slot].detail().events
                if render.event_live(e, t)]

    def map_geojson(self, container_id: str, now) -> dict | None:
        """The container's route FeatureCollection at `now` (None: no such container)."""
        t = _now(now)
        found = self._container_ref(container_id, t)
        if found is None:
            return None
        return mapgeo.build(found[0], t, self.world.ref, self.world.fleet)

    # ----- patches -------------------------------------------------------------------------------

    def patch_shipment(self, id_, now, *, ref_numbers=None, tags=None) -> dict | None:
        """Overlay ref_numbers and/or tags on a shipment; returns the updated resource."""
        t = _now(now)
        dec = self.codec.decode(id_)
        if dec is None or dec[0] != "shipment" or not self._shipment_visible(dec[1], t):
            return None
        with self._lock:
            patch = self.shipment_patches.setdefault(id_, {})
            if ref_numbers is not None:
                patch["ref_numbers"] = [str(r) for r in ref_numbers]
            if tags is not None:
                patch["tags"] = list(dict.fromkeys(str(x) for x in tags))
            if self._index is not None:
                self._index.refresh(dec[1])
        return render.shipment_resource(self, self.plan(dec[1]), t)

    def patch_container(self, id_, now, *, ref_numbers=None) -> dict | None:
        """Overlay ref_numbers on a container; returns the updated resource."""
        t = _now(now)
        found = self._container_ref(id_, t)
        if found is None:
            return None
        with self._lock:
            if ref_numbers is not None:
                self.container_patches[id_] = {"ref_numbers": [str(r) for r in ref_numbers]}
            if self._index is not None:
                self._index.refresh(found[0].ident.index)
        return render.container_resource(self, found[0], found[1], t)

    # ----- deep links ----------------------------------------------------------------------------

    def search_index(self) -> SearchIndex:
        """The account's search index, built on first use."""
        with self._lock:
            if self._index is None:
                self._index = SearchIndex(self)
            return self._index

    def _effective_refs(self, i: int, ident: Identity | None = None) -> tuple[list[str], list[list[str]]]:
        """(shipment refs, refs per container) with patches applied."""
        ident = ident or self.identity(i)
        sp = self.shipment_patches.get(self.shipment_id(i), {})
        srefs = sp.get("ref_numbers", ident.ref_numbers)
        crefs = [self.container_patches.get(self.container_id(i, c.slot), {}).get("ref_numbers", c.ref_numbers)
                 for c in ident.containers]
        return srefs, crefs

    def find_for_deeplink(self, query: str, now) -> tuple[str, str | None] | None:
        """(shipment_id, container_id or None) for the web app's `/shipments/find?q=`, by the spec's
        order: exact container, exact shipment/ref number, partial container, partial shipment."""
        t = _now(now)
        raw = (query or "").strip()
        if not raw:
            return None
        low, cnum = raw.lower(), norm_container(raw)
        index = self.search_index()
        api = self._api_shipments(t)
        # 1. exact container number
        for i in api:
            for c in self.identity(i).containers:
                if c.number.upper() == cnum:
                    return self.shipment_id(i), self.container_id(i, c.slot)
        hits = index.exact_container.get(cnum)
        if hits:
            i = min(hits)
            slot = next(c.slot for c in self.identity(i).containers if c.number == cnum)
            return self.shipment_id(i), self.container_id(i, slot)
        # 2. exact shipment number or reference number (patched values win)
        candidates: list[int] = []
        for i in api:
            ident = self.identity(i)
            srefs, crefs = self._effective_refs(i)
            keys = {ident.bl_number.lower(), ident.normalized_number.lower(), *(r.lower() for r in srefs),
                    *(r.lower() for refs in crefs for r in refs)}
            if low in keys:
                return self.shipment_id(i), None
        candidates += index.exact_number.get(low, [])
        candidates += [i for i in index.exact_ref.get(low, []) if self._has_ref(i, low)]
        candidates += [i for i in self._patched_indices() if i < self.n and self._has_ref(i, low)]
        if candidates:
            return self.shipment_id(min(candidates)), None
        # 3. first container by partial match
        for i in api:
            for c in self.identity(i).containers:
                if cnum and cnum in c.number.upper():
                    return self.shipment_id(i), self.container_id(i, c.slot)
        if cnum:
            for g, number in enumerate(index.cont_numbers):
                if cnum in number:
                    i = int(np.searchsorted(self.prefix, g, side="right")) - 1
                    return self.shipment_id(i), self.container_id(i, g - int(self.prefix[i]))
        # 4. first shipment by partial match
        found = self.matching_shipments(t, q=raw)
        if found:
            return self.shipment_id(found[0]), None
        return None

    def _has_ref(self, i: int, low: str) -> bool:
        srefs, crefs = self._effective_refs(i)
        return low in {r.lower() for r in srefs} or low in {r.lower() for refs in crefs for r in refs}

    def _patched_indices(self) -> set[int]:
        out = set()
        for id_ in list(self.shipment_patches) + list(self.container_patches):
            dec = self.codec.decode(id_)
            if dec:
                out.add(dec[1])
        return out

    # ----- documents -----------------------------------------------------------------------------

    def create_document(self, name: str, blob: dict, now, *, shipment_id=None, container_id=None) -> dict:
        """Record a document attached to an uploaded blob (overlay) and return its resource."""
        t = _now(now)
        with self._lock:
            did = self.codec.encode("document", len(self.documents_list))
            doc = {
                "id": did, "type": "document",
                "attributes": {
                    "name": name, "document_type": None, "document_type_manual": None,
                    "classification_notes": None, "source": "api", "file_name": blob.get("filename"),
                    "file_content_type": blob.get("content_type"), "file_size_bytes": blob.get("byte_size"),
                    "created_at": iso(t), "updated_at": iso(t),
                },
                "relationships": {
                    "shipments": {"data": [{"id": shipment_id, "type": "shipment"}] if shipment_id else []},
                    "containers": {"data": [{"id": container_id, "type": "container"}] if container_id else []},
                },
                "links": {"self": f"/v2/documents/{did}"},
            }
            self.documents_list.append(doc)
        return doc

    def documents(self) -> Sequence[dict]:
        """Documents created through the API, newest first."""
        return list(reversed(self.documents_list))


def _as_set(value) -> set[str]:
    if value is None:
        return set()
    if isinstance(value, str):
        return {v.strip() for v in value.split(",") if v.strip()}
    return {str(v) for v in value}


def _in_range(ts: int, lo: int | None, hi: int | None) -> bool:
    return (lo is None or ts >= lo) and (hi is None or ts <= hi)


def _retries(elapsed: int) -> int:
    """Retries made after `elapsed` seconds with exponential backoff from 10 minutes (max 14)."""
    count, wait, t = 0, 600, 600
    while t <= elapsed and count < 14:
        count += 1
        wait *= 2
        t += wait
    return count


