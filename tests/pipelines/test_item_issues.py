"""The rule that tells an isolated item failure from a broken sync, and the report read from dlt's state."""

from __future__ import annotations

import pytest

from pipelines.source.bookkeeping import (
    ItemIssuesReport,
    TooManyItemFailuresError,
    issues_of_load,
    raise_if_excessive,
)


@pytest.mark.parametrize(
    ("failed", "covered", "excessive"),
    [
        (1, 1, False),  # one broken map of a one-container account is tolerated
        (2, 3, False),  # the floor: two failures never fail a sync
        (3, 4, True),
        (5, 100, False),  # exactly 5 %
        (6, 100, True),
        (50, 10_000, False),
    ],
)
def test_a_sync_fails_above_five_percent_beyond_a_floor_of_two(failed, covered, excessive):
    report = ItemIssuesReport(failed={"map_features": failed}, covered={"map_features": covered})
    assert bool(report.excessive()) is excessive


def test_the_share_is_judged_per_resource_and_said_in_one_line():
    report = ItemIssuesReport(
        failed={"map_features": 1, "vessels": 4}, covered={"map_features": 100, "vessels": 4}
    )
    with pytest.raises(TooManyItemFailuresError) as raised:
        raise_if_excessive(report)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("vessels: 4 of 4 items failed") and "map_features" not in message
    assert "sync_issues" in message


def test_tallies_of_an_older_load_do_not_count():
    state = {
        "item_issues": {
            "open": {"vessels/v1": {"resource": "vessels", "item_id": "v1", "message": "HTTP 500", "attempts": 2}},
            "sync": {"load_id": "older", "failed": {"vessels": 9}, "covered": {"vessels": 9}},
        }
    }
    report = issues_of_load(state, ["this-run"])
    assert report.failed == {} and not report.excessive()
    assert [entry["item_id"] for entry in report.open] == ["v1"]
    assert issues_of_load(state, ["older"]).excessive() == ["vessels: 9 of 9 items failed"]


def test_the_warning_names_the_first_item_and_counts_the_rest():
    opened = [
        {"resource": "map_features", "item_id": f"c{n}", "message": "HTTP 500", "attempts": 1} for n in range(3)
    ]
    warning = ItemIssuesReport(open=opened).warning()
    assert warning.startswith("3 item(s) skipped") and "map_features c0 (HTTP 500) and 2 more" in warning
    assert ItemIssuesReport().warning() is None
