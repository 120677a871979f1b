"""One load path: the CLI's `sync` and the Dagster ingest + models leave the same tables and rows."""

from __future__ import annotations

import subprocess
import sys

import dagster as dg
import pytest

from assets.ingest import ocean_tracking_assets
from assets.models import model_assets
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.models import project_models
from pipelines.warehouse.tables import table_row_counts
from tests.support.dagster import sandbox_resources
from tests.support.lakes import lake_in
from tests.support.syncs import cli_env

pytestmark = pytest.mark.slow


def _tables_and_rows(store) -> dict[str, int]:
    return {
        f"{schema}.{table}": rows
        for schema in (DATASET_NAME, ANALYTICS_SCHEMA)
        for table, rows in table_row_counts(store, schema, views=True).items()
    }


def test_cli_sync_and_dagster_leave_the_same_tables(own_sandbox, tmp_path):
    env = cli_env(own_sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=own_sandbox.app_url)
    env["OCEAN_TRACKING_DATA_DIR"] = str(tmp_path / "cli")
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress",
               "--geoparquet", str(tmp_path / "cli" / "features.parquet")]  # fmt: skip
    cli = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert cli.returncode == 0, cli.stdout + cli.stderr

    dagster_dir = tmp_path / "dagster"
    with dg.instance_for_test() as instance:
        result = dg.materialize(
            [ocean_tracking_assets, *model_assets],
            resources=sandbox_resources(own_sandbox, dagster_dir),
            instance=instance,
        )
    assert result.success

    by_cli, by_dagster = _tables_and_rows(lake_in(tmp_path / "cli")), _tables_and_rows(lake_in(dagster_dir / "data"))
    assert by_cli == by_dagster
    assert {f"{ANALYTICS_SCHEMA}.{model.name}" for model in project_models() if model.layer == "marts"} <= set(by_cli)
    assert by_cli[f"{DATASET_NAME}.shipments"] > 0 and by_cli[f"{ANALYTICS_SCHEMA}.container_status"] > 0
