"""What decides the next fetch and what is worth loading, kept in the warehouse, not in dlt state.

The table `fetch_log` has one row per item the pipeline has decided on: `kind`, `item_id`, a 64-bit
`digest` of what was last loaded (or of what decides the next fetch), and for maps the container's
`phase` and when the map was `fetched_at`. The kinds:

- `shipment`: a shipment with its containers and their included events, as a page brought them. An
  unchanged bundle is not loaded again (on the lake every merged row is a rewritten row: an unchanged
  sync must not grow the disk);
- `transport_events`: a container's event ids, so its events are fetched only when they changed (when a
  page did not include them);
- `map`: the phase the container's route map was fetched in and when (`pipelines.extract.map_schedule`);
- `terminal`, `port`, `vessel`: reference rows, fetched by id at most once (a null digest: known, no
  content, such as a reference the service no longer has), and loaded again only when they changed;
- `party`, `shipping_line`, `custom_field_definition`, `custom_field`: rows of the lists read whole each
  sync, loaded only when they changed.
  (Tracking requests are not logged: their dlt cursor already reads only what changed, plus a lag window.)

A sync reads the log once, at its start, with one query, into a compact in-memory index (two sorted
64-bit arrays: 16 bytes an item, about 10 MB at 100k shipments), and writes the rows that changed into
the same load package as the data they describe, so a crash never separates the two: dlt finishes an
interrupted package on the next run. dlt state keeps cursors only. Before this table the same decisions
lived in dlt state (28 MB at 95k shipments, stored again on every sync); `adopt_legacy_state` moves
them here once.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime
from typing import Any

import dlt
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc

from pipelines.extract.loaded import loaded_rows, query_loaded
from pipelines.extract.map_schedule import due_by_age_sql
from pipelines.extract.routing import routed_rows

logger = logging.getLogger(__name__)

TABLE = "fetch_log"
COLUMNS: dict[str, dict[str, Any]] = {
    "kind": {"data_type": "text", "nullable": False},
    "item_id": {"data_type": "text", "nullable": False},
    "digest": {"data_type": "bigint", "nullable": True},
    "phase": {"data_type": "text", "nullable": True},
    "fetched_at": {"data_type": "timestamp", "nullable": True},
}
# Kinds seen on more than one page in a sync (a terminal named by many shipments): remembered in memory
# for the rest of the sync as soon as they are recorded.
REPEATED_KINDS = frozenset({"terminal", "port", "vessel"})
# Kinds loaded at most once a sync: once recorded, unchanged for the rest of it whatever their digest. A
# shipment can come back on a later page (the list shifted while it was paged); loading its bundle again
# would put the same events in the load package twice, and `transport_events` is merged without ranking
# its staged rows by key (a window over every event: +837 MiB at 100k shipments). A version that changed
# between two pages is loaded by the next sync: its logged digest is the first one's.
ONCE_A_SYNC_KINDS = frozenset({"shipment", "transport_events"})


def digest(value: Any) -> int:
    """A stable signed 64-bit digest of a JSON-like value (keys sorted): equal content, equal digest."""
    encoded = orjson.dumps(value, option=orjson.OPT_SORT_KEYS | orjson.OPT_NON_STR_KEYS)
    return int.from_bytes(hashlib.blake2b(encoded, digest_size=8).digest(), "big", signed=True)


def _key(kind: str, item_id: str) -> int:
    return int.from_bytes(hashlib.blake2b(f"{kind}/{item_id}".encode(), digest_size=8).digest(), "big", signed=True)


# A digest stands for "known, no content" when the row has none (null in the table).
_NO_DIGEST = np.iinfo(np.int64).min


class FetchLog:
    """One sync's view of `fetch_log`: what was known at its start, plus what this sync recorded.

    Build one per source run (`read_fetch_log`). Resources ask `changed` / `unknown` / `map_phase`, call
    `record` for each item they loaded or fetched, and yield `pending()` to write those rows."""

    def __init__(self, keys: np.ndarray | None = None, digests: np.ndarray | None = None,
                 map_fetched_due: Iterable[str] = ()) -> None:
        keys = np.asarray([] if keys is None else keys, dtype=np.int64)
        digests = np.asarray([] if digests is None else digests, dtype=np.int64)
        order = np.argsort(keys, kind="stable")
        self._keys = keys[order]
        self._digests = digests[order]
        self._due_by_age = set(map_fetched_due)
        self._recorded: dict[int, int] = {}  # this sync's records of REPEATED_KINDS
        self._loaded: set[int] = set()  # this sync's records of ONCE_A_SYNC_KINDS
        self._rows: list[dict[str, Any]] = []

    def __len__(self) -> int:
        return len(self._keys)

    def _lookup(self, kind: str, item_ids: list[str]) -> list[int | None]:
        """The logged digest of each item (`_NO_DIGEST` for a null one), None where the item is unknown."""
        if not item_ids:
            return []
        wanted = np.fromiter((_key(kind, item_id) for item_id in item_ids), dtype=np.int64, count=len(item_ids))
        found: list[int | None] = [None] * len(item_ids)
        if len(self._keys):
            at = np.minimum(np.searchsorted(self._keys, wanted), len(self._keys) - 1)
            hit = self._keys[at] == wanted
            for i in np.flatnonzero(hit):
                found[i] = int(self._digests[at[i]])
        if self._recorded:
            for i, key in enumerate(wanted.tolist()):
                if key in self._recorded:
                    found[i] = self._recorded[key]
        return found

    def changed(self, kind: str, items: list[tuple[str, int]]) -> list[bool]:
        """For each `(item_id, digest)`: True when the item is unknown or its digest differs from the log's."""
        logged = self._lookup(kind, [item_id for item_id, _ in items])
        changed = [known is None or known != value for (_, value), known in zip(items, logged, strict=True)]
        if kind in ONCE_A_SYNC_KINDS and self._loaded:
            changed = [is_changed and _key(kind, item_id) not in self._loaded
                       for (item_id, _), is_changed in zip(items, changed, strict=True)]  # fmt: skip
        return changed

    def unknown(self, kind: str, item_ids: Iterable[str]) -> list[str]:
        """The ids the log has never recorded under `kind`, sorted."""
        ids = sorted(set(item_ids))
        return [item_id for item_id, known in zip(ids, self._lookup(kind, ids), strict=True) if known is None]

    def map_due(self, containers: list[tuple[str, str]]) -> list[str]:
        """The containers, given as `(id, phase)`, whose route map is due: never fetched, fetched in
        another phase, or fetched long enough ago for its phase (`map_schedule.DUE_BY_AGE_SQL`, read at
        the start of the sync)."""
        logged = self._lookup("map", [container_id for container_id, _ in containers])
        return [
            container_id
            for (container_id, phase), known in zip(containers, logged, strict=True)
            if known is None or known != digest(phase) or container_id in self._due_by_age
        ]

    def record(self, kind: str, item_id: str, value: int | None = None, *, phase: str | None = None,
               fetched_at: datetime | None = None, remember: bool = False) -> None:
        """Record an item loaded or fetched in this sync; written with this sync's load package. Items of
        `REPEATED_KINDS`, or with `remember`, also count as known for the rest of the sync; items of
        `ONCE_A_SYNC_KINDS` as unchanged."""
        if kind in ONCE_A_SYNC_KINDS:
            self._loaded.add(_key(kind, item_id))
        if remember or kind in REPEATED_KINDS:
            self._recorded[_key(kind, item_id)] = _NO_DIGEST if value is None else value
        self._rows.append({"kind": kind, "item_id": item_id, "digest": value, "phase": phase,
                           "fetched_at": fetched_at})

    def record_map(self, container_id: str, phase: str, fetched_at: datetime, *, remember: bool = False) -> None:
        """Record a route map fetched in `phase`: due again when the phase changes or the map ages."""
        self.record("map", container_id, digest(phase), phase=phase, fetched_at=fetched_at, remember=remember)

    def pending(self) -> list[Any]:
        """The rows recorded since the last call, as one item routed to `fetch_log` (or none)."""
        if not self._rows:
            return []
        rows, self._rows = self._rows, []
        return [routed_rows(rows, TABLE, ("kind", "item_id"), COLUMNS)]

    def changed_rows(self, kind: str, rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The rows (each with an `id`) whose content changed since the log's digest, each recorded."""
        digests = [(row["id"], digest(row)) for row in rows]
        for row, (item_id, value), changed in zip(rows, digests, self.changed(kind, digests), strict=True):
            if changed:
                self.record(kind, item_id, value)
                yield row


def load_fetch_log(pipeline: dlt.Pipeline, map_refresh_seconds: float, now: datetime | None = None) -> FetchLog:
    """Read the log from `pipeline`'s destination with two queries (`pipelines.extract.loaded`): every
    item's digest, in batches, and the containers whose map is due by age. Empty when the destination has
    no log yet."""
    started = time.perf_counter()
    due_sql = due_by_age_sql(TABLE, now or datetime.now(UTC), map_refresh_seconds)
    keys, digests = index_batches(query_loaded(pipeline, f"select kind, item_id, digest from {TABLE}", TABLE))
    due = [row["item_id"] for row in loaded_rows(pipeline, due_sql, TABLE)]
    log = FetchLog(keys, digests, map_fetched_due=due)
    if len(log):
        logger.info("Read the fetch log: %d items (%d maps due by age) in %.2f s", len(log), len(due),
                    time.perf_counter() - started)
    return log


def index_batches(batches: Iterable[Any]) -> tuple[np.ndarray, np.ndarray]:
    """Arrow batches of `kind, item_id, digest` as two int64 arrays: the item keys and their digests."""
    keys: list[np.ndarray] = []
    digests: list[np.ndarray] = []
    for batch in batches:
        kinds = batch.column("kind").to_pylist()
        ids = batch.column("item_id").to_pylist()
        keys.append(np.fromiter((_key(k, i) for k, i in zip(kinds, ids, strict=True)), dtype=np.int64,
                                count=len(ids)))
        values = pc.fill_null(batch.column("digest").cast(pa.int64()), _NO_DIGEST)
        digests.append(values.to_numpy())
    if not keys:
        return np.empty(0, np.int64), np.empty(0, np.int64)
    return np.concatenate(keys), np.concatenate(digests)


def adopt_legacy_state(log: FetchLog, source_state: dict[str, Any]) -> int:
    """Move what older versions kept in dlt state into the log, once, and drop it from the state.

    Without it the first sync after an upgrade would fetch every map, every container's events and every
    reference again (a day of rate budget at 100k shipments). An adopted map is not due by age in that
    one sync (its age is read from the table, which it reaches with this sync). Returns the number of
    items adopted."""
    adopted = 0
    for container_id, event_ids in (source_state.pop("event_ids_by_container", None) or {}).items():
        log.record("transport_events", container_id, digest(sorted(event_ids)), remember=True)
        adopted += 1
    for type_, ids in (source_state.pop("fetched_ids", None) or {}).items():
        for item_id in ids:
            log.record(type_, item_id, remember=True)
            adopted += 1
    map_state = source_state.get("resources", {}).get("map_features", {})
    for container_id, (phase, fetched_at) in (map_state.pop("schedule", None) or {}).items():
        log.record_map(container_id, str(phase), datetime.fromtimestamp(float(fetched_at), UTC), remember=True)
        adopted += 1
    if adopted:
        logger.warning("Moved %d fetch decisions from the pipeline state into the %s table (once).", adopted, TABLE)
    return adopted


class SyncFetchLog:
    """The fetch log of one source run, read on first use: inside the extraction, so after the pending
    load is finished and from the pipeline that runs the source, whatever its destination."""

    def __init__(self, map_refresh_seconds: float) -> None:
        self._refresh_seconds = map_refresh_seconds
        self._log: FetchLog | None = None

    def get(self) -> FetchLog:
        """The log, read from the running pipeline's destination the first time."""
        if self._log is None:
            self._log = load_fetch_log(dlt.current.pipeline(), self._refresh_seconds)
            adopt_legacy_state(self._log, dlt.current.source_state())
        return self._log

    def pending(self) -> list[Any]:
        """The log rows recorded since the last call, routed to their table (see `FetchLog.pending`)."""
        return self._log.pending() if self._log is not None else []
