"""Where the pipeline relies on the locked libraries' private API, or steps around a behaviour of theirs: each
override says what it changes, why no public hook does it, and which test pins the behaviour it relies on, so an
upgrade of dlt or DuckDB shows here first.

**The lake attached once per sync** (`lake_connections_kept`). dlt's `ducklake` destination opens a new DuckDB
connection for every borrow (`DuckLakeCredentials.on_resolved` builds its pool with
`always_open_connection=True`: "connection duplication for parallelism does not work for ducklake"), attaches the
lake on it (`DuckLakeSqlClient.open_connection`) and detaches and closes it when the borrower is done. A sync
borrows one for every table's load job, every merge, the schema and state updates and every read of the
warehouse during the extraction (the fetch log, the departed shipments, the custom fields): some twenty ATTACHes
of the same catalog, ~0.2 s each, whatever the sync loads. Inside `lake_connections_kept()` a connection a
borrower gives back stays attached and idle, and the next borrow of the same lake (the same ATTACH statement)
takes it instead of opening another; at the end of the block every idle connection is detached (DuckLake asks
for it: a catalog closed attached can be left inconsistent) and closed. Each connection still has one borrower
at a time, so a PostgreSQL catalog's parallel load jobs each keep a connection of their own, as before. There is
no public hook for this: the pool is built inside dlt's credentials on every configuration resolution (a
credentials object of ours is copied into dlt's own type), so the two methods of `DuckLakeSqlClient` that open
and close are wrapped (`install`, which `ducklake_target` calls); outside the block they open and close as
dlt's own do (with the spill folder below). Pinned by `tests/lake/test_compat.py` (one
ATTACH of the lake per sync, every connection detached and closed at its end, the rows loaded as before).

**A spill folder for each in-memory DuckDB** (`settings.own_spill_directory`). An in-memory DuckDB writes what exceeds
its `memory_limit` into `.tmp` in the working directory, under the same file names in every database: two that
spill at once, in one process or in two started in the same folder (Dagster's run workers all start at the
project root; a sync beside an analyst's session), crash with a segmentation fault (DuckDB 1.5.5: 3 of 3 pairs
of processes, and two threads of one). Every in-memory DuckDB the pipeline opens spills into a folder of its
own in the system's temp directory instead: ours through `connections.in_memory_config`, dbt's through its
plugin, dlt's lake connections here as they are opened (dlt applies one `global_config` to all of them, and no
public hook sees a connection as it opens). DuckDB creates the folder when it first spills and removes it when
the database closes. Pinned by `tests/lake/test_compat.py` (processes and threads spilling at once).

**A killed normalize's commit finished** (`extracted_packages`): dlt commits a normalized package by renaming
it into the load folder, then deleting its extracted copy; a kill between the two leaves both (dlt issue
#4446), and only the pipeline's private `_get_normalize_storage()` reaches the extracted packages to delete one
(`pipelines.sync.finish_normalize_commit`). Pinned by `tests/lake/test_compat.py`.

**A retried upload's body rewound** (`rewind_body_if_read`): requests records where a file body started in the
private `PreparedRequest._body_position` and rewinds it with `requests.utils.rewind_body` only inside its own
redirect handling; a retry of ours (tenacity, `pipelines.api.client`) must rewind it too. Pinned by
`tests/lake/test_compat.py`.
"""

from __future__ import annotations

import threading
from collections import defaultdict
from collections.abc import Iterator
from contextlib import contextmanager, suppress

import dlt
import duckdb
import requests
from dlt.common.storages.load_package import PackageStorage
from dlt.destinations.impl.ducklake.sql_client import DuckLakeSqlClient
from requests.utils import rewind_body

from pipelines.settings import own_spill_directory

_lock = threading.Lock()
_depth = 0  # how many `lake_connections_kept` blocks are open in this process (any thread)
_idle: dict[str, list[duckdb.DuckDBPyConnection]] = defaultdict(list)  # ATTACH statement -> attached connections
_opened = 0  # connections opened and attached by dlt while a block was open (what the test counts)
_open_unchanged = DuckLakeSqlClient.open_connection
_close_unchanged = DuckLakeSqlClient.close_connection


@contextmanager
def lake_connections_kept() -> Iterator[None]:
    """Keep dlt's lake connections attached and reuse them for the block (one sync), then detach and close
    them. Blocks may nest and overlap across threads: connections are closed when the last one ends."""
    global _depth
    with _lock:
        _depth += 1
    try:
        yield
    finally:
        with _lock:
            _depth -= 1
            closing = [] if _depth else [con for idle in _idle.values() for con in idle]
            if not _depth:
                _idle.clear()
        for con in closing:
            _detach_and_close(con)


def lake_connections_opened() -> int:
    """How many lake connections dlt opened (and attached) inside `lake_connections_kept` blocks so far in
    this process: the count a test reads before and after a sync."""
    return _opened


def _detach_and_close(con: duckdb.DuckDBPyConnection) -> None:
    with suppress(duckdb.Error):
        con.execute("ROLLBACK")
    with suppress(duckdb.Error):
        con.execute("USE memory")
        for (name,) in con.execute("select database_name from duckdb_databases() where type = 'ducklake'").fetchall():
            con.execute(f'DETACH "{name}"')
    con.close()


def _key(client: DuckLakeSqlClient) -> str:
    return client.attach_statement


def _open_new(client: DuckLakeSqlClient) -> duckdb.DuckDBPyConnection:
    con = _open_unchanged(client)
    con.execute(f"SET temp_directory = '{own_spill_directory()}'")
    return con


def _open_connection(self: DuckLakeSqlClient) -> duckdb.DuckDBPyConnection:
    global _opened
    with _lock:
        keeping = _depth > 0
        idle = _idle[_key(self)] if keeping else []
        con = idle.pop() if idle else None
    if not keeping:
        return _open_new(self)
    if con is None:
        con = _open_new(self)
        with _lock:
            _opened += 1
        return con
    pool = self.credentials.conn_pool
    with pool._conn_lock:  # the pool counts borrows; this one is served from our idle list
        pool._conn_borrows += 1
    self._conn = con
    try:
        con.execute(f"USE {self.capabilities.escape_identifier(self.credentials.ducklake_name)}")
        with suppress(duckdb.Error):  # as dlt's own open: the dataset may not exist yet
            con.execute(f"SET search_path = '{self.fully_qualified_dataset_name()}'")
    except Exception:
        self._conn = None
        with pool._conn_lock:
            pool._conn_borrows -= 1
        _detach_and_close(con)
        raise
    return con


def _close_connection(self: DuckLakeSqlClient) -> None:
    con = self._conn
    with _lock:
        keeping = _depth > 0
    if not keeping or con is None:
        return _close_unchanged(self)
    with suppress(duckdb.Error):
        con.execute("ROLLBACK")
    pool = self.credentials.conn_pool
    with pool._conn_lock:
        pool._conn_borrows -= 1
    self._conn = None
    with _lock:
        if _depth > 0:
            _idle[_key(self)].append(con)
            return
    _detach_and_close(con)


def install() -> None:
    """Put the overrides in place of dlt's `DuckLakeSqlClient.open_connection` and `close_connection` (once; a
    second call changes nothing). `ducklake_target` calls it, so every lake destination we build has them."""
    DuckLakeSqlClient.open_connection = _open_connection
    DuckLakeSqlClient.close_connection = _close_connection


def extracted_packages(pipeline: dlt.Pipeline) -> PackageStorage:
    """The pipeline's extracted (not yet normalized) load packages, whose `delete_package` finishes the commit
    of a normalize killed between its rename and its delete (no public call deletes one)."""
    return pipeline._get_normalize_storage().extracted_packages


def rewind_body_if_read(request: requests.PreparedRequest) -> None:
    """Rewind a file body to where it started before the request is sent again (requests does so only on its
    own redirects); a body that is bytes, or none, needs nothing."""
    if getattr(request, "_body_position", None) is not None:
        rewind_body(request)
