"""Keeping a DuckLake small and fast: compaction, snapshot expiry and file cleanup, with figures.

Every sync commits snapshots, and a merge writes new Parquet files plus delete files for the rows it
replaced (re-merging unchanged rows grows the lake until maintenance; a DuckDB file stays flat), so
without maintenance a lake's file count and size grow with every sync. One run, in this order:
1. rewrite data files whose rows are partly deleted (`ducklake_rewrite_data_files`), then merge small
   adjacent files (`ducklake_merge_adjacent_files`): fewer, larger files for every reader;
2. expire snapshots older than the retention (default 30 days): time travel reaches back that far;
3. delete the files no remaining snapshot needs (`ducklake_cleanup_old_files`) and files no snapshot ever
   referenced, left by a writer killed mid-commit (`ducklake_delete_orphaned_files`); both only past a
   grace period, so a session that began before this run still finds the files of its snapshot.
The run holds the writer lock (compaction commits snapshots too); readers go on reading throughout.
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass
from datetime import timedelta

import duckdb

from pipelines.errors import ConfigurationError
from pipelines.settings import LAKE_NAME, lake_retention_days
from pipelines.warehouse.store import WarehouseStore

# Files scheduled for deletion (or never referenced) are kept this long: a reader whose snapshot is
# older than the maintenance run may still be scanning them.
CLEANUP_GRACE = timedelta(hours=1)
# A data file with at least this share of its rows deleted is rewritten without them.
DELETE_THRESHOLD = 0.1


@dataclass(frozen=True)
class LakeFigures:
    """The size of a lake at one moment: live data files and their bytes, files on disk, snapshots."""

    data_files: int
    data_bytes: int
    files_on_disk: int
    snapshots: int


@dataclass(frozen=True)
class MaintenanceReport:
    """What one maintenance run did, before and after."""

    before: LakeFigures
    after: LakeFigures
    files_rewritten: int
    files_merged: int
    snapshots_expired: int
    files_deleted: int
    orphans_deleted: int
    retention_days: float
    seconds: float

    def as_metadata(self) -> dict[str, float | int]:
        """Flat figures (`data_files_before`, ..., `seconds`) for Dagster metadata and the CLI."""
        flat: dict[str, float | int] = {}
        for moment in ("before", "after"):
            for name, value in asdict(getattr(self, moment)).items():
                flat[f"{name}_{moment}"] = value
        for name, value in asdict(self).items():
            if name not in ("before", "after"):
                flat[name] = round(value, 2) if isinstance(value, float) else value
        return flat


def lake_figures(con: duckdb.DuckDBPyConnection) -> LakeFigures:
    """Count the live data files (and bytes) of every table, the files under the data path, and the
    snapshots of the lake attached as `LAKE_NAME`."""
    tables = con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = ?", [LAKE_NAME]
    ).fetchall()
    files = size = 0
    for schema, table in tables:
        count, total = con.execute(
            f"select count(*), coalesce(sum(data_file_size_bytes), 0) "
            f"from ducklake_list_files('{LAKE_NAME}', ?, schema => ?)",
            [table, schema],
        ).fetchone()
        files, size = files + count, size + total
    data_path = con.execute(f"select value from {LAKE_NAME}.options() where option_name = 'data_path'").fetchone()[0]
    on_disk = con.execute("select count(*) from glob(?)", [data_path.rstrip("/") + "/**/*.parquet"]).fetchone()[0]
    snapshots = con.execute(f"select count(*) from {LAKE_NAME}.snapshots()").fetchone()[0]
    return LakeFigures(files, int(size), on_disk, snapshots)


def maintain_lake(
    store: WarehouseStore, *, retention_days: float | None = None, grace: timedelta = CLEANUP_GRACE
) -> MaintenanceReport:
    """Compact, expire snapshots older than `retention_days` (default: the configured retention, 30
    days) and clean up files, under the writer lock; returns the figures before and after."""
    if not store.is_lake:
        raise ConfigurationError(f"{store.place} is a plain DuckDB file: maintenance is for the DuckLake.")
    store.require_exists()
    retention = lake_retention_days() if retention_days is None else retention_days
    started = time.monotonic()
    with store.writing(), store.connect() as con:
        before = lake_figures(con)
        rewritten = _sum(con, f"call ducklake_rewrite_data_files('{LAKE_NAME}', delete_threshold => {DELETE_THRESHOLD})")
        merged = _sum(con, f"call ducklake_merge_adjacent_files('{LAKE_NAME}')")
        expired = len(
            con.execute(
                f"call ducklake_expire_snapshots('{LAKE_NAME}', older_than => now() - to_seconds(?::double))",
                [retention * 86400],
            ).fetchall()
        )
        horizon = [grace.total_seconds()]
        deleted = len(con.execute(
            f"call ducklake_cleanup_old_files('{LAKE_NAME}', older_than => now() - to_seconds(?::double))", horizon
        ).fetchall())  # fmt: skip
        orphans = len(con.execute(
            f"call ducklake_delete_orphaned_files('{LAKE_NAME}', older_than => now() - to_seconds(?::double))",
            horizon,
        ).fetchall())  # fmt: skip
        after = lake_figures(con)
    return MaintenanceReport(
        before, after, rewritten, merged, expired, deleted, orphans, retention, time.monotonic() - started
    )


def _sum(con: duckdb.DuckDBPyConnection, call: str) -> int:
    """Files processed by a compaction call (its rows: schema, table, files_processed, files_created)."""
    return sum(row[2] for row in con.execute(call).fetchall())
