"""Lake maintenance as a Dagster asset on its own daily schedule: compaction, snapshot expiry, file
cleanup (`pipelines.warehouse.maintenance`), its figures recorded as materialization metadata so the
lake's growth and each run's effect are plotted in the UI. Not part of `full_sync`: it spends no API
request and should not run every time the data does."""

import dagster as dg

from assets.resources import OCEAN_TRACKING_POOL, Warehouse
from pipelines.settings import LAKE_RETENTION_ENV

MAINTENANCE_GROUP = "maintenance"
MAINTENANCE_CRON = "30 3 * * *"  # daily, after the 02:00 full sync


class MaintenanceConfig(dg.Config):
    """How far back time travel must keep reaching (days; empty: `OCEAN_TRACKING_LAKE_RETENTION_DAYS`,
    else 30)."""

    retention_days: float | None = None


@dg.asset(
    key=["ocean_tracking", "lake_maintenance"],
    group_name=MAINTENANCE_GROUP,
    kinds={"ducklake"},
    pool=OCEAN_TRACKING_POOL,  # it commits snapshots: one writer at a time, like the ingest and the models
    description=(
        "Compacts the DuckLake's files, expires snapshots older than the retention (time travel reaches "
        f"that far; {LAKE_RETENTION_ENV}, default 30 days) and deletes files no snapshot needs."
    ),
)
def lake_maintenance(
    context: dg.AssetExecutionContext, config: MaintenanceConfig, warehouse: Warehouse
) -> dg.MaterializeResult:
    """One maintenance run; a plain DuckDB file has nothing to maintain and says so."""
    from pipelines.warehouse.maintenance import maintain_lake

    store = warehouse.store()
    if not store.is_lake or not store.exists():
        reason = "a plain DuckDB file" if not store.is_lake else "no lake yet"
        context.log.info("Nothing to maintain: %s.", reason)
        return dg.MaterializeResult(metadata={"skipped": reason})
    report = maintain_lake(store, retention_days=config.retention_days)
    context.log.info(
        "Lake maintenance: %d -> %d data files, %d -> %d snapshots, %d files deleted in %.1fs",
        report.before.data_files, report.after.data_files, report.before.snapshots, report.after.snapshots,
        report.files_deleted + report.orphans_deleted, report.seconds,
    )  # fmt: skip
    return dg.MaterializeResult(metadata=report.as_metadata())


lake_maintenance_job = dg.define_asset_job(
    "lake_maintenance",
    selection=dg.AssetSelection.groups(MAINTENANCE_GROUP),
    description="Compaction, snapshot expiry and file cleanup of the DuckLake.",
)

lake_maintenance_schedule = dg.ScheduleDefinition(
    name="lake_maintenance_schedule",
    job=lake_maintenance_job,
    cron_schedule=MAINTENANCE_CRON,
    execution_timezone="UTC",
    description="Daily at 03:30 UTC, after the full sync.",
)
