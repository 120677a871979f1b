"""Analytics models as Dagster assets: the dbt project under `sql/` through dagster-dbt (`@dbt_assets`).

One asset `analytics/<model>` per dbt model (group `analytics`), built by `dbt build` in the run's own
process with the CLI sync's runner, target and vars (`pipelines.warehouse.models.invoke_dbt`): one
runner. dagster-dbt supplies the specs, the subset selection and the test-to-check mapping; its
`DbtCliResource` is not used: it runs dbt as a subprocess, and the models' step took 36-41 s that way
against 15-17 s in process on the same 200-shipment lake (BENCHMARKS.md). The lineage, descriptions and
checks come from dbt's manifest, `sql/target/manifest.json`, made at setup time (`scripts/bootstrap.sh`
runs `dbt parse`), never while the definitions import:
- a source `ocean_tracking.<table>` -> the ingest asset `ocean_tracking/<table>`; a dlt child table
  (`containers__holds_at_pod_terminal`) is loaded by its root resource, so it maps to `ocean_tracking/containers`;
- a model `<model>` -> `analytics/<model>`; its description is the model's in the schema yml;
- every dbt test on a model -> an asset check on it (the grain, accepted values, relationships, row counts);
- every dbt test on a source -> an asset check on its ingest asset (`enable_source_tests_as_checks`): the raw
  tables' keys and references, which `scripts/dbt_sources.py` writes from the registry
  (`pipelines.source`). They run in this step's `dbt build`, before the models reading the table: a
  broken key (severity error) fails the step and dbt skips the models downstream of that table; a
  reference that does not resolve warns.

The build runs in the `ocean_tracking` pool (one writer) under the warehouse's writer lock, with `app_url`
from the `ocean_tracking_api` resource (deep links need it). Each materialization reports its row count,
columns and a preview, read after the build.

With several accounts (`assets.accounts`) the models and their tests are partitioned by account: a run builds
from its account's raw dataset (dbt var `raw_schema`) into its models schema (`analytics_schema`,
`analytics_<account>`); the asset keys stay `analytics/<model>`.
"""

import json
from collections.abc import Iterator, Mapping
from graphlib import TopologicalSorter
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, dbt_assets
from dagster_dbt.asset_utils import (
    get_asset_check_key_for_test,
    get_checks_on_sources_upstream_of_selected_assets,
    get_subset_selection_for_context,
)

from assets.accounts import account_of, account_partitions
from assets.automation import automation_for
from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.models import (
    MANIFEST_PATH,
    PARSE_COMMAND,
    Session,
    build_environment,
    dbt_args,
    dbt_target,
    dbt_vars,
    invoke_dbt,
    kept_session,
    model_relation,
    outcome_error,
    plan_build,
    preview_markdown,
    record_build,
)

ANALYTICS_GROUP = "analytics"
# The staging models (typed copies of the raw tables) in a group of their own: the lineage page shows
# the marts analysts query in `analytics` and folds `analytics_staging` (Dagster has no hidden assets).
STAGING_GROUP = "analytics_staging"
# dbt's statuses of a test that ran (not `skipped`)
TEST_OUTCOMES = ("pass", "fail", "warn", "error")


class ManifestMissingError(RuntimeError):
    """The dbt manifest the definitions are built from has not been made yet."""


def source_key(table: str) -> dg.AssetKey:
    """The ingest asset that loads a raw table: a dlt child table (`containers__x`) maps to its root resource."""
    return dg.AssetKey([DATASET_NAME, table.split("__")[0]])


def model_key(name: str) -> dg.AssetKey:
    """The asset key of a model: `analytics/<name>`."""
    return dg.AssetKey([ANALYTICS_SCHEMA, name])


class OceanTrackingTranslator(DagsterDbtTranslator):
    """Sources -> the ingest assets, models -> `analytics/<model>` in the group `analytics`."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        """`ocean_tracking/<root table>` for a source, `analytics/<model>` for a model."""
        if dbt_resource_props["resource_type"] == "source":
            return source_key(dbt_resource_props["name"])
        return model_key(dbt_resource_props["name"])

    def get_description(self, dbt_resource_props: Mapping[str, Any]) -> str:
        """The model's description in the schema yml (what it is, its grain, its `Key:`), without the SQL."""
        return dbt_resource_props.get("description") or f"dbt model {dbt_resource_props['name']}"

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        """`analytics_staging` for a model under models/staging and for a seed (reference data the marts
        read), else `analytics`."""
        if dbt_resource_props["resource_type"] == "seed" or "staging" in dbt_resource_props.get("fqn", [])[1:-1]:
            return STAGING_GROUP
        return ANALYTICS_GROUP

    def get_automation_condition(self, dbt_resource_props: Mapping[str, Any]) -> dg.AutomationCondition | None:
        """The deployment's condition for the model's group (`assets.automation`): every model follows its upstream."""
        return automation_for(self.get_group_name(dbt_resource_props),
                              root=dbt_resource_props["resource_type"] == "seed")  # fmt: skip

    def get_asset_check_spec(self, asset_spec: dg.AssetSpec, manifest: Mapping[str, Any], unique_id: str,
                             project: Any) -> dg.AssetCheckSpec | None:
        """dagster-dbt's check for a dbt test, partitioned by account like the models when accounts are
        configured: a test's result is then its account's, not the last account's to run."""
        spec = super().get_asset_check_spec(asset_spec, manifest, unique_id, project)
        if spec is None or account_partitions is None:
            return spec
        return dg.AssetCheckSpec(
            spec.name, asset=spec.asset_key, description=spec.description, additional_deps=spec.additional_deps,
            blocking=spec.blocking, metadata=spec.metadata, automation_condition=spec.automation_condition,
            partitions_def=account_partitions,
        )  # fmt: skip


def load_manifest() -> dict[str, Any]:
    """The manifest `dbt parse` wrote; a missing one fails the definitions with the one command to run."""
    if not MANIFEST_PATH.exists():
        raise ManifestMissingError(
            f"{MANIFEST_PATH} is missing: run `{PARSE_COMMAND}` (scripts/bootstrap.sh does) and load again."
        )
    return json.loads(MANIFEST_PATH.read_text())


MANIFEST = load_manifest()
TRANSLATOR = OceanTrackingTranslator(
    settings=DagsterDbtTranslatorSettings(enable_asset_checks=True, enable_duplicate_source_asset_keys=True,
                                         enable_source_tests_as_checks=True)
)


def _with_table_metadata(
    context: dg.AssetExecutionContext, events: list[Any], warehouse: Warehouse, session: Session
) -> Iterator[Any]:
    """The build's events, each model's output with its row count, columns and a preview (read after the
    build, in `session`: a DuckDB file admits no reader while dbt writes it) from the warehouse's models schema
    (its staging schema for a staging model)."""

    def key_of(event: Any) -> dg.AssetKey | None:
        if isinstance(event, dg.Output):
            return context.assets_def.keys_by_output_name.get(event.output_name)
        return event.asset_key if isinstance(event, dg.AssetMaterialization) else None

    keys = {key for event in events if (key := key_of(event)) is not None}
    tables: dict[dg.AssetKey, dict[str, Any]] = {}
    if keys:
        with session() as con:
            for key in keys:
                table = model_relation(key.path[-1], warehouse.analytics_schema)
                columns = con.execute(f"describe {table}").fetchall()
                rows = con.execute(f"select count(*) from {table}").fetchone()[0]
                tables[key] = {
                    "dagster/row_count": dg.MetadataValue.int(rows),
                    "dagster/column_schema": dg.TableSchema(
                        columns=[dg.TableColumn(name, str(type_)) for name, type_, *_ in columns]
                    ),
                    "preview": dg.MetadataValue.md(preview_markdown(con, table)),
                }
    for event in events:
        key = key_of(event)
        if key in tables:
            yield event.with_metadata({**event.metadata, **tables[key]})
        else:
            yield event


def unchanged_outputs(context: dg.AssetExecutionContext, events: list[Any], reason: str) -> list[dg.Output]:
    """An output for each selected model (or seed) a planned build left as it was, nothing it reads having
    changed: it is as current as one rebuilt. Saying so keeps the automation sensor from requesting it again
    (`eager()` fires on an upstream newer than the asset's last materialization), so the raw tables a run
    loaded cost no second run rebuilding every model that reads them."""
    built = {event.output_name for event in events if isinstance(event, dg.Output)}
    return [dg.Output(None, output_name=name, metadata={"rebuilt": False, "plan": reason})
            for name in sorted(context.selected_output_names)
            if name in context.assets_def.keys_by_output_name and name not in built]  # not the checks' outputs


def in_topological_order(context: dg.AssetExecutionContext, events: list[Any]) -> list[Any]:
    """The step's events with each model's output after those of the models it reads (Dagster refuses a
    multi-asset's outputs out of that order) and its checks right after it; checks of the raw tables first."""
    deps = context.assets_def.asset_deps
    rank = {key: i for i, key in enumerate(TopologicalSorter(
        {key: upstream & deps.keys() for key, upstream in deps.items()}).static_order())}

    def place(event: Any) -> tuple[int, int]:
        if isinstance(event, dg.Output):
            return rank.get(context.assets_def.keys_by_output_name[event.output_name], -1), 0
        return rank.get(getattr(event, "asset_key", None), -1), 1

    return sorted(events, key=place)


def dbt_events(context: dg.AssetExecutionContext, outcome: Any) -> Iterator[Any]:
    """Dagster events for a `dbt build` outcome, in dbt's order (a model, then its tests): an output per
    selected model built, an asset check result per selected test run (severity WARN for a test dbt
    configured as `warn`); a seed loaded is an output too. Unselected nodes (dbt runs a test of a selected model's relations too) and
    skipped ones (downstream of a failure) yield nothing."""
    check_keys = {
        *context.selected_asset_check_keys,
        *get_checks_on_sources_upstream_of_selected_assets(context.assets_def, context.selected_asset_keys),
    }
    for node_result in getattr(outcome.result, "results", None) or []:
        node = node_result.node
        status = str(getattr(node_result.status, "value", node_result.status))
        seconds = round(float(node_result.execution_time or 0.0), 3)
        if node.resource_type in ("model", "seed") and status == "success":
            key = model_key(node.name)
            if key in context.selected_asset_keys:
                output = context.assets_def.get_output_name_for_asset_key(key)
                yield dg.Output(None, output_name=output, metadata={"unique_id": node.unique_id, "execution_seconds": seconds})
        elif node.resource_type == "test" and status in TEST_OUTCOMES:
            check = get_asset_check_key_for_test(MANIFEST, TRANSLATOR, node.unique_id, None)
            if check in check_keys:
                severity = str(getattr(node.config, "severity", "error")).lower()
                yield dg.AssetCheckResult(
                    asset_key=check.asset_key,
                    check_name=check.name,
                    passed=status == "pass",
                    severity=dg.AssetCheckSeverity.WARN if severity == "warn" else dg.AssetCheckSeverity.ERROR,
                    metadata={
                        "status": status,
                        "failures": int(node_result.failures or 0),
                        "unique_id": node.unique_id,
                        "execution_seconds": seconds,
                    },
                )


@dbt_assets(
    manifest=MANIFEST,
    dagster_dbt_translator=TRANSLATOR,
    name="analytics_models",
    pool=OCEAN_TRACKING_POOL,
    partitions_def=account_partitions,
)
def analytics_models(
    context: dg.AssetExecutionContext, warehouse: Warehouse, ocean_tracking_api: OceanTrackingApi
) -> Iterator[Any]:
    """`dbt build` of the selected models and their tests, in the configured warehouse, under its writer
    lock, in this process: the CLI sync's runner (`pipelines.warehouse.models.invoke_dbt`) with
    dagster-dbt's subset selection, its test-to-check mapping, and the models' asset keys; from and into the
    schemas of the partition's account."""
    account = account_of(context)
    warehouse = warehouse.for_account(account)
    store = warehouse.store()
    selection, indirect = get_subset_selection_for_context(
        context, MANIFEST, select="fqn:*", exclude=None, selector=None,
        dagster_dbt_translator=TRANSLATOR, current_dbt_indirect_selection_env=None,
    )  # fmt: skip
    variables = dbt_vars(store, app_url=ocean_tracking_api.setting("app_url", account),
                         raw_schema=warehouse.dataset_name, analytics_schema=warehouse.analytics_schema)
    message = f"dagster run {context.run_id}: dbt build"
    # every model selected (a full sync, the automation after any ingest): what changed since the last complete
    # build decides what is built (`plan_build`); a subset picked in Dagster is built as picked
    whole = context.assets_def.keys_by_output_name == context.assets_def.node_keys_by_output_name
    # the plan, the record and the rebuilt models' metadata share one attach of the lake (as a CLI sync's do)
    with kept_session(store) as session:
        with store.writing():
            plan = None
            if whole:
                plan = plan_build(store, variables, raw_schema=warehouse.dataset_name,
                                  analytics_schema=warehouse.analytics_schema, session=session)  # fmt: skip
                context.log.info(f"Models: {plan.reason}.")
                if plan.skip:
                    return
                selection = plan.dbt_arguments()
            # dagster-dbt's choice for this subset (`empty` when the checks are chosen one by one), else `buildable`:
            # the tests of the selected models, those against their sources included (cautious would drop a test
            # reading a source), and none of an unselected model (eager would run deep_links' on stg_shipments)
            args = [*dbt_args("build", target=dbt_target(store), variables=variables),
                    *selection, "--indirect-selection", indirect or "buildable"]  # fmt: skip
            environment = build_environment(store, commit_message=message,
                                            changed_since=plan.changed_since if plan else None)
            outcome = invoke_dbt(args, environment)
            if outcome.success and plan is not None:
                with session() as con:
                    record_build(con, plan, analytics_schema=warehouse.analytics_schema, message=message)
        events = list(dbt_events(context, outcome))
        unchanged = unchanged_outputs(context, events, plan.reason) if outcome.success and plan is not None else []
        reported = [*_with_table_metadata(context, events, warehouse, session), *unchanged]
    yield from in_topological_order(context, reported)
    if not outcome.success:
        raise dg.Failure(description=outcome_error(args, outcome))


model_assets: list[dg.AssetsDefinition] = [analytics_models]  # dbt's tests are its asset checks
