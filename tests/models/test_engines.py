"""The dbt project on the engines besides the DuckLake default: PostgreSQL + PostGIS for real (a server
per test session, data loaded by the CLI sync), and every target parsed offline."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlsplit

import pytest

from pipelines.warehouse.models import SQL_DIR, dbt_args, project_models
from tests.e2e.conftest import cli_env
from tests.models.conftest import APP_URL

DBT = str(Path(sys.executable).with_name("dbt"))
# models whose raw table the session sandbox never fills (no container has a hold): built, and empty
EMPTY_IN_THE_SANDBOX = {"stg_container_holds"}


def postgres_profile_env(dsn: str) -> dict[str, str]:
    """The `postgres` target's variables (sql/profiles.yml) for a libpq URL."""
    parts = urlsplit(dsn)
    return {
        "OCEAN_TRACKING_PG_HOST": parts.hostname or "localhost",
        "OCEAN_TRACKING_PG_PORT": str(parts.port or 5432),
        "OCEAN_TRACKING_PG_USER": parts.username or "postgres",
        "OCEAN_TRACKING_PG_PASSWORD": parts.password or "",
        "OCEAN_TRACKING_PG_DATABASE": parts.path.lstrip("/"),
    }


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


@pytest.mark.slow
def test_dbt_builds_every_model_on_postgres_from_a_cli_sync(sandbox, postgres_database, tmp_path):
    env = cli_env(sandbox.base_url, tmp_path, SOURCES__OCEAN_TRACKING__APP_URL=sandbox.app_url,
                  DESTINATION__POSTGRES__CREDENTIALS=postgres_database.dsn)  # fmt: skip
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--destination", "postgres"]
    synced = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)
    assert synced.returncode == 0, synced.stdout + synced.stderr

    args = dbt_args("build", target="postgres", variables={"app_url": APP_URL})
    built = subprocess.run([DBT, *args, "--target-path", str(tmp_path / "target")], cwd=SQL_DIR,
                           env={**env, **postgres_profile_env(postgres_database.dsn)},
                           capture_output=True, text=True, timeout=600)  # fmt: skip
    assert built.returncode == 0, built.stdout[-6000:]
    assert "ERROR=0" in built.stdout and "WARN=0" in built.stdout
    for model in project_models():
        (rows,) = postgres_database.query(f"select count(*) from analytics.{model.name}")[0]
        assert rows == 0 if model.name in EMPTY_IN_THE_SANDBOX else rows > 0, model.name
    # PostGIS measured the legs (geodesic, km), and the links were encoded by the PostgreSQL url_encode
    [(bad_lengths, legs)] = postgres_database.query(
        "select count(*) filter (where length_km is null or length_km <= 0), count(*) from analytics.voyage_legs"
    )
    assert legs > 0 and bad_lengths == 0
    [(bad_links,)] = postgres_database.query(
        "select count(*) from analytics.deep_links where url <> %s || replace(number, ' ', '%%20')",
        (f"{APP_URL}/shipments/find?q=",),
    )
    assert bad_links == 0
