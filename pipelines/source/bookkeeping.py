# longer than 500 lines because the fetch log and the sync issues are one bookkeeping: both ride in the resources' load packages (`routed_rows`) and are read back through `query_loaded`.
"""The source's bookkeeping, kept in the warehouse beside the data it describes, never in dlt state.

- `fetch_log` (`SyncFetchLog`, `FetchLog`): one row per item the pipeline has decided on: `kind`, `item_id`, a
  64-bit `digest` of what was last loaded (or of what decides the next fetch), and for maps the container's
  `phase` and when the map was `fetched_at`. The kinds: `shipment` (a shipment with its containers and their
  included events, as a page brought them: an unchanged bundle is not loaded again, since on the lake every
  merged row is a rewritten row); `transport_events` (a container's event ids, so its events are fetched only
  when they changed); `map` (the phase its route map was fetched in, and when: `pipelines.source.map_schedule`);
  `terminal`, `port`, `vessel` (reference rows fetched by id at most once, a null digest meaning known without
  content, and loaded again only when they changed); `party`, `shipping_line`, `custom_field_definition`,
  `custom_field` (rows of the lists read whole, each sync or on their cadence, loaded only when they changed). Tracking requests
  are not logged: their dlt cursor already reads only what changed, plus a lag window. A sync reads the log
  once, at its start, with one query, into a compact in-memory index (two sorted 64-bit arrays: 16 bytes an
  item, about 10 MB at 100k shipments). Before this table the same decisions lived in dlt state (28 MB at
  95k shipments, stored again on every sync); `adopt_legacy_state` moves them here once.
- `sync_issues` (`ItemIssues`): per-item requests (a container's route map or events, a terminal, port or
  vessel by id) that still fail after their retries are skipped, everything else loads, and the failure
  becomes a row (resource, item id, HTTP status, message, first and last seen, attempts). Every later sync
  asks again; when the item answers, dlt deletes the row through its `hard_delete` merge hint, so the table
  lists only what is broken now. Failures that mean the sync itself is wrong are never isolated: a rejected
  key (401) or a refusal (403; maps turn a missing routing entitlement into "maps off"), the rate budget
  exhausted (429 after every retry), no response at all, more than `MAX_FAILED_SHARE` of a resource's items
  failing in one sync (floor `TOLERATED_FAILURES`: the sync loads what arrived, then fails with one line), or
  `MAX_FAILURES_IN_A_ROW` new failures in a row (the service is down: the sync fails at once, committing
  nothing). An item that failed the last sync is asked again with `OPEN_ITEM_ATTEMPTS` attempts, not the full
  retries. The open issues live in the source state, which dlt commits with the load, so a killed sync
  changes nothing; this sync's tallies are stored under its load id (`issues_of_load`).

Both tables' rows ride along with whichever resource recorded them (`routed_rows`: dlt table variants), so
they land in the same load package as the data they describe and a crash never separates the two: dlt
finishes an interrupted package on the next run.

Reading back what was loaded (`query_loaded`, `loaded_rows`): the fetch log, the roster of departed shipments,
the events a targeted refresh need not fetch again and the map scheduler ask the destination a question in
DuckDB's SQL, through dlt's dataset, so any destination dlt reads answers (dlt transpiles the SQL); a Delta
lake is read with the `deltalake` library dlt uses and queried by an in-memory DuckDB, because dlt's dataset
would need DuckDB's `delta` extension, downloaded at first use.
"""

from __future__ import annotations

import hashlib
import logging
import time
from collections.abc import Callable, Iterable, Iterator
from contextlib import nullcontext
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any, TypeVar

import dlt
import duckdb
import numpy as np
import orjson
import pyarrow as pa
import pyarrow.compute as pc
from dlt.destinations.exceptions import DestinationUndefinedEntity

from pipelines.api.client import OceanTrackingClient
from pipelines.errors import (
    ApiError,
    AuthenticationError,
    AuthorizationError,
    NoResponseError,
    PipelineError,
    RateLimitedError,
)
from pipelines.source import TABLES
from pipelines.source.map_schedule import due_by_age_sql
from pipelines.warehouse.connections import in_memory_config

# Reading in batches keeps the transient Arrow memory small on a large account.
READ_BATCH_ROWS = 100_000


def loaded_tables(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """Tables of the pipeline's schema that have columns (a table dlt never loaded has none), by name."""
    if not pipeline.default_schema_name:
        return {}
    return {name: table for name, table in pipeline.default_schema.tables.items() if table.get("columns")}


def query_loaded(pipeline: dlt.Pipeline, sql: str, *tables: str,
                 batch_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Run `sql` (DuckDB's dialect) over the loaded `tables` it reads, as Arrow batches. Nothing when one
    of them was never loaded, or the destination lost it (the schema knows it, the destination does not)."""
    known = loaded_tables(pipeline)
    if not tables or any(table not in known for table in tables):
        return
    try:
        if any(known[table].get("table_format") == "delta" for table in tables):
            from dlt.common.libs.deltalake import get_delta_tables

            con = duckdb.connect(config=in_memory_config())
            try:
                for table, delta in get_delta_tables(pipeline, *tables).items():
                    con.register(table, delta.to_pyarrow_dataset())
                yield from con.execute(sql).fetch_record_batch(batch_rows)
            finally:
                con.close()
            return
        yield from pipeline.dataset().query(sql, query_dialect="duckdb").iter_arrow(batch_rows)
    except DestinationUndefinedEntity:
        return


def loaded_rows(pipeline: dlt.Pipeline, sql: str, *tables: str) -> list[dict[str, Any]]:
    """`query_loaded` as a list of row dicts (for small answers)."""
    return [row for batch in query_loaded(pipeline, sql, *tables) for row in batch.to_pylist()]


def routed_rows(rows: list[dict[str, Any]], table: str, primary_key: tuple[str, ...],
                columns: dict[str, dict[str, Any]]) -> Any:
    """`rows` as one item for `table`, merged on `primary_key`, with the given column hints."""
    hints = dlt.mark.make_hints(
        table_name=table,
        write_disposition="merge",
        primary_key=primary_key,
        merge_key="",  # a variant starts from its resource's hints: map_features merges on container_id
        columns={name: dict(hint) for name, hint in columns.items()},  # dlt writes into the hints it gets
    )
    return dlt.mark.with_hints(rows, hints, create_table_variant=True)


logger = logging.getLogger(__name__)

FETCH_LOG_TABLE = "fetch_log"
FETCH_LOG_COLUMNS: dict[str, dict[str, Any]] = {
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
        return [routed_rows(rows, FETCH_LOG_TABLE, ("kind", "item_id"), FETCH_LOG_COLUMNS)]

    def changed_rows(self, kind: str, rows: list[dict[str, Any]]) -> Iterator[dict[str, Any]]:
        """The rows (each with an `id`) whose content changed since the log's digest, each recorded."""
        digests = [(row["id"], digest(row)) for row in rows]
        for row, (item_id, value), changed in zip(rows, digests, self.changed(kind, digests), strict=True):
            if changed:
                self.record(kind, item_id, value)
                yield row


def load_fetch_log(pipeline: dlt.Pipeline, map_refresh_seconds: float, now: datetime | None = None) -> FetchLog:
    """Read the log from `pipeline`'s destination with two queries (`pipelines.source.bookkeeping`): every
    item's digest, in batches, and the containers whose map is due by age. Empty when the destination has
    no log yet."""
    started = time.perf_counter()
    due_sql = due_by_age_sql(FETCH_LOG_TABLE, now or datetime.now(UTC), map_refresh_seconds)
    keys, digests = index_batches(query_loaded(pipeline, f"select kind, item_id, digest from {FETCH_LOG_TABLE}", FETCH_LOG_TABLE))
    due = [row["item_id"] for row in loaded_rows(pipeline, due_sql, FETCH_LOG_TABLE)]
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
        logger.warning("Moved %d fetch decisions from the pipeline state into the %s table (once).", adopted, FETCH_LOG_TABLE)
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



SYNC_ISSUES_TABLE = "sync_issues"
STATE_KEY = "item_issues"
MAX_FAILED_SHARE = 0.05
TOLERATED_FAILURES = 2
MAX_FAILURES_IN_A_ROW = 5
OPEN_ITEM_ATTEMPTS = 2
# Errors that mean the sync is wrong, not the item: never isolated.
FATAL = (AuthenticationError, AuthorizationError, RateLimitedError, NoResponseError)


T = TypeVar("T")


class ItemIssues:
    """Runs one sync's per-item requests and keeps the record of those that fail.

    Build one per source, so one per run. Resources call `fetch` for each per-item request, `cover` for
    the items of the account they went through, and yield `pending()` to load the rows that changed."""

    def __init__(self, client: OceanTrackingClient) -> None:
        self._client = client
        self._rows: list[dict[str, Any]] = []
        self._failed_now: set[str] = set()
        self._covered_ids: dict[str, set[str]] = {}
        self._failures_in_a_row = 0

    def fetch(self, resource: str, item_id: str, request: Callable[..., T], *args: Any) -> T | None:
        """Run `request(*args)` for one item. If it fails in a way that can be isolated, record the failure and
        return None, so the caller skips the item. An item that already failed in this sync is not asked
        for again, because it has used its retries."""
        key = _issue_key(resource, item_id)
        if key in self._failed_now:
            return None
        known = key in self._state()["open"]
        try:
            with self._client.attempts_at_most(OPEN_ITEM_ATTEMPTS) if known else nullcontext():
                result = request(*args)
        except FATAL:
            raise
        except ApiError as error:
            self._record_failure(resource, item_id, error)
            if not known:
                self._failures_in_a_row += 1
                if self._failures_in_a_row >= MAX_FAILURES_IN_A_ROW:
                    raise TooManyItemFailuresError(
                        f"{resource}: the last {self._failures_in_a_row} item requests failed in a row after their "
                        f"retries ({str(error).splitlines()[0]}): the service looks down. Nothing of this sync "
                        "was committed; try again later."
                    ) from None
            return None
        self._failures_in_a_row = 0
        opened = self._state()["open"].pop(key, None)
        if opened is not None:
            logger.info("%s %s fetched again after %d failed sync(s)", resource, item_id, opened["attempts"])
            self._rows.append({"resource": resource, "item_id": item_id, "resolved": True})
        return result

    def cover(self, resource: str, ids: Iterable[str]) -> None:
        """Count the distinct items of `resource` this sync went through: the denominator of the failure
        share (for terminals, ports and vessels, the ids the pages named)."""
        seen = self._covered_ids.setdefault(resource, set())
        seen.update(ids)
        self._tallies()["covered"][resource] = len(seen)

    def cover_count(self, resource: str, count: int) -> None:
        """Count `count` more items that are distinct by construction (a container is on one page only), so
        the ids need not be kept in memory."""
        covered = self._tallies()["covered"]
        covered[resource] = covered.get(resource, 0) + count

    def pending(self) -> list[Any]:
        """The `sync_issues` rows recorded since the last call, as one item routed to that table (or none)."""
        if not self._rows:
            return []
        rows, self._rows = self._rows, []
        table = TABLES[SYNC_ISSUES_TABLE]
        return [routed_rows(rows, SYNC_ISSUES_TABLE, table.primary_key, table.declared_columns())]

    def _record_failure(self, resource: str, item_id: str, error: ApiError) -> None:
        key = _issue_key(resource, item_id)
        self._failed_now.add(key)
        now = datetime.now(UTC)
        previous = self._state()["open"].get(key)
        entry = {
            "resource": resource,
            "item_id": item_id,
            "http_status": error.status,
            "error": type(error).__name__,
            "message": str(error).splitlines()[0],
            "first_seen_at": previous["first_seen_at"] if previous else now.isoformat(),
            "last_seen_at": now.isoformat(),
            "attempts": (previous["attempts"] if previous else 0) + 1,
        }
        self._state()["open"][key] = entry
        failed = self._tallies()["failed"]
        failed[resource] = failed.get(resource, 0) + 1
        self._rows.append({**entry, "resolved": False})
        logger.info(  # the load's summary warns once for all of them
            "%s %s skipped after retries (%s); recorded in %s, the next sync tries again",
            resource, item_id, entry["message"], SYNC_ISSUES_TABLE,
        )

    def _state(self) -> dict[str, Any]:
        return dlt.current.source_state().setdefault(STATE_KEY, {"open": {}, "sync": {}})

    def _tallies(self) -> dict[str, Any]:
        """This sync's counts, kept under its load id (a new load id starts them afresh)."""
        load_id = dlt.current.load_package_state()["load_id"]
        state = self._state()
        if state["sync"].get("load_id") != load_id:
            state["sync"] = {"load_id": load_id, "covered": {}, "failed": {}}
        return state["sync"]


def _issue_key(resource: str, item_id: str) -> str:
    return f"{resource}/{item_id}"


@dataclass(frozen=True)
class ItemIssuesReport:
    """What a load left in `sync_issues`: the items failing now, and this sync's failures per resource."""

    open: list[dict[str, Any]] = field(default_factory=list)
    failed: dict[str, int] = field(default_factory=dict)
    covered: dict[str, int] = field(default_factory=dict)

    def excessive(self) -> list[str]:
        """The resources whose failures in this sync are more than the tolerated share, each as a phrase."""
        out = []
        for resource, failed in sorted(self.failed.items()):
            items = max(self.covered.get(resource, 0), failed)
            if failed > max(TOLERATED_FAILURES, MAX_FAILED_SHARE * items):
                out.append(f"{resource}: {failed} of {items} items failed")
        return out

    def warning(self) -> str | None:
        """One line on the items skipped, or None when there are none."""
        if not self.open:
            return None
        first = self.open[0]
        more = f" and {len(self.open) - 1} more" if len(self.open) > 1 else ""
        return (
            f"{len(self.open)} item(s) skipped after retries, listed in {SYNC_ISSUES_TABLE}: {first['resource']} "
            f"{first['item_id']} ({first['message']}){more}. Every other row loaded; the next sync tries "
            "them again."
        )


def issues_of_load(source_state: dict[str, Any], load_ids: Iterable[str]) -> ItemIssuesReport:
    """Read the issues from the source state that a load committed. This sync's tallies count only if
    they were taken under one of `load_ids`, the loads this run made."""
    state = source_state.get(STATE_KEY) or {}
    opened = sorted(state.get("open", {}).values(), key=lambda entry: (entry["resource"], entry["item_id"]))
    tallies = state.get("sync") or {}
    if tallies.get("load_id") not in set(load_ids):
        return ItemIssuesReport(open=opened)
    return ItemIssuesReport(opened, dict(tallies.get("failed", {})), dict(tallies.get("covered", {})))


class TooManyItemFailuresError(PipelineError):
    """More per-item requests failed in one sync than an isolated fault explains: the service, or the
    sync, is broken. Raised after what did arrive was loaded."""


def raise_if_excessive(report: ItemIssuesReport) -> None:
    """Fail the sync, in one line, when a resource's failures in it are above the tolerated share."""
    excessive = report.excessive()
    if excessive:
        raise TooManyItemFailuresError(
            f"{'; '.join(excessive)}: more than {MAX_FAILED_SHARE:.0%} of the items, so the service or the "
            f"sync is broken. Everything that arrived is loaded and the failures are listed in {SYNC_ISSUES_TABLE}; check "
            "the service's status, then sync again."
        )
