"""Declarative freshness: which assets follow their upstream on their own, and the sensor that runs them.

The assets that spend API requests (the ingest) stay on their schedules and the pending-tracking-request
sensor: they are what costs the account's 100 requests a minute. Everything downstream of them reads only
the warehouse, so it follows the data instead of a clock: the dbt models (and their tests, which are their
asset checks), the GeoParquet and the PNG maps carry `AutomationCondition.eager()`. After any ingest
(scheduled, sensor-driven or launched by hand from the UI) the next evaluation of the automation sensor
requests every downstream asset whose upstream changed, in dependency order, in one run; an asset whose
upstream did not change is not requested, and nothing is requested twice for one change.

A job that already materializes the downstream assets in the same run (`full_sync`) leaves nothing to
request: eager fires on upstream changes newer than the asset's own materialization.

Dagster's own automation sensor is created STOPPED; this one is RUNNING by default (the daemon evaluates
it every `AUTOMATION_INTERVAL_SECONDS`), so freshness needs no manual step after `dagster dev` or
`dagster-daemon run`. It evaluates only the assets that carry a condition.
"""

from collections.abc import Sequence

import dagster as dg

AUTOMATION_SENSOR_NAME = "follow_upstream_changes"
AUTOMATION_INTERVAL_SECONDS = 30
# Downstream groups: they read the warehouse only, never the API.
FOLLOWING_GROUPS = ("analytics_staging", "analytics", "maps")


def follows_upstream(spec: dg.AssetSpec) -> dg.AssetSpec:
    """The spec with `eager()` when its asset is in a group that only reads the warehouse, else unchanged."""
    if spec.group_name in FOLLOWING_GROUPS:
        return spec.replace_attributes(automation_condition=dg.AutomationCondition.eager())
    return spec


def with_automation(assets: Sequence[dg.AssetsDefinition]) -> list[dg.AssetsDefinition]:
    """The asset definitions, with the downstream ones following their upstream (`follows_upstream`).

    Applied here, in one place, rather than in each decorator: which assets may run on their own is a
    policy of the deployment (no API spend without a schedule), not a property of each asset."""
    return [mapped for mapped in dg.map_asset_specs(follows_upstream, assets) if isinstance(mapped, dg.AssetsDefinition)]


automation_sensor = dg.AutomationConditionSensorDefinition(
    AUTOMATION_SENSOR_NAME,
    target=dg.AssetSelection.groups(*FOLLOWING_GROUPS),
    default_status=dg.DefaultSensorStatus.RUNNING,
    minimum_interval_seconds=AUTOMATION_INTERVAL_SECONDS,
    # runs, not backfills: each request is one run of the downstream graph, visible in the runs list
    emit_backfills=False,
    description=(
        "Refreshes the models, the GeoParquet and the maps after any ingest changed what they read, in one "
        "run; spends no API request. On by default."
    ),
)
