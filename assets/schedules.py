"""Jobs and schedules: a daily full sync, and a refresh of tracking requests + maps at a cadence
computed from the rate budget (`assets.budget`)."""

from datetime import datetime

import dagster as dg
import duckdb

from assets.budget import AccountSize, RefreshPlan, account_size, plan_refresh
from assets.ingest import asset_key
from assets.resources import Warehouse

FULL_SYNC_CRON = "0 2 * * *"
REFRESH_KEYS = [asset_key("tracking_requests"), asset_key("map_features")]
# Assumed until a warehouse exists: a mid-size account (the plan is recomputed at every tick).
ASSUMED_SIZE = AccountSize(shipments=1000, containers_at_sea=1000, containers_before_departure=500)

full_sync_job = dg.define_asset_job(
    "full_sync",
    selection=dg.AssetSelection.all(),  # every asset and its checks
    description="Everything: the whole account through the ingest graph, then the models and maps.",
)

refresh_job = dg.define_asset_job(
    "refresh_tracking_and_maps",
    selection=dg.AssetSelection.assets(*REFRESH_KEYS),
    description=(
        "Tracking requests (incremental) and the route maps that are due. map_features hangs off the "
        "shipment page stream, so a refresh spends ceil(shipments/100) pages + the maps due."
    ),
)


def current_plan(warehouse: Warehouse, fallback: AccountSize = ASSUMED_SIZE) -> tuple[RefreshPlan, str]:
    """The refresh plan for the account as loaded now, and where the sizes came from.

    The warehouse is read read-only; when it does not exist yet or a run holds DuckDB's write lock,
    the assumed size is used (the next tick reads it again)."""
    try:
        if not warehouse.path.exists():
            raise FileNotFoundError(warehouse.path)
        with duckdb.connect(str(warehouse.path), read_only=True) as con:
            return plan_refresh(account_size(con, warehouse.dataset_name)), "warehouse"
    except (duckdb.Error, OSError):
        return plan_refresh(fallback), "assumed size"


def build_refresh_schedule(plan: RefreshPlan, source: str) -> dg.ScheduleDefinition:
    """The refresh schedule on the plan's cron. Each tick re-plans from the warehouse and skips when
    the account grew so that this hour is no longer on the cadence (the cron catches up on reload)."""

    @dg.schedule(
        name="refresh_tracking_and_maps_schedule",
        job=refresh_job,
        cron_schedule=plan.cron,
        execution_timezone="UTC",
        description=f"Cadence computed from the rate budget at load time ({source}). {plan.explain()}",
    )
    def _schedule(context: dg.ScheduleEvaluationContext, warehouse: Warehouse):
        now_plan, now_source = current_plan(warehouse)
        tick: datetime = context.scheduled_execution_time
        if now_plan.hours > plan.hours and tick.hour % now_plan.hours != 0:
            return dg.SkipReason(f"Off cadence now ({now_source}): {now_plan.explain()}")
        return dg.RunRequest(
            run_key=f"refresh-{tick.isoformat()}",
            tags={"ocean_tracking/refresh_every_hours": str(now_plan.hours)},
        )

    return _schedule


full_sync_schedule = dg.ScheduleDefinition(
    name="full_sync_daily",
    job=full_sync_job,
    cron_schedule=FULL_SYNC_CRON,
    execution_timezone="UTC",
    description="Daily full sync of the whole account (all assets and checks) at 02:00 UTC.",
)
