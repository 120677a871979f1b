"""Lookups a batch needs once: shipping lines (GET /shipping_lines), parties (GET /parties, POST when
missing) and warehouse ids for container / bill of lading numbers."""

from __future__ import annotations

import json
from typing import Any

import duckdb

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import ApiError, WriteOutcomeUnknownError
from pipelines.journals.writes import WritebackStore, error_summary
from pipelines.settings import DATASET_NAME, PAGE_SIZE


def fetch_carriers(client: OceanTrackingClient) -> dict[str, dict[str, Any]]:
    """SCAC (and every alternative SCAC) → shipping-line attributes, from one walk of GET /shipping_lines."""
    carriers: dict[str, dict[str, Any]] = {}
    for page in client.paginate("/shipping_lines"):
        for line in page.get("data") or []:
            attrs = line.get("attributes") or {}
            for scac in [attrs.get("scac"), *(attrs.get("alternative_scacs") or [])]:
                if scac:
                    carriers.setdefault(str(scac).upper(), attrs)
    return carriers


class PartyResolver:
    """Company name → party id: the party list is fetched once; a missing party is created (POST /parties)
    once per batch, and in a dry run only reported."""

    def __init__(self, client: OceanTrackingClient | None, store: WritebackStore | None, *, dry_run: bool) -> None:
        self.client, self.store, self.dry_run = client, store, dry_run
        self._by_name: dict[str, str] | None = None

    def _load(self) -> dict[str, str]:
        if self._by_name is None:
            self._by_name = {}
            if self.client is not None:
                for page in self.client.paginate("/parties", {"page[size]": PAGE_SIZE}):
                    for party in page.get("data") or []:
                        name = (party.get("attributes") or {}).get("company_name")
                        if name:
                            self._by_name.setdefault(name.strip().casefold(), party["id"])
        return self._by_name

    def resolve(self, company_name: str) -> str | None:
        """The party id for a company name, creating the party when needed (None in a dry run)."""
        key = company_name.strip().casefold()
        known = self._load()
        if key in known or self.dry_run or self.client is None:
            return known.get(key)
        body = {"data": {"type": "party", "attributes": {"company_name": company_name.strip()}}}
        target = f"party:{company_name.strip()}"
        try:
            document = self.client.post("/parties", body)
        except WriteOutcomeUnknownError as exc:
            # the party may exist now: list again before deciding to send a second POST
            self._audit("create_party", target, "unknown", exc)
            self._by_name = None
            if key in self._load():
                return self._by_name[key]  # type: ignore[index]
            document = self.client.post("/parties", body)
        except ApiError as exc:
            self._audit("create_party", target, "failed", exc)
            raise
        party_id = ((document or {}).get("data") or {}).get("id")
        known[key] = party_id
        if self.store is not None:
            self.store.audit("create_party", target, "created", http_status=201)
        return party_id

    def _audit(self, action: str, target: str, outcome: str, exc: ApiError) -> None:
        if self.store is not None:
            self.store.audit(action, target, outcome, http_status=exc.status, error=error_summary(exc))


def resolve_in_warehouse(
    con: duckdb.DuckDBPyConnection | None, kind: str, number: str, dataset: str = DATASET_NAME
) -> tuple[str, list[str] | None] | None:
    """(id, ref_numbers) of a container (by number) or shipment (by bill of lading number) in the loaded
    warehouse tables, or None when the table or the row is missing."""
    if con is None:
        return None
    table, column = ("containers", "number") if kind == "container" else ("shipments", "bill_of_lading_number")
    try:
        row = con.execute(
            f"select id, cast(ref_numbers as varchar) from {dataset}.{table} "
            f"where upper(replace({column}, ' ', '')) = ? order by id limit 1",
            ["".join(number.split()).upper()],
        ).fetchone()
    except duckdb.Error:
        return None
    return (row[0], _json_list(row[1])) if row else None


def warehouse_refs(con: duckdb.DuckDBPyConnection | None, kind: str, id_: str,
                   dataset: str = DATASET_NAME) -> list[str] | None:
    """The ref_numbers the warehouse holds for a shipment/container id (None when unknown)."""
    if con is None:
        return None
    table = "containers" if kind == "container" else "shipments"
    try:
        row = con.execute(f"select cast(ref_numbers as varchar) from {dataset}.{table} where id = ?", [id_]).fetchone()
    except duckdb.Error:
        return None
    return _json_list(row[0]) if row else None


def _json_list(text: str | None) -> list[str] | None:
    if text is None:
        return None
    try:
        value = json.loads(text)
    except ValueError:
        return None
    return [str(v) for v in value] if isinstance(value, list) else None
