"""Lazily built search indexes of one account: shipments `q`/`number`, tracking-request filters and
the web app's deep-link resolution.

Indexes cover the seeded rows and are built on first use (a 100k account pays once, and only when a
search is made). Rows touched by overlays (patches, API-created shipments) are evaluated directly at
query time, so patched ref numbers and tags are always searchable.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

if TYPE_CHECKING:  # pragma: no cover
    from .accounts import Account

SEP = "\x00"


def norm_container(text: str) -> str:
    """Container-number form of a query: upper case without spaces and dashes."""
    return "".join(text.split()).replace("-", "").upper()


class SearchIndex:
    """Search structures over the seeded shipments and tracking requests of an account."""

    def __init__(self, acct: Account) -> None:
        self.acct = acct
        n = acct.n
        self.ship_text: list[str] = [""] * n       # lower-case searchable text per seeded shipment
        self.request_number: list[str] = [""] * n  # lower-case tracking request number per shipment
        self.cont_numbers: list[str] = []          # flat, aligned with the account's container prefix sums
        self.exact_container: dict[str, list[int]] = {}
        self.exact_number: dict[str, list[int]] = {}   # BL / normalized number -> shipment indices
        self.exact_ref: dict[str, list[int]] = {}      # shipment or container ref -> shipment indices
        self._tr_parts: list[tuple[str, str, str]] = []
        for i in range(n):
            self._add_shipment(i, acct.seeded_identity(i))
        self.tr_text: list[str] | None = None

    def _add_shipment(self, i: int, ident) -> None:
        self.request_number[i] = ident.request_number.lower()
        self._tr_parts.append((self.request_number[i], ident.carrier.scac.lower(), " ".join(ident.ref_numbers).lower()))
        self.ship_text[i] = self.acct.shipment_search_text(i, ident)
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
        if 0 <= i < self.acct.n:
            self.ship_text[i] = self.acct.shipment_search_text(i, self.acct.identity(i))

    # ----- tracking requests ---------------------------------------------------------------------

    def tracking_text(self) -> list[str]:
        """Per seeded tracking request: lower-case "request_number SEP scac SEP refs" (built lazily)."""
        if self.tr_text is None:
            acct = self.acct
            self.tr_text = [SEP.join([num, scac, refs]) for num, scac, refs in self._tr_parts]
            self.tr_text += [acct.seeded_tr_text(t) for t in range(acct.n, acct.seeded_tr_count)]
        return self.tr_text
