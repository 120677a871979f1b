"""The sync-issues check on a real DuckDB table: quiet for fresh failures, a warning after a day."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import dagster as dg
import duckdb

from assets.checks import check_item_issues


def warehouse_with_issues(first_seen: list[datetime]) -> duckdb.DuckDBPyConnection:
    """An in-memory warehouse whose `sync_issues` holds one failing map per `first_seen` instant."""
    con = duckdb.connect()
    con.execute("create schema ocean_tracking")
    con.execute(
        "create table ocean_tracking.sync_issues (resource text, item_id text, http_status bigint, message text, "
        "first_seen_at timestamptz, attempts bigint, resolved boolean)"
    )
    for n, seen in enumerate(first_seen):
        con.execute(
            "insert into ocean_tracking.sync_issues values ('map_features', ?, 500, 'HTTP 500', ?, 3, false)",
            [f"c{n}", seen],
        )
    return con


def test_no_table_means_nothing_ever_failed():
    con = duckdb.connect()
    con.execute("create schema ocean_tracking")
    assert check_item_issues(con, "ocean_tracking").passed


def test_failures_younger_than_a_day_pass_and_are_counted():
    result = check_item_issues(warehouse_with_issues([datetime.now(UTC) - timedelta(hours=20)]), "ocean_tracking")
    assert result.passed and result.metadata["failing_items"].value == 1


def test_a_failure_older_than_a_day_warns_and_names_the_item():
    now = datetime.now(UTC)
    con = warehouse_with_issues([now - timedelta(hours=30), now - timedelta(hours=2)])

    result = check_item_issues(con, "ocean_tracking")

    assert not result.passed and result.severity == dg.AssetCheckSeverity.WARN
    assert result.metadata["failing_over_a_day"].value == 1 and result.metadata["failing_items"].value == 2
    assert [item["item_id"] for item in result.metadata["failing_over_a_day_sample"].data] == ["c0"]
