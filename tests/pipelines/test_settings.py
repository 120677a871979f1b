"""Settings: malformed config files, mistyped destinations and unknown settings are reported as such, in one
line; the rate limiter's place is one setting, `limiter_url`."""

from __future__ import annotations

import inspect
import logging
import os
import subprocess
import sys
from pathlib import Path
from urllib.parse import urlparse

import pytest

from pipelines.api.ratelimit import TABLE, LimiterUrl
from pipelines.errors import ConfigurationError
from pipelines.settings import (
    API_KEY_ENV,
    CONFIG_SECTION,
    ENV_PREFIX,
    LIMITER_PATH_ENV,
    LIMITER_URL_ENV,
    limiter_url,
)
from pipelines.warehouse.destinations import named_target
from tests.support.lakes import lake_in

REPO_ROOT = Path(__file__).resolve().parents[2]
KEY = "t49-settings-test-key-0123456789"


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


# ---- the rate limiter's place: one setting, limiter_url (limiter_path still works) --------------------------

def test_the_limiter_url_setting_selects_postgres_and_never_shows_its_password(monkeypatch, postgres_database):
    from pipelines.api.client import OceanTrackingClient
    from pipelines.api.config import load_settings

    monkeypatch.setenv(LIMITER_URL_ENV, postgres_database.dsn)
    settings = load_settings(api_key=KEY)
    password = urlparse(postgres_database.dsn).password
    assert password not in repr(settings) + str(settings) + repr(settings.with_overrides(max_attempts=2))
    assert settings.with_overrides(max_attempts=2).limiter_location == settings.limiter_location

    client = OceanTrackingClient(settings)
    client.limiter.acquire()
    client.limiter.close()
    assert postgres_database.query(f"select count(*) from {TABLE}") == [(1,)]


def test_a_sqlite_limiter_url_is_the_limiter_path(monkeypatch, tmp_path):
    from pipelines.api.config import load_settings

    monkeypatch.setenv(LIMITER_PATH_ENV, str(tmp_path / "old.sqlite"))  # the older setting alone still works
    assert load_settings(api_key=KEY).limiter_location == LimiterUrl.sqlite(tmp_path / "old.sqlite")
    monkeypatch.delenv(LIMITER_PATH_ENV)
    monkeypatch.setenv(LIMITER_URL_ENV, LimiterUrl.sqlite(tmp_path / "rates.sqlite").reveal())
    settings = load_settings(api_key=KEY)
    assert settings.limiter_path == tmp_path / "rates.sqlite" and settings.limiter_url is None
    monkeypatch.setenv(LIMITER_PATH_ENV, str(tmp_path / "rates.sqlite"))  # both set, and they agree
    assert load_settings(api_key=KEY).limiter_location == LimiterUrl.sqlite(tmp_path / "rates.sqlite")


def test_the_default_limiter_is_the_hosts_sqlite_file(monkeypatch):
    from pipelines.api.config import load_settings

    monkeypatch.delenv(LIMITER_URL_ENV, raising=False)
    monkeypatch.delenv(LIMITER_PATH_ENV, raising=False)
    assert load_settings(api_key=KEY).limiter_location == LimiterUrl(limiter_url())


def test_limiter_url_and_path_disagreeing_is_one_line(monkeypatch, tmp_path):
    from pipelines.api.config import load_settings

    monkeypatch.setenv(LIMITER_URL_ENV, "postgresql://limiter:hunter2@db.internal:5432/rates")
    monkeypatch.setenv(LIMITER_PATH_ENV, str(tmp_path / "rates.sqlite"))
    with pytest.raises(ConfigurationError) as info:
        load_settings(api_key=KEY)
    message = str(info.value)
    assert "\n" not in message and LIMITER_URL_ENV in message and LIMITER_PATH_ENV in message
    assert "hunter2" not in message


def test_a_limiter_url_of_another_scheme_is_one_line(monkeypatch):
    from pipelines.api.config import load_settings

    monkeypatch.setenv(LIMITER_URL_ENV, "redis://:hunter2@cache:6379/0")
    with pytest.raises(ConfigurationError, match=r"must be postgresql://.* or sqlite:///.*; got scheme 'redis'") as info:
        load_settings(api_key=KEY)
    assert "hunter2" not in str(info.value)


def test_the_custom_fields_cadence_is_read_per_account_and_a_negative_one_is_one_line(monkeypatch):
    from pipelines.api.config import load_settings
    from pipelines.settings import CUSTOM_FIELDS_EVERY_ENV, DEFAULT_CUSTOM_FIELDS_EVERY_HOURS, Account

    assert load_settings(api_key=KEY).custom_fields_every_hours == DEFAULT_CUSTOM_FIELDS_EVERY_HOURS
    monkeypatch.setenv(CUSTOM_FIELDS_EVERY_ENV, "6")
    emea = Account("emea")
    monkeypatch.setenv(emea.setting_env("custom_fields_every_hours"), "0")
    assert load_settings(api_key=KEY).custom_fields_every_hours == 6
    assert load_settings(api_key=KEY, account=emea).custom_fields_every_hours == 0  # its own, not the shared 6
    assert load_settings(api_key=KEY, account=Account("apac")).custom_fields_every_hours == 6
    monkeypatch.setenv(CUSTOM_FIELDS_EVERY_ENV, "-1")
    with pytest.raises(ConfigurationError) as info:
        load_settings(api_key=KEY)
    assert "\n" not in str(info.value) and CUSTOM_FIELDS_EVERY_ENV in str(info.value)


# ---- settings the product does not know are reported --------------------------------------------------------

def test_an_unknown_environment_setting_is_named_with_the_closest_known_one(monkeypatch, caplog):
    from pipelines.api.config import load_settings

    monkeypatch.setenv(f"{ENV_PREFIX}LIMITER_ULR", "postgresql://u:hunter2@h/db")
    monkeypatch.setenv(f"{ENV_PREFIX}ZZQX_UNRELATED", "hunter3")
    caplog.set_level(logging.WARNING, logger="pipelines.api.config")
    load_settings(api_key=KEY)
    load_settings(api_key=KEY)  # reported once a process, not at every load

    lines = [r.getMessage() for r in caplog.records if "Unknown setting" in r.getMessage()]
    assert lines == [
        f"Unknown setting {ENV_PREFIX}LIMITER_ULR (did you mean {ENV_PREFIX}LIMITER_URL?); it is ignored.",
        f"Unknown setting {ENV_PREFIX}ZZQX_UNRELATED; it is ignored.",
    ]
    assert "hunter2" not in caplog.text and "hunter3" not in caplog.text


def test_known_settings_are_not_reported(monkeypatch, caplog):
    from pipelines.api.config import KNOWN_SETTINGS, load_settings

    for name in ("REQUEST_DEADLINE", "WEBHOOK_SECRET", "INCLUDE_MAPS", "LIMITER_PATH", "RESOURCE__NESTED"):
        monkeypatch.setenv(f"{ENV_PREFIX}{name}", "1" if name != "LIMITER_PATH" else "/tmp/x.sqlite")
    caplog.set_level(logging.WARNING, logger="pipelines.api.config")
    load_settings(api_key=KEY)
    assert "Unknown setting" not in caplog.text
    assert {"api_key", "base_url", "app_url", "webhook_secret", "limiter_url", "limiter_path",
            "rate_window_seconds", "request_deadline"} <= KNOWN_SETTINGS  # fmt: skip


def test_every_argument_dlt_injects_into_the_source_is_known():
    from pipelines.api.config import KNOWN_SETTINGS
    from pipelines.source.resources import ocean_tracking

    assert set(inspect.signature(ocean_tracking).parameters) <= KNOWN_SETTINGS


def test_an_unknown_key_in_a_config_file_is_named_with_its_file(tmp_path):
    """dlt reads `.dlt/` once a process, from its working directory: a fresh process in a folder of its own."""
    (tmp_path / ".dlt").mkdir()
    (tmp_path / ".dlt" / "config.toml").write_text(
        '[sources.ocean_tracking]\nlimiter_ulr = "postgresql://u:hunter2@h/db"\nrate_window_seconds = 3\n'
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOURCES__")}
    script = f"from pipelines.api.config import load_settings; load_settings(api_key={KEY!r})"
    result = subprocess.run([sys.executable, "-c", script], cwd=tmp_path, env={**env, "PYTHONPATH": str(REPO_ROOT)},
                            capture_output=True, text=True, timeout=120)  # fmt: skip
    assert result.returncode == 0, result.stderr
    assert result.stderr.strip().splitlines() == [
        f"Unknown setting limiter_ulr under [{CONFIG_SECTION}] in config.toml (did you mean limiter_url?); "
        "it is ignored."
    ]
