"""Declarative freshness: after an ingest alone, the automation requests the models and the maps, and the
runs it requests bring them up to date, with no manual step (against the real sandbox over HTTP)."""

from __future__ import annotations

import dagster as dg
import pytest

from assets.automation import AUTOMATION_SENSOR_NAME, FOLLOWING_GROUPS
from assets.definitions import defs
from assets.ingest import INGEST_GROUP
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME, geoparquet_path, maps_dir
from pipelines.warehouse.models import seed_names
from tests.support.dagster import sandbox_resources


def definitions_on(resources: dict) -> dg.Definitions:
    """The code location's definitions with the test's resources (same assets, checks, sensors, executor)."""
    return dg.Definitions(
        assets=defs.assets,
        asset_checks=defs.asset_checks,
        sensors=defs.sensors,
        resources=resources,
        executor=defs.executor,
    )


def requested_keys(result, definitions: dg.Definitions) -> set[dg.AssetKey]:
    """The assets an automation evaluation requested (through the result's public `get_num_requested`)."""
    return {key for key in definitions.resolve_asset_graph().get_all_asset_keys() if result.get_num_requested(key)}


def run_requested(definitions: dg.Definitions, keys: set[dg.AssetKey], instance) -> dg.ExecuteInProcessResult:
    """Execute what the automation requested the way the daemon does: the assets' implicit job, subset to
    the requested assets, with every check of those assets riding along."""
    job = definitions.resolve_implicit_global_asset_job_def().get_subset(asset_selection=keys)
    return job.execute_in_process(instance=instance)


def row_count(warehouse, table: str) -> int:
    with warehouse.connect(read_only=True) as con:
        return con.execute(f"select count(*) from {table}").fetchone()[0]


def test_the_automation_sensor_is_on_by_default_and_targets_only_what_spends_no_request():
    sensor = next(s for s in defs.sensors if s.name == AUTOMATION_SENSOR_NAME)
    assert sensor.default_status == dg.DefaultSensorStatus.RUNNING
    graph = defs.resolve_asset_graph()
    following = {key for key in graph.get_all_asset_keys() if graph.get(key).automation_condition is not None}
    groups = {graph.get(key).group_name for key in following}
    assert groups == set(FOLLOWING_GROUPS)
    # every model and map follows; no asset that spends API requests (or the maintenance) does
    assert following == {key for key in graph.get_all_asset_keys() if graph.get(key).group_name in FOLLOWING_GROUPS}
    assert defs.executor.name == "in_process"


@pytest.mark.slow
def test_an_ingest_alone_refreshes_models_and_maps_at_the_next_evaluation(sandbox, tmp_path):
    resources = sandbox_resources(sandbox, tmp_path)
    definitions = definitions_on(resources)
    warehouse = resources["warehouse"]
    ingest = dg.AssetSelection.groups(INGEST_GROUP)
    with dg.instance_for_test() as instance:
        first = dg.evaluate_automation_conditions(defs=definitions, instance=instance)
        # nothing upstream has ever been loaded: nothing to build but the seeds, which need nothing upstream
        seeds = {dg.AssetKey([ANALYTICS_SCHEMA, name]) for name in seed_names()}
        assert seeds and requested_keys(first, definitions) == seeds

        job = definitions.resolve_implicit_global_asset_job_def()
        ingest_keys = ingest.resolve(definitions.resolve_asset_graph())
        assert job.get_subset(asset_selection=ingest_keys).execute_in_process(instance=instance).success

        after_ingest = dg.evaluate_automation_conditions(defs=definitions, instance=instance, cursor=first.cursor)
        graph = definitions.resolve_asset_graph()
        downstream = {k for k in graph.get_all_asset_keys() if graph.get(k).group_name in FOLLOWING_GROUPS}
        assert requested_keys(after_ingest, definitions) == downstream

        refreshed = run_requested(definitions, requested_keys(after_ingest, definitions), instance)
        assert refreshed.success
        # the models hold the ingested rows: one status row per loaded container
        containers = row_count(warehouse, f"{DATASET_NAME}.containers")
        assert containers > 0
        assert row_count(warehouse, f"{ANALYTICS_SCHEMA}.container_status") == containers
        # and the dbt tests rode along as the models' checks
        assert refreshed.get_asset_check_evaluations()
        assert geoparquet_path().exists() and (maps_dir() / "overview.png").exists()

        settled = dg.evaluate_automation_conditions(defs=definitions, instance=instance, cursor=after_ingest.cursor)
        assert settled.total_requested == 0, "nothing changed upstream: nothing is built twice"
