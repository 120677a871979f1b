"""The team page (group `page`): one HTML file of the carrier scorecard, demurrage at risk, dwell and transit,
emissions and the containers at sea, opened from disk with no network (`pipelines.page`).

It reads the marts it shows and the raw map features, read-only, and follows them (`automation_for`): after
any run that changed them, the automation sensor requests it, so the page is redone after every sync; a run
whose models and maps did not change leaves the file as it was (`skipped_unchanged`). Where it goes:
`<data_dir>/team_page.html`, `team_page_<account>.html` for a named account (`MapsConfig.data_dir` decides
the folder, as for the maps).
"""

import dagster as dg

from assets.accounts import account_of, account_partitions
from assets.automation import PAGE_GROUP, automation_for
from assets.maps import MapsConfig
from assets.models import model_key, source_key
from assets.resources import EXPORTS_POOL, Warehouse
from pipelines.page.render import PAGE_FILE_NAME, write_team_page

# What the page reads (`pipelines.page.figures`)
PAGE_MARTS = ("schedule_reliability", "eta_accuracy_summary", "demurrage_exposure", "container_free_time",
              "deep_links", "container_status", "transit_dwell_percentiles", "leg_emissions", "containers_at_sea")  # fmt: skip


@dg.asset(
    key_prefix=["page"],
    group_name=PAGE_GROUP,
    deps=[*(model_key(name) for name in PAGE_MARTS), source_key("map_features")],
    pool=EXPORTS_POOL,
    partitions_def=account_partitions,
    automation_condition=automation_for(PAGE_GROUP),
    kinds={"ducklake", "html"},
    description=(
        "The team page: carrier scorecard, demurrage at risk, dwell and transit, emissions and the containers at "
        f"sea on a map, one HTML file that opens offline: `<data_dir>/{PAGE_FILE_NAME}`. Rewritten only when the "
        "models, the map features or today's date where the free time runs changed."
    ),
)
def team_page(context: dg.AssetExecutionContext, config: MapsConfig, warehouse: Warehouse) -> dg.MaterializeResult:
    account = account_of(context)
    warehouse = warehouse.for_account(account)
    out_path = account.own_file(config.base_dir() / PAGE_FILE_NAME)
    title = "Ocean tracking" if account.name is None else f"Ocean tracking: {account.name}"
    page = write_team_page(warehouse.store(), out_path, title=title, analytics_schema=warehouse.analytics_schema,
                           dataset_name=warehouse.dataset_name)  # fmt: skip
    context.log.info("wrote %s (%d bytes)" if page.written else "nothing it shows changed: %s left as it was (%d bytes)",
                     page.path, page.bytes)  # fmt: skip
    return dg.MaterializeResult(metadata={
        "path": dg.MetadataValue.path(str(page.path)),
        "bytes": dg.MetadataValue.int(page.bytes),
        "skipped_unchanged": dg.MetadataValue.bool(not page.written),
    })  # fmt: skip
