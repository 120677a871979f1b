"""The map-freshness scheduler (`pipelines.source.map_schedule.candidates_sql`, `plan_maps`) over real DuckDB
tables shaped as the sync loads them, and the budget the maps get (`pipelines.source.map_schedule.map_budget`)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pytest

from pipelines.source.map_schedule import candidates_sql, map_budget, plan_maps

NOW = datetime(2026, 11, 20, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)


def _ts(delta: timedelta | None) -> datetime | None:
    return None if delta is None else NOW + delta


@pytest.fixture
def con():
    con = duckdb.connect()
    con.execute("set timezone = 'UTC'")
    con.execute("create table shipments (id text, pol_atd_at timestamptz, pod_ata_at timestamptz, pod_eta_at timestamptz)")
    con.execute("create table containers (id text, shipment_id text, pod_arrived_at timestamptz, "
                "pol_vessel_departed_at timestamptz)")
    con.execute("create table transport_events (id text, container_id text, created_at timestamptz)")
    con.execute("create table fetch_log (kind text, item_id text, digest bigint, phase text, fetched_at timestamptz)")
    # shipment: departed?, arrived?, eta from now
    ships = {"sea": (-5 * 24 * HOUR, None, 10 * 24 * HOUR), "soon": (-9 * 24 * HOUR, None, 20 * HOUR),
             "port": (None, None, 30 * 24 * HOUR), "done": (-20 * 24 * HOUR, -HOUR, -HOUR)}
    for ship_id, (atd, ata, eta) in ships.items():
        con.execute("insert into shipments values (?, ?, ?, ?)", [ship_id, _ts(atd), _ts(ata), _ts(eta)])
    containers = {  # container: shipment, map fetched (phase, age) or None, newest event age
        "never": ("sea", None, None),
        "phase": ("sea", ("pre_departure", -2 * HOUR), None),
        "events": ("sea", ("at_sea", -20 * 60 * timedelta(seconds=1)), -5 * timedelta(minutes=1)),
        "soon": ("soon", ("at_sea", -2 * HOUR), -10 * 24 * HOUR),
        "old": ("sea", ("at_sea", -5 * HOUR), -9 * 24 * HOUR),
        "older": ("sea", ("at_sea", -7 * HOUR), -9 * 24 * HOUR),
        "fresh": ("sea", ("at_sea", -5 * timedelta(minutes=1)), -9 * 24 * HOUR),
        "waiting": ("port", ("pre_departure", -2 * HOUR), None),
        "arrived": ("done", ("arrived", -30 * HOUR), -HOUR),
    }
    for container_id, (ship_id, fetched, event_age) in containers.items():
        con.execute("insert into containers values (?, ?, null, null)", [container_id, ship_id])
        if fetched:
            con.execute("insert into fetch_log values ('map', ?, 0, ?, ?)", [container_id, fetched[0], _ts(fetched[1])])
        if event_age is not None:
            con.execute("insert into transport_events values (?, ?, ?)", [f"e-{container_id}", container_id, _ts(event_age)])
    return con


def _rows(con) -> list[dict]:
    relation = con.sql(candidates_sql(NOW, bound_seconds=6 * 3600))
    return [dict(zip(relation.columns, row, strict=True)) for row in relation.fetchall()]


def test_maps_are_ranked_by_why_they_are_worth_a_request(con):
    plan = plan_maps(_rows(con), budget=100, now=NOW, bound_seconds=6 * 3600)
    assert [container for container, _ in plan.chosen] == ["never", "phase", "events", "soon", "older", "old"]
    assert dict(plan.chosen)["phase"] == "at_sea"
    assert plan.reasons["at_sea_oldest"] == 2 and plan.candidates == 6
    # fresh (5 min), waiting (fetched 2 h ago before departure) and arrived (final map) are not worth one
    assert plan.bound_met and plan.age_max_seconds == pytest.approx(5 * 60)


def test_a_small_budget_takes_the_most_urgent_and_reports_the_bound_missed(con):
    plan = plan_maps(_rows(con), budget=3, now=NOW, bound_seconds=6 * 3600)
    assert [container for container, _ in plan.chosen] == ["never", "phase", "events"]
    assert not plan.bound_met  # `older` stays 7 h old
    assert plan.age_max_seconds == pytest.approx(7 * 3600)
    assert plan.at_sea == 7 and plan.within_bound == pytest.approx(6 / 7)
    assert "NOT met" in plan.explain()


def test_no_budget_fetches_nothing_and_never_fetched_maps_are_unbounded(con):
    plan = plan_maps(_rows(con), budget=0, now=NOW)
    assert plan.chosen == [] and plan.age_max_seconds == float("inf")


def test_the_maps_get_what_the_last_hour_left():
    assert map_budget(15, spent_last_hour=0) == 1200  # 100/min x 80 % x 15 min
    assert map_budget(15, spent_last_hour=4000) == 200
    assert map_budget(15, spent_last_hour=9000) == 0
    assert map_budget(0, spent_last_hour=0) == 0
