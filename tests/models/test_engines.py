"""The dbt project parses offline for every target (the build on PostgreSQL + PostGIS, from the CLI sync,
is tests/e2e/test_postgres_export.py)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.warehouse.models import dbt_args, project_models
from tests.support.dagster import APP_URL

DBT = str(Path(sys.executable).with_name("dbt"))


@pytest.mark.parametrize("target", ["ducklake", "duckdb", "postgres"])
def test_every_target_parses_offline(target, tmp_path):
    """`dbt parse` renders every model, macro and test config for the target without a connection (a
    compile would connect: the contracts introspect the raw tables)."""
    args = dbt_args("parse", target=target, variables={"app_url": APP_URL})
    done = subprocess.run([DBT, *args, "--target-path", str(tmp_path / "target"), "--no-partial-parse"],
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    manifest = json.loads((tmp_path / "target" / "manifest.json").read_text())
    models = {node["name"] for node in manifest["nodes"].values() if node["resource_type"] == "model"}
    assert models == {model.name for model in project_models()}
