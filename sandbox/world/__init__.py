"""The sandbox world: reference data, the fleet, and accounts of shipments evolving with sim time.

See docs/sandbox-internals.md for the contract with the HTTP layer. Everything is deterministic from
the seed; every query takes `now`, so state is a pure function of (seed, account, overlays, now).
"""

from __future__ import annotations

from datetime import datetime
from typing import Literal

from .accounts import Account
from .clock import SimClock
from .fleet import Fleet
from .identifiers import imo_check_digit, iso6346_check_digit, stable_int
from .lifecycle import ValidationIssue
from .reference import Reference
from .routing import RouteBook
from .store import LazySeq
from .timeutil import to_epoch

__all__ = ["Account", "LazySeq", "SimClock", "ValidationIssue", "World", "imo_check_digit", "iso6346_check_digit"]


class World:
    """All accounts plus shared reference data, built lazily from `seed`."""

    def __init__(self, seed: int, shipments: int, start: datetime) -> None:
        """Build reference data, the fleet and the "primary" (`shipments` rows) and "basic"
        (max(50, shipments // 20) rows, another seed stream) accounts; `add_account` adds others. Rows are
        generated on demand."""
        self.seed = int(seed)
        self.start = start
        self.start_ts = to_epoch(start)
        self.ref = Reference.load()
        self.fleet = Fleet(self.seed, self.ref)
        self.routes = RouteBook(self.fleet)
        self.accounts: dict[str, Account] = {}
        self.add_account("primary", int(shipments))
        self.add_account("basic", max(50, int(shipments) // 20))

    def add_account(self, name: str, shipments: int | None = None) -> Account:
        """The account called `name`, added if new: `shipments` seeded rows (default: 50 % to 149 % of the
        primary's, at least 50 and at most 100_000, drawn from the seed and the name) from the name's own seed
        stream, so its ids, numbers and contents differ from every other account's. Only its arrays are drawn
        now (as for the primary); rows are generated on demand."""
        if name not in self.accounts:
            if shipments is None:
                share = 50 + stable_int(self.seed, name, "size") % 100
                shipments = min(100_000, max(50, self.accounts["primary"].n * share // 100))
            self.accounts[name] = Account(self, name, shipments, stable_int(self.seed, name) % 2**63)
        return self.accounts[name]

    def account(self, name: str) -> Account:
        """The account called `name` (KeyError if there is none)."""
        return self.accounts[name]

    def get_port(self, id_or_locode: str) -> dict | None:
        """A port resource by UUID or UN/LOCODE."""
        port = self.ref.find_port(id_or_locode)
        return self.ref.port_resource(port) if port else None

    def get_terminal(self, terminal_id: str) -> dict | None:
        """A terminal resource by UUID."""
        t = self.ref.terminals.get(str(terminal_id).lower())
        return self.ref.terminal_resource(t) if t else None

    def get_vessel(self, id_or_imo: str, now: datetime) -> dict | None:
        """A vessel resource by UUID or IMO, with its position at `now`."""
        v = self.fleet.find(id_or_imo)
        return self.fleet.vessel_resource(v, to_epoch(now)) if v else None

    def shipping_lines(self) -> list[dict]:
        """Every carrier of the live `/shipping_lines` capture plus the vendor CSV's extra rows (deduplicated
        by SCAC and alternative SCACs), in SCAC order as live."""
        return [self.ref.shipping_line_resource(c) for c in self.ref.carriers.values()]

    def carrier_prefixes(self) -> list[dict]:
        """The shipping lines as `shipping_line` resources whose attributes also carry `bol_prefix` (the
        carrier's bill-of-lading prefix, as the live CLI capture shows it): what infer_number matches on.
        The TEST line is left out (never inferred)."""
        out = []
        for c in self.ref.carriers.values():
            if c.scac == "TEST":
                continue
            res = self.ref.shipping_line_resource(c)
            res["attributes"]["bol_prefix"] = c.bol_prefix
            out.append(res)
        return out

    def get_shipping_line(self, id: str) -> dict | None:
        """A shipping line resource by UUID (a SCAC is accepted too)."""
        c = self.ref.carriers_by_id.get(str(id).lower()) or self.ref.carrier(str(id))
        return self.ref.shipping_line_resource(c) if c else None

    def carrier_support(self, scac: str) -> Literal["supported", "unsupported", "unknown"]:
        """Whether a SCAC is a supported, recognised-but-unsupported or unknown carrier."""
        return self.ref.carrier_support(scac)

    def warm_up(self, indexes: bool = False) -> None:
        """Load the sea-lane network now (~2.5 s) so the first map/vessel request is fast; with
        `indexes`, also build every account's search index (~5 s for 100k shipments)."""
        from .lanes import warm_up

        warm_up()
        if indexes:
            for acct in self.accounts.values():
                acct.search_index().tracking_text()
