"""The code location loads, its graph has clean keys and real deps, and dagster.yaml is a valid instance."""

from __future__ import annotations

import shutil
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from assets.definitions import build_resources, defs
from assets.ingest import INGEST_KEYS, asset_key, ocean_tracking_assets
from assets.resources import OCEAN_TRACKING_POOL
from pipelines.source.tables import TABLES

ROOT = Path(__file__).resolve().parents[2]


def test_definitions_are_loadable():
    dg.Definitions.validate_loadable(defs)
    graph = defs.resolve_asset_graph()
    assert set(INGEST_KEYS) <= set(graph.get_all_asset_keys())
    assert {s.name for s in defs.schedules} == {
        "full_sync_daily",
        "refresh_tracking_and_maps_schedule",
        "lake_maintenance_schedule",
    }
    assert {s.name for s in defs.sensors} == {
        "pending_tracking_requests_sensor",
        "webhook_notifications_sensor",
        "route_map_freshness_sensor",
        "follow_upstream_changes",
        "run_failure_alert_sensor",
        "asset_check_failure_alert_sensor",
    }


def test_ingest_keys_group_deps_and_pool():
    specs = {spec.key: spec for spec in ocean_tracking_assets.specs}
    assert set(specs) == {asset_key(table) for table in TABLES}
    assert all(spec.group_name == "ingest" for spec in specs.values())
    assert all(spec.freshness_policy is not None for spec in specs.values())
    deps = {key: {dep.asset_key for dep in spec.deps} for key, spec in specs.items()}
    assert deps[asset_key("containers")] >= {asset_key("shipments")}
    assert deps[asset_key("transport_events")] >= {asset_key("containers")}
    assert deps[asset_key("map_features")] == {asset_key("containers")}
    assert deps[asset_key("shipment_eta_history")] == {asset_key("shipments")}
    # no synthetic `dlt_<source>_<resource>` upstream keys: every dep is an ingest table
    assert set().union(*deps.values()) <= set(specs)
    assert ocean_tracking_assets.op.pool == OCEAN_TRACKING_POOL
    assert ocean_tracking_assets.can_subset


def test_resources_read_the_environment_as_env_vars(monkeypatch, tmp_path):
    monkeypatch.setenv("SOURCES__OCEAN_TRACKING__BASE_URL", "http://127.0.0.1:9/v2")
    monkeypatch.setenv("OCEAN_TRACKING_DESTINATION", "duckdb")
    monkeypatch.setenv("OCEAN_TRACKING_DUCKDB", str(tmp_path / "w.duckdb"))
    monkeypatch.delenv("SOURCES__OCEAN_TRACKING__APP_URL", raising=False)
    resources = build_resources()
    api = resources["ocean_tracking_api"]
    assert api.base_url == dg.EnvVar("SOURCES__OCEAN_TRACKING__BASE_URL")
    assert api.app_url == "https://app.terminal49.com"
    assert api.api_key == dg.EnvVar("SOURCES__OCEAN_TRACKING__API_KEY")
    assert resources["warehouse"].destination == dg.EnvVar("OCEAN_TRACKING_DESTINATION")
    assert resources["warehouse"].duckdb_path == dg.EnvVar("OCEAN_TRACKING_DUCKDB")
    assert set(resources) == {"ocean_tracking_api", "warehouse"}


def test_the_warehouse_is_the_ducklake_unless_the_environment_says_otherwise(monkeypatch):
    monkeypatch.delenv("OCEAN_TRACKING_DESTINATION", raising=False)
    assert build_resources()["warehouse"].destination == "ducklake"


def test_dagster_yaml_instance(tmp_path, monkeypatch):
    """The project's dagster.yaml loads; its relative paths land under `.dagster/` of the cwd."""
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    monkeypatch.chdir(tmp_path)
    with dg.DagsterInstance.from_ref(InstanceRef.from_dir(str(tmp_path))) as instance:
        assert instance.get_concurrency_config().pool_config.default_pool_limit == 1
        assert instance.run_retries_enabled and instance.run_retries_max_retries == 2
        assert instance.get_concurrency_config().run_queue_config.max_concurrent_runs == 4
        assert not instance.telemetry_enabled
        assert Path(instance.root_directory) == Path(".dagster")
        instance.get_runs()
    assert (tmp_path / ".dagster" / "storage").is_dir()


@pytest.mark.parametrize("name", ["assets/maps.py", "assets/models.py", "assets/writeback.py"])
def test_modules_of_other_parts_export_lists(name):
    assert (ROOT / name).exists()
