"""Search over one account: a lazily built index of its seeded rows, and the queries answered from it
(shipments `q`/`number`, tracking-request text filters, the web app's deep-link resolution).

The index covers the seeded rows and is built on first use (a 100k account pays once, and only when a
search is made). Rows touched by overlays (patches, API-created shipments) are evaluated directly at
query time, so patched ref numbers and tags are always searchable.
"""

from __future__ import annotations

from .identifiers import norm_container
from .shipments import Identity
from .store import AccountStore

SEP = "\x00"


def shipment_search_text(store: AccountStore, i: int, ident: Identity) -> str:
    """Lower-case searchable text of a shipment, with patched ref numbers applied."""
    if not (store.shipment_patches or store.container_patches):  # fast path: no overlay to consult
        parts = [ident.bl_number, ident.normalized_number, *ident.ref_numbers]
        for c in ident.containers:
            parts.append(c.number)
            parts.extend(c.ref_numbers)
        return SEP.join(parts).lower()
    srefs, crefs = store.effective_refs(i, ident)
    parts = [ident.bl_number, ident.normalized_number, *srefs]
    for c, refs in zip(ident.containers, crefs, strict=True):
        parts.append(c.number)
        parts.extend(refs)
    return SEP.join(parts).lower()


def seeded_tr_text(store: AccountStore, tr: int) -> str:
    """"number SEP scac SEP refs" (lower case) of seeded tracking request `tr`, for filters."""
    if tr < store.n:
        ident = store.identity(tr)
        return SEP.join([ident.request_number.lower(), ident.carrier.scac.lower(),
                         " ".join(ident.ref_numbers).lower()])
    f = store.failing(tr - store.n)
    return SEP.join([f["number"].lower(), (f["scac"] or "").lower(), " ".join(f["refs"]).lower()])


class SearchIndex:
    """Search structures over the seeded shipments and tracking requests of an account."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store
        n = store.n
        self.ship_text: list[str] = [""] * n       # lower-case searchable text per seeded shipment
        self.request_number: list[str] = [""] * n  # lower-case tracking request number per shipment
        self.cont_numbers: list[str] = []          # flat, aligned with the account's container prefix sums
        self.exact_container: dict[str, list[int]] = {}
        self.exact_number: dict[str, list[int]] = {}   # BL / normalized number -> shipment indices
        self.exact_ref: dict[str, list[int]] = {}      # shipment or container ref -> shipment indices
        self._tr_parts: list[tuple[str, str, str]] = []
        for i in range(n):
            self._add_shipment(i, store.seeded_identity(i))
        self.tr_text: list[str] | None = None

    def _add_shipment(self, i: int, ident: Identity) -> None:
        self.request_number[i] = ident.request_number.lower()
        self._tr_parts.append((self.request_number[i], ident.carrier.scac.lower(), " ".join(ident.ref_numbers).lower()))
        self.ship_text[i] = shipment_search_text(self.store, i, ident)
        for key in {ident.bl_number.lower(), ident.normalized_number.lower()}:
            self.exact_number.setdefault(key, []).append(i)
        for ref in ident.ref_numbers:
            self.exact_ref.setdefault(ref.lower(), []).append(i)
        for c in ident.containers:
            self.cont_numbers.append(c.number)
            self.exact_container.setdefault(c.number, []).append(i)
            for ref in c.ref_numbers:
                self.exact_ref.setdefault(ref.lower(), []).append(i)

    def refresh(self, i: int) -> None:
        """Recompute the searchable text of seeded shipment `i` after a patch."""
        if 0 <= i < self.store.n:
            self.ship_text[i] = shipment_search_text(self.store, i, self.store.identity(i))

    def tracking_text(self) -> list[str]:
        """Per seeded tracking request: lower-case "request_number SEP scac SEP refs" (built lazily)."""
        if self.tr_text is None:
            store = self.store
            self.tr_text = [SEP.join([num, scac, refs]) for num, scac, refs in self._tr_parts]
            self.tr_text += [seeded_tr_text(store, t) for t in range(store.n, store.seeded_tr_count)]
        return self.tr_text


class AccountSearch:
    """The search side of an account: owns its index (built on first use, refreshed on patches) and
    answers shipment filters and deep links over seeded rows and overlays alike."""

    def __init__(self, store: AccountStore) -> None:
        self.store = store
        self._index: SearchIndex | None = None

    def index(self) -> SearchIndex:
        """The account's search index, built on first use."""
        with self.store.lock:
            if self._index is None:
                self._index = SearchIndex(self.store)
            return self._index

    def refresh(self, i: int) -> None:
        """Bring shipment `i` up to date in the index after a patch (nothing to do before it is built)."""
        with self.store.lock:
            if self._index is not None:
                self._index.refresh(i)

    def matching_shipments(self, t: int, *, q: str | None = None, number: str | None = None) -> list[int]:
        """Shipment indices in list order matching the `q` / `number` filters."""
        store = self.store
        index = self.index()
        api = store.api_shipments(t)
        out: list[int] = []
        ql = q.strip().lower() if q else None
        nl = number.strip().lower() if number else None

        def ok(i: int, text: str, reqnum: str) -> bool:
            return (ql is None or ql in text) and (nl is None or nl == reqnum)

        for i in api:
            ident = store.identity(i)
            if ok(i, shipment_search_text(store, i, ident), ident.request_number.lower()):
                out.append(i)
        texts, reqs = index.ship_text, index.request_number
        if nl is not None and ql is None:
            out.extend(i for i in range(store.n) if reqs[i] == nl)
        elif nl is None:
            out.extend(i for i in range(store.n) if ql in texts[i])
        else:
            out.extend(i for i in range(store.n) if reqs[i] == nl and ql in texts[i])
        return out

    def find_for_deeplink(self, query: str, t: int) -> tuple[str, str | None] | None:
        """(shipment_id, container_id or None) for the web app's `/shipments/find?q=`, by the spec's
        order: exact container, exact shipment/ref number, partial container, partial shipment."""
        store = self.store
        raw = (query or "").strip()
        if not raw:
            return None
        low, cnum = raw.lower(), norm_container(raw)
        index = self.index()
        api = store.api_shipments(t)
        # 1. exact container number
        for i in api:
            for c in store.identity(i).containers:
                if c.number.upper() == cnum:
                    return store.shipment_id(i), store.container_id(i, c.slot)
        hits = index.exact_container.get(cnum)
        if hits:
            i = min(hits)
            slot = next(c.slot for c in store.identity(i).containers if c.number == cnum)
            return store.shipment_id(i), store.container_id(i, slot)
        # 2. exact shipment number or reference number (patched values win)
        candidates: list[int] = []
        for i in api:
            ident = store.identity(i)
            srefs, crefs = store.effective_refs(i)
            keys = {ident.bl_number.lower(), ident.normalized_number.lower(), *(r.lower() for r in srefs),
                    *(r.lower() for refs in crefs for r in refs)}
            if low in keys:
                return store.shipment_id(i), None
        candidates += index.exact_number.get(low, [])
        candidates += [i for i in index.exact_ref.get(low, []) if self._has_ref(i, low)]
        candidates += [i for i in store.patched_indices() if i < store.n and self._has_ref(i, low)]
        if candidates:
            return store.shipment_id(min(candidates)), None
        # 3. first container by partial match
        for i in api:
            for c in store.identity(i).containers:
                if cnum and cnum in c.number.upper():
                    return store.shipment_id(i), store.container_id(i, c.slot)
        if cnum:
            for g, number in enumerate(index.cont_numbers):
                if cnum in number:
                    i, slot = store.container_at(g)
                    return store.shipment_id(i), store.container_id(i, slot)
        # 4. first shipment by partial match
        found = self.matching_shipments(t, q=raw)
        if found:
            return store.shipment_id(found[0]), None
        return None

    def _has_ref(self, i: int, low: str) -> bool:
        srefs, crefs = self.store.effective_refs(i)
        return low in {r.lower() for r in srefs} or low in {r.lower() for refs in crefs for r in refs}
