"""The command line's options: what they select, what they refuse, what they describe."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from pipelines.cli import account_settings, build_parser, chosen_destination, maps_elsewhere
from pipelines.settings import API_KEY_ENV
from pipelines.warehouse.destinations import Target
from tests.support.scripted import TEST_KEY


def test_a_duckdb_file_given_alone_selects_the_duckdb_destination(monkeypatch, tmp_path):
    monkeypatch.setenv(API_KEY_ENV, TEST_KEY)
    warehouse = tmp_path / "mine.duckdb"

    _, target = account_settings(build_parser().parse_args(["sync", "--duckdb", str(warehouse)]))

    assert target.store is not None and target.store.duckdb_file == warehouse and not target.store.is_lake
    assert chosen_destination(build_parser().parse_args(["sync"])) == "ducklake", "without --duckdb, as before"


def test_a_duckdb_file_beside_another_destination_is_one_line_before_anything_runs(tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "pipelines", "sync", "--destination", "postgres", "--duckdb", str(tmp_path / "w.duckdb")],
        env={**_environment(), API_KEY_ENV: TEST_KEY, "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "data")},
        capture_output=True, text=True, timeout=120,
    )  # fmt: skip

    assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr
    assert done.stderr.startswith("error: --duckdb names a DuckDB file, but --destination is postgres")
    assert not (tmp_path / "w.duckdb").exists() and not (tmp_path / "data").exists()


@pytest.mark.parametrize(("command", "described"), [("sync", "Extract the whole account"),
                                                     ("refresh", "Load only what the webhook notifications")])
def test_sync_and_refresh_describe_themselves_and_take_no_progress(command, described, capsys):
    parser = build_parser()
    assert parser.parse_args([command, "--no-progress"]).no_progress
    with pytest.raises(SystemExit):
        parser.parse_args([command, "--help"])
    assert described in " ".join(capsys.readouterr().out.split())


def _environment() -> dict[str, str]:
    """This process's environment without a developer's API and warehouse settings."""
    return {name: value for name, value in os.environ.items() if not name.startswith(("SOURCES__", "OCEAN_TRACKING_"))}


def test_off_the_embedded_warehouse_the_sync_names_where_the_map_features_are_and_no_view_it_did_not_make():
    target = Target("postgres", "ocean_tracking")
    assert maps_elsewhere(target, typed_view=True).endswith(
        "the map features are in ocean_tracking.map_features, typed by PostGIS in ocean_tracking.map_features_geo.")
    # a database without PostGIS gets no view: the line names the table only
    assert maps_elsewhere(target, typed_view=False).endswith("the map features are in ocean_tracking.map_features.")
