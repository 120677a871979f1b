"""The code location loads, its graph has clean keys and real deps, and dagster.yaml is a valid instance.

`assets/` is the project's defs folder: what `dg` lists, in this checkout and in a copy under another folder
name, is the location `ocean_tracking` as it was built by hand before (`HAND_BUILT`)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import dagster as dg
import pytest
from dagster._core.instance.ref import InstanceRef

from assets.alerts import alert_sensors
from assets.automation import automation_sensor
from assets.checks import ingest_checks
from assets.definitions import build_resources, defs
from assets.ingest import INGEST_KEYS, asset_key, ocean_tracking_assets
from assets.maintenance import lake_maintenance, lake_maintenance_job, lake_maintenance_schedule
from assets.maps import map_assets
from assets.models import model_assets
from assets.page import team_page
from assets.resources import OCEAN_TRACKING_POOL
from assets.schedules import full_sync_job, full_sync_schedule, refresh_job, refresh_schedule
from assets.sensors import follow_up_job, pending_tracking_requests_sensor
from assets.webhooks import (
    apply_notifications_job,
    route_map_freshness_sensor,
    route_maps_job,
    webhook_feed_is_live,
    webhook_notifications_sensor,
)
from assets.writeback import writeback_jobs
from pipelines.source import TABLES

ROOT = Path(__file__).resolve().parents[2]
DG = Path(sys.executable).with_name("dg")
LOCATION = "ocean_tracking"
# The location as assets/definitions.py listed it by hand before `assets/` became the defs folder: the folder
# must load exactly these, no more (a module-level object nobody meant to deploy) and no fewer.
HAND_BUILT = dg.Definitions(
    assets=[ocean_tracking_assets, *model_assets, *map_assets, team_page, lake_maintenance],
    asset_checks=[*ingest_checks, webhook_feed_is_live],
    jobs=[full_sync_job, refresh_job, follow_up_job, apply_notifications_job, route_maps_job, lake_maintenance_job,
          *writeback_jobs],
    schedules=[full_sync_schedule, refresh_schedule, lake_maintenance_schedule],
    sensors=[pending_tracking_requests_sensor, webhook_notifications_sensor, route_map_freshness_sensor,
             automation_sensor, *alert_sensors],
    resources=build_resources(),
)
# Dagster's implicit job of every asset, which every repository holds and `dg list defs` does not list.
IMPLICIT_JOB = "__ASSET_JOB"


def names(definitions: dg.Definitions) -> dict[str, set[str]]:
    """The names of what a set of definitions deploys, by kind (the implicit asset job included)."""
    repository = definitions.get_repository_def()
    return {
        "assets": {key.to_user_string() for key in repository.asset_graph.get_all_asset_keys()},
        "asset_checks": {key.to_user_string() for key in repository.asset_graph.asset_check_keys},
        "jobs": {job.name for job in repository.get_all_jobs()},
        "schedules": {schedule.name for schedule in repository.schedule_defs},
        "sensors": {sensor.name for sensor in repository.sensor_defs},
    }


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


def test_the_defs_folder_holds_what_the_hand_built_location_held():
    loaded = names(defs)
    assert loaded == names(HAND_BUILT)
    counts = {kind: len(loaded[kind]) for kind in ("assets", "jobs", "sensors", "schedules")}
    assert counts == {"assets": 60, "jobs": 10, "sensors": 6, "schedules": 3}
    assert set(defs.resources) == {"ocean_tracking_api", "warehouse"}
    assert defs.executor is dg.in_process_executor


# ---- the dg project ----------------------------------------------------------------------------------------


def dg_command(*args: str, project: Path, home: Path) -> subprocess.CompletedProcess:
    """`dg <args>` run at the root of `project`, as a person or CI runs it there, on an instance of its own
    in `home` (telemetry off, as the project's dagster.yaml has it)."""
    home.mkdir(exist_ok=True)
    (home / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    env = {**os.environ, "DAGSTER_HOME": str(home), "HOME": str(home)}
    env.pop("VIRTUAL_ENV", None)
    return subprocess.run([str(DG), *args], cwd=project, env=env, capture_output=True, text=True, timeout=300)


@pytest.fixture(scope="module")
def elsewhere(tmp_path_factory) -> Path:
    """A copy of what the code location reads (pyproject.toml, dagster.yaml, assets/, pipelines/, sql/ with its
    dbt manifest) in a folder named unlike the checkout, as a clone under another name is."""
    project = tmp_path_factory.mktemp("copy") / "ocean-tracking-elsewhere"
    project.mkdir()
    for name in ("pyproject.toml", "dagster.yaml"):
        shutil.copy2(ROOT / name, project / name)
    for name in ("assets", "pipelines", "sql"):
        shutil.copytree(ROOT / name, project / name, ignore=shutil.ignore_patterns("__pycache__", "logs"))
    assert project.name != ROOT.name
    return project


@pytest.mark.slow
@pytest.mark.parametrize("where", ["checkout", "elsewhere"])
def test_dg_checks_and_lists_the_location_ocean_tracking(where, request, tmp_path):
    """`dg check defs` passes and names the location `ocean_tracking` whatever the project's folder is called
    (its default would be the folder's name); `dg list defs` lists the hand-built location's definitions,
    loaded from that folder's modules."""
    project = ROOT if where == "checkout" else request.getfixturevalue("elsewhere")
    checked = dg_command("check", "defs", "--log-level", "info", project=project, home=tmp_path / "home")
    assert checked.returncode == 0, checked.stderr[-3000:]
    assert f"Validation successful for code location {LOCATION}." in checked.stdout, checked.stdout[-3000:]

    listed = dg_command("list", "defs", "--json", project=project, home=tmp_path / "home")
    assert listed.returncode == 0, listed.stderr[-3000:]
    listing = json.loads(listed.stdout)
    expected = names(HAND_BUILT)
    assert {asset["asset_key"] for asset in listing["assets"]} == expected["assets"]
    assert {check["key"] for check in listing["asset_checks"]} == expected["asset_checks"]
    assert {job["name"] for job in listing["jobs"]} == expected["jobs"] - {IMPLICIT_JOB}
    assert {schedule["name"] for schedule in listing["schedules"]} == expected["schedules"]
    assert {sensor["name"] for sensor in listing["sensors"]} == expected["sensors"]
    assert {resource["name"] for resource in listing["resources"]} == {"ocean_tracking_api", "warehouse"}
    counts = {kind: len(listing[kind]) for kind in ("assets", "jobs", "sensors", "schedules")}
    assert counts == {"assets": 60, "jobs": 9, "sensors": 6, "schedules": 3}
