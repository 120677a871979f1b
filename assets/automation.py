"""Declarative freshness: which assets follow their upstream on their own, and the sensor that runs them.

The assets that spend API requests (the ingest) stay on their schedules and the pending-tracking-request
sensor: they are what costs the account's 100 requests a minute. Everything downstream of them reads only
the warehouse, so it follows the data instead of a clock: the dbt models (and their tests, which are their
asset checks), the GeoParquet, the PNG maps and the team page carry `AutomationCondition.eager()`, which they take from
`automation_for` here where they are defined (`assets.models`' translator, `assets.maps`, `assets.page`). After any ingest
(scheduled, sensor-driven or launched by hand from the UI) the next evaluation of the automation sensor
requests every downstream asset whose upstream changed, in dependency order, in one run; an asset whose
upstream did not change is not requested, and nothing is requested twice for one change.

A job that already materializes the downstream assets in the same run (`full_sync`) leaves nothing to
request: eager fires on upstream changes newer than the asset's own materialization.

Dagster's own automation sensor is created STOPPED; this one is RUNNING by default (the daemon evaluates
it every `AUTOMATION_INTERVAL_SECONDS`), so freshness needs no manual step after `dagster dev` or
`dagster-daemon run`. It evaluates only the assets that carry a condition.
"""

import dagster as dg

AUTOMATION_SENSOR_NAME = "follow_upstream_changes"
AUTOMATION_INTERVAL_SECONDS = 30
PAGE_GROUP = "page"  # the team page (assets.page)
# Downstream groups: they read the warehouse only, never the API.
FOLLOWING_GROUPS = ("analytics_staging", "analytics", "maps", PAGE_GROUP)


def automation_for(group_name: str | None, *, root: bool = False) -> dg.AutomationCondition | None:
    """`eager()` for an asset of a group that only reads the warehouse, else None (it runs when scheduled).
    A `root` asset of such a group (a dbt seed: reference data with nothing upstream, which `eager()` would
    never build, and every model reading it would wait for it) is built while it is missing and when its
    file changed (dagster-dbt gives a seed its file's checksum as code version): once on a new deployment,
    then only when a team edits its tariffs or factors.

    The modules that define assets ask here rather than each choosing its own condition: which assets may
    run on their own is one policy of the deployment (no API spend without a schedule), not a property of
    each asset."""
    if group_name not in FOLLOWING_GROUPS:
        return None
    if root:
        changed = dg.AutomationCondition.missing() | dg.AutomationCondition.code_version_changed()
        return changed & ~dg.AutomationCondition.in_progress()
    return dg.AutomationCondition.eager()


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
