"""The team page in a real browser (Debian's Chromium, headless): it opens from disk with no request leaving
the file, every chart draws, and the numbers in its tables are the marts'. Two lakes: `history` (a world
synced over weeks: arrivals to score, ETAs to judge) and `built` (today's world: containers at sea and at
risk)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections import defaultdict

import pytest

from pipelines.page import NEAR_FREE_DAYS
from pipelines.page.render import page_code, recorded_state, write_team_page
from tests.support.browser import ARTIFACTS_DIR, visit_page


def _open(lake, folder, name):
    page = write_team_page(lake.store, folder / "team_page.html", title="Ocean tracking")
    return page, visit_page(page.path, screenshot=ARTIFACTS_DIR / f"team_page_{name}.png")


@pytest.fixture(scope="module")
def watched(history, tmp_path_factory):
    """The page of the `history` lake (weeks of syncs: arrivals to score, ETAs to judge), written once and
    opened once in the browser for this module's tests."""
    return _open(history, tmp_path_factory.mktemp("history-page"), "history")


@pytest.fixture(scope="module")
def today(built, tmp_path_factory):
    """The page of the `built` lake (today's world: containers at sea, at terminals, at risk), written and
    opened once."""
    return _open(built, tmp_path_factory.mktemp("today-page"), "today")


@pytest.mark.parametrize("visited", ["watched", "today"])
def test_the_page_opens_offline_and_draws_every_chart(visited, request):
    page, visit = request.getfixturevalue(visited)

    assert visit.errors == []
    assert visit.requests[0].startswith("file:") and all(url.startswith(("file:", "data:")) for url in visit.requests)
    charts = json.loads(page.path.read_text().split('id="page-charts">', 1)[1].split("</script>", 1)[0])
    assert {"reliability", "dwell", "transit", "emissions_carrier", "routes"} <= set(charts)
    assert set(visit.report) == set(charts) and all(marks > 0 for marks in visit.report.values()), visit.report
    assert (ARTIFACTS_DIR / f"team_page_{visited.replace('watched', 'history')}.png").stat().st_size > 10_000


def test_the_scorecard_is_the_reliability_and_eta_marts(watched, history):
    _, visit = watched
    reliability = dict(history.query(
        "select carrier_scac, sum(arrivals_on_time) / sum(arrivals_compared) from analytics.schedule_reliability "
        "where schedule_basis = 'original_eta' group by carrier_scac having sum(arrivals_compared) > 0"))  # fmt: skip
    shown = {row["carrier_scac"]: row["reliability"] for row in visit.tables["carriers"] if row["reliability"] != ""}
    assert shown == pytest.approx(reliability, rel=1e-12) and len(shown) > 1
    errors = {(carrier, days): error for carrier, days, error in history.query(
        "select dimension_value, lead_time_days, mean_absolute_error_hours from analytics.eta_accuracy_summary "
        "where dimension = 'carrier' and arrival = 'port_of_discharge' and mean_absolute_error_hours is not null")}  # fmt: skip
    shown = {(row["carrier_scac"], row["lead_time_days"]): row["mean_absolute_error_hours"]
             for row in visit.tables["eta_error"] if row["mean_absolute_error_hours"] != ""}  # fmt: skip
    assert shown == pytest.approx(errors, rel=1e-12) and shown


def test_the_containers_at_risk_are_todays_rows_of_demurrage_exposure(today, built):
    _, visit = today
    rows = built.dicts("select * from analytics.demurrage_exposure where local_date = local_today and left_at is null")
    at_risk = {row["container_number"] for row in rows
               if (row["days_past_last_free_day"] or 0) > 0 or (row["blocking_hold_count"] or 0) > 0
               or (row["free_days_left"] is not None and row["free_days_left"] <= NEAR_FREE_DAYS)}  # fmt: skip
    shown = visit.tables["at_risk"]
    assert {row["container_number"] for row in shown} == at_risk and at_risk
    by_number = {row["container_number"]: row for row in rows}
    for row in shown:
        assert row["days_past_last_free_day"] in ("", by_number[row["container_number"]]["days_past_last_free_day"])


def test_dwell_transit_and_emissions_are_their_marts(watched, history):
    _, visit = watched
    dwell = {label: p50 * 24 for label, p50 in ((row["label"], row["p50_days"]) for row in visit.tables["dwell"])}
    medians = dict(history.query(
        "select coalesce(t.name, p.dimension_value), p.p50_hours from analytics.transit_dwell_percentiles p left join "
        "ocean_tracking.terminals t on t.id = p.dimension_value where p.measure = 'terminal_dwell' "
        "and p.dimension = 'terminal'"))  # fmt: skip
    assert dwell and dwell == pytest.approx({label: medians[label] for label in dwell}, rel=1e-12)
    emitted = defaultdict(float)
    for carrier, kg in history.query("select carrier_scac, co2e_kg from analytics.leg_emissions where co2e_kg is not null"):
        emitted[carrier] += kg / 1000
    shown = {row["carrier_scac"]: row["co2e_tonnes"] for row in visit.tables["emissions_carrier"]}
    assert shown == pytest.approx(dict(emitted), rel=1e-9)


def test_every_container_at_sea_is_listed_with_its_deep_link(today, built):
    _, visit = today
    expected = dict(built.query(
        "select s.container_number, l.url from analytics.containers_at_sea s join analytics.deep_links l "
        "on l.kind = 'container' and l.id = s.container_id where s.longitude is not null"))  # fmt: skip
    shown = dict(zip((row["container_number"] for row in visit.tables["at_sea"]), visit.links["at_sea"], strict=True))
    assert shown == expected and expected


def test_the_page_is_written_again_only_when_what_it_shows_changed(watched, history):
    page, _ = watched

    again = write_team_page(history.store, page.path, title="Ocean tracking")

    assert not again.written and again.bytes == page.bytes
    assert recorded_state(page.path).startswith(f"{page_code()}:")  # another release's page is rewritten
    stale = page.path.read_text().replace(f'content="{page_code()}:', 'content="an older release:', 1)
    page.path.write_text(stale)
    assert write_team_page(history.store, page.path, title="Ocean tracking").written


def test_the_page_command_without_a_warehouse_or_its_models_is_one_line(synced, tmp_path):
    def page(data_dir, *options):
        env = {**os.environ, "OCEAN_TRACKING_DATA_DIR": str(data_dir)}
        return subprocess.run([sys.executable, "-m", "pipelines", "page", "--output", str(tmp_path / "page.html"),
                               *options], capture_output=True, text=True, timeout=120, env=env)  # fmt: skip

    nothing, no_file, raw_only = page(tmp_path), page(tmp_path, "--duckdb", str(tmp_path / "none.duckdb")), page(
        synced.workdir / "data")

    for done in (nothing, no_file, raw_only):
        assert done.returncode == 2 and done.stderr.count("\n") == 1 and "Traceback" not in done.stderr, done.stderr
    assert "does not exist yet: run a sync first" in nothing.stderr and "none.duckdb does not exist yet" in no_file.stderr
    assert "No models in" in raw_only.stderr and "run a sync with models first" in raw_only.stderr
    assert not (tmp_path / "page.html").exists()
