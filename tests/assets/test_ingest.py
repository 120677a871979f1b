"""The ingest graph materialized through Dagster against the real sandbox over HTTP."""

from __future__ import annotations

import json
import logging

import dagster as dg
import pytest

from assets.checks import CATALOG, ingest_checks
from assets.ingest import INGEST_KEYS, asset_key, ocean_tracking_assets
from pipelines import compat
from pipelines.settings import DATASET_NAME
from tests.support.dagster import sandbox_resources
from tests.support.lakes import lake_in, tables_and_rows
from tests.support.sandboxes import FULL_KEY


def _check_results(result: dg.ExecuteInProcessResult) -> dict[str, dg.AssetCheckEvaluation]:
    return {
        f"{e.asset_key.to_user_string()}:{e.check_name}": e for e in result.get_asset_check_evaluations()
    }


def _spend_tags(result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> dict[str, str]:
    """The run's API spend: run tags `ocean_tracking/api_*`, set once a run."""
    tags = instance.get_run_by_id(result.run_id).tags
    return {name.split("/")[-1]: value for name, value in tags.items() if name.startswith("ocean_tracking/api_")}


def _spent(result: dg.ExecuteInProcessResult, instance: dg.DagsterInstance) -> int:
    return int(_spend_tags(result, instance)["api_requests"])


@pytest.fixture(scope="module")
def two_runs(sandbox, tmp_path_factory):
    """The whole ingest graph and all its checks, materialized twice into one warehouse (its lake last)."""
    workdir = tmp_path_factory.mktemp("ingest")
    resources = sandbox_resources(sandbox, workdir)
    with dg.instance_for_test() as instance:
        runs = [
            dg.materialize([ocean_tracking_assets, *ingest_checks], resources=resources, instance=instance)
            for _ in range(2)
        ]
        records = instance.get_event_records(
            dg.EventRecordsFilter(event_type=dg.DagsterEventType.ASSET_MATERIALIZATION)
        )
        stored = json.dumps([str(r.event_log_entry) for r in records])
        yield runs, stored, instance, lake_in(workdir / "data")


@pytest.mark.slow
def test_whole_graph_materializes_twice_and_every_check_passes(two_runs):
    runs, _, _, _ = two_runs
    for run in runs:
        assert run.success
        assert {e.asset_key for e in run.get_asset_materialization_events()} == set(INGEST_KEYS)
        checks = _check_results(run)
        assert len(checks) == len(CATALOG)
        failed = {name: e.metadata for name, e in checks.items() if not e.passed}
        assert not failed


@pytest.mark.slow
def test_the_ingest_assets_load_the_tables_and_rows_the_sync_loads(two_runs, synced):
    """One load path: Dagster's ingest leaves what `sync_account` leaves (the CLI's, in tests/e2e/test_extraction)."""
    *_, lake = two_runs
    assert tables_and_rows(lake, DATASET_NAME) == tables_and_rows(synced.store, DATASET_NAME)


@pytest.mark.slow
def test_runs_report_the_api_spend_once_but_never_the_key(two_runs):
    runs, stored, instance, _ = two_runs
    first, second = runs
    spend = _spend_tags(first, instance)
    assert set(spend) == {"api_requests", "api_responses_429", "api_retries", "api_limiter_wait_seconds"}
    assert spend["api_responses_429"] == "0"
    assert float(spend["api_limiter_wait_seconds"]) >= 0
    # once a run: no table's materialization repeats it
    for event in first.get_asset_materialization_events():
        assert not [name for name in event.materialization.metadata if name.startswith("api_")]
    # nothing changed in between except the clock: no reference fetched again, maps mostly not due
    assert 0 < _spent(second, instance) < _spent(first, instance)
    assert FULL_KEY not in stored
    assert FULL_KEY not in json.dumps(instance.get_run_by_id(first.run_id).tags)


@pytest.mark.slow
def test_every_table_reports_its_rows_and_when_its_data_last_changed(two_runs):
    runs, _, _, _ = two_runs
    first, second = ({e.asset_key: e.materialization.metadata for e in run.get_asset_materialization_events()} for run in runs)
    for key, metadata in second.items():
        if "dagster/last_updated_timestamp" not in metadata:
            # a table that never received rows: absent (no failed item, no sync_issues) or empty (no
            # shipment left the account: departed_shipments)
            assert metadata.get("dagster/row_count", dg.MetadataValue.int(0)).value == 0, key
            continue
        changed_at = metadata["dagster/last_updated_timestamp"].value
        assert changed_at >= first[key]["dagster/last_updated_timestamp"].value
    # the time is the data's, not the run's: tables the second run brought nothing new to keep theirs
    # (references are fetched once, ever; unchanged rows are not loaded again)
    unchanged = [
        key
        for key, metadata in second.items()
        if "dagster/last_updated_timestamp" in metadata
        and metadata["dagster/last_updated_timestamp"].value == first[key]["dagster/last_updated_timestamp"].value
    ]
    assert unchanged


@pytest.mark.slow
def test_rows_and_geometry_view_are_in_the_warehouse(two_runs):
    runs, _, _, _ = two_runs
    by_key = {
        e.asset_key: e.materialization.metadata for e in runs[0].get_asset_materialization_events()
    }
    assert by_key[asset_key("shipments")]["dagster/row_count"].value == 60
    geo = _check_results(runs[0])["ocean_tracking/map_features:geometries_valid"].metadata
    assert geo["rows"].value > 0


def test_only_tracking_requests_can_be_materialized(sandbox, tmp_path, dagster_instance):
    key = asset_key("tracking_requests")
    attached = compat.lake_connections_opened()
    result = dg.materialize(
        [ocean_tracking_assets, *ingest_checks],
        resources=sandbox_resources(sandbox, tmp_path),
        instance=dagster_instance,
        selection=dg.AssetSelection.assets(key),
    )
    assert result.success
    assert [e.asset_key for e in result.get_asset_materialization_events()] == [key]
    checks = _check_results(result)
    # the table's key and references are dbt tests, run with the models (`assets.models`)
    assert set(checks) == {"ocean_tracking/tracking_requests:columns_as_declared"}
    assert all(e.passed for e in checks.values())
    # one page of tracking requests and, this being the dataset's first load, the key's check
    # (pipelines.sync.claim_dataset): no shipment pages, parties or maps
    assert _spent(result, dagster_instance) == 2
    assert compat.lake_connections_opened() - attached == 1  # the load and its row counts share one attach


@pytest.mark.slow
def test_a_failing_map_is_a_warning_and_a_sync_issues_row_not_a_failed_run(
    own_sandbox, tmp_path, dagster_instance, monkeypatch
):
    from tests.support.sandboxes import first_container, set_routes

    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BACKOFF_FACTOR", "0.01")  # every attempt fails: no use waiting
    broken = first_container(own_sandbox)
    set_routes(own_sandbox, [{"path": f"/v2/containers/{broken}/map_geojson", "status": 502}])
    resources = sandbox_resources(own_sandbox, tmp_path)

    result = dg.materialize(
        [ocean_tracking_assets, *ingest_checks], resources=resources, instance=dagster_instance,
        run_config={"ops": {"ocean_tracking_ingest": {"config": {"include_maps": True}}}},
    )  # fmt: skip

    assert result.success
    by_key = {e.asset_key: e.materialization.metadata for e in result.get_asset_materialization_events()}
    assert by_key[asset_key("sync_issues")]["dagster/row_count"].value == 1
    check = _check_results(result)["ocean_tracking/sync_issues:no_item_failing_over_a_day"]
    assert check.passed and check.metadata["failing_items"].value == 1
    warnings = [
        record.user_message
        for record in dagster_instance.all_logs(result.run_id)
        if record.level == logging.WARNING and "sync_issues" in record.user_message
    ]
    assert len(warnings) == 1 and broken in warnings[0]


@pytest.mark.slow
def test_a_quarter_of_the_maps_failing_loads_what_arrived_then_fails_the_run(
    own_sandbox, tmp_path, dagster_instance, monkeypatch
):
    from tests.support.sandboxes import set_routes

    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BACKOFF_FACTOR", "0.01")  # every attempt fails: no use waiting
    set_routes(own_sandbox, [{"path": "/v2/containers/[0-3]*/map_geojson", "status": 500}])

    result = dg.materialize(
        [ocean_tracking_assets], resources=sandbox_resources(own_sandbox, tmp_path), instance=dagster_instance,
        raise_on_error=False,
    )  # fmt: skip

    assert not result.success
    failure = next(e for e in result.all_events if e.event_type == dg.DagsterEventType.STEP_FAILURE)
    assert failure.step_failure_data.error.message.count("map_features:") == 1
    materialized = {e.asset_key for e in result.get_asset_materialization_events()}
    assert {asset_key("shipments"), asset_key("sync_issues")} <= materialized, "what arrived is loaded and reported"
