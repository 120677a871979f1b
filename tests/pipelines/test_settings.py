"""Settings: malformed config files and mistyped destinations are reported as such, in one line."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest

from pipelines.errors import ConfigurationError
from pipelines.settings import API_KEY_ENV, CONFIG_SECTION
from pipelines.warehouse.destinations import named_target
from tests.conftest import lake_in

REPO_ROOT = Path(__file__).resolve().parents[2]


def _cli_sync(cwd: Path) -> subprocess.CompletedProcess:
    """`python -m pipelines sync` in a fresh process (dlt reads `.dlt/` once per process, from its cwd)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    return subprocess.run(
        [sys.executable, "-m", "pipelines", "sync", "--no-progress"],
        cwd=cwd, env={**env, "PYTHONPATH": str(REPO_ROOT)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def test_a_malformed_secrets_file_is_named_with_its_line(tmp_path):
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "secrets.toml").write_text('[sources.ocean_tracking]\napi_key = "abc\nbase_url = 3\n')
    result = _cli_sync(tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert "secrets.toml is malformed" in result.stderr and "line 2" in result.stderr
    assert "missing" not in result.stderr


@pytest.mark.parametrize(("typed", "meant"), [("postgress", "postgres"), ("duck_db", "duckdb")])
def test_a_mistyped_destination_gets_a_suggestion(typed, meant):
    with pytest.raises(ConfigurationError, match=f"Unknown destination '{typed}'. Did you mean {meant}"):
        named_target(typed)


def test_the_cli_says_what_is_missing_in_one_line_without_markup_loss(tmp_path):
    result = _cli_sync(tmp_path)
    assert result.returncode == 2
    assert "Traceback" not in result.stderr
    assert f"[{CONFIG_SECTION}]" in result.stderr and API_KEY_ENV in result.stderr
    assert not lake_in(tmp_path / "data").exists(), "nothing is created before the settings are whole"


def test_an_api_error_is_said_in_one_line_with_the_services_details_and_the_hint():
    from pipelines.cli import one_line
    from pipelines.errors import AuthenticationError, ErrorObject

    error = AuthenticationError(
        "Unauthorized", status=401, method="GET", path="/v2/shipments", errors=[ErrorObject(detail="bad key")]
    )

    line = one_line(str(error))

    assert "\n" not in line
    assert line.startswith("GET /v2/shipments HTTP 401: Unauthorized (bad key) The API key was rejected")
