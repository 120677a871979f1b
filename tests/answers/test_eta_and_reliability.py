"""ETA accuracy at lead times and schedule reliability (issue 34, parts 2 and 3), recomputed here in Python
from the raw tables of the history world (sixteen syncs five days apart): `ocean_tracking.shipments` (the
arrivals, the carrier's original ETA) and `ocean_tracking.shipment_eta_history` (dlt SCD2: each version of
the dates, valid from when a sync saw it). Nothing is imported from sql/ or pipelines/: the definitions are
the issue's, written again here.

- ETA accuracy: the ETA known `lead` days before the actual arrival is the version valid then (consecutive
  versions with the same ETA are one); its error is ETA - arrival in hours (2 decimals).
- Schedule reliability (Sea-Intelligence): on time when the arrival's calendar date is within one day of the
  scheduled one, dates at the POD's zone (else UTC); reliability = on time / arrivals with a schedule.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from statistics import mean
from typing import Any
from zoneinfo import ZoneInfo, available_timezones

import pytest

from tests.support.dagster import BuiltWarehouse

LEAD_TIMES_DAYS = (1, 3, 7, 14, 21)
ON_TIME_WINDOW_DAYS = 1
BEST_CARRIERS, WORST_CARRIERS = (
    ("MAEU", "HLCU"),
    ("MSCU", "CMDU", "ZIMU"),
)  # the sandbox's reliability profiles


@dataclass(frozen=True)
class EtaVersion:
    """One ETA of an arrival as the syncs saw it: valid from `seen_from` until `seen_to` (None: current)."""

    eta: datetime | None
    seen_from: datetime
    seen_to: datetime | None

    def valid_at(self, instant: datetime) -> bool:
        """Whether this was the ETA the syncs showed at `instant`."""
        return self.seen_from <= instant and (self.seen_to is None or instant < self.seen_to)


@dataclass(frozen=True)
class Arrival:
    """An arrived leg: a shipment's arrival at its POD or inland destination, with what it is grouped by."""

    shipment_id: str
    kind: str
    arrived_at: datetime
    carrier: str
    lane: str
    vessel: str | None
    versions: tuple[EtaVersion, ...]

    def versions_before_arrival(self) -> int:
        """The ETA versions (non-empty) first seen before the arrival."""
        return sum(1 for v in self.versions if v.eta is not None and v.seen_from < self.arrived_at)

    def eta_known_at(self, instant: datetime) -> datetime | None:
        """The ETA the syncs showed at `instant`, if any."""
        return next((v.eta for v in self.versions if v.valid_at(instant)), None)


def _hours(later: datetime, earlier: datetime) -> float:
    return round((later - earlier).total_seconds() / 3600, 2)


def _month(instant: datetime) -> str:
    return instant.astimezone(UTC).strftime("%Y-%m")


def _lane(origin: str | None, destination: str | None) -> str:
    return f"{origin or '?'} -> {destination or '?'}"


def _eta_versions(history: list[dict[str, Any]], column: str) -> dict[str, tuple[EtaVersion, ...]]:
    """Per shipment, the versions of one ETA column: consecutive SCD2 rows with the same ETA merged."""
    rows_by_shipment: dict[str, list[dict[str, Any]]] = defaultdict(list)
    for row in history:
        rows_by_shipment[row["shipment_id"]].append(row)
    versions: dict[str, tuple[EtaVersion, ...]] = {}
    for shipment_id, rows in rows_by_shipment.items():
        merged: list[EtaVersion] = []
        for row in sorted(rows, key=lambda r: r["_dlt_valid_from"]):
            if merged and merged[-1].eta == row[column]:
                merged[-1] = EtaVersion(merged[-1].eta, merged[-1].seen_from, row["_dlt_valid_to"])
            else:
                merged.append(EtaVersion(row[column], row["_dlt_valid_from"], row["_dlt_valid_to"]))
        versions[shipment_id] = tuple(merged)
    return versions


def _arrivals(history: BuiltWarehouse) -> list[Arrival]:
    """Every arrived leg of the history world, from the raw tables."""
    shipments = history.dicts("select * from ocean_tracking.shipments")
    eta_history = history.dicts("select * from ocean_tracking.shipment_eta_history")
    pod_versions = _eta_versions(eta_history, "pod_eta_at")
    inland_versions = _eta_versions(eta_history, "destination_eta_at")
    arrivals = []
    for s in shipments:
        carrier = s["shipping_line_scac"] or "unknown"
        if s["pod_ata_at"] is not None:
            vessel = (s["pod_vessel_name"] or "unknown") + (
                f" (IMO {s['pod_vessel_imo']})" if s["pod_vessel_imo"] else ""
            )
            arrivals.append(Arrival(s["id"], "port_of_discharge", s["pod_ata_at"], carrier,
                                    _lane(s["port_of_lading_locode"], s["port_of_discharge_locode"]), vessel,
                                    pod_versions.get(s["id"], ())))  # fmt: skip
        if s["destination_ata_at"] is not None:
            arrivals.append(Arrival(s["id"], "inland_destination", s["destination_ata_at"], carrier,
                                    _lane(s["port_of_discharge_locode"], s["destination_locode"]), None,
                                    inland_versions.get(s["id"], ())))  # fmt: skip
    return arrivals


def _expected_accuracy(arrivals: list[Arrival]) -> dict[tuple[str, str, int], dict[str, Any]]:
    """Per (shipment, arrival, lead time): the ETA known then, its error and the leg's groups."""
    expected = {}
    for a in arrivals:
        seen = a.versions_before_arrival()
        for lead in LEAD_TIMES_DAYS:
            eta = a.eta_known_at(a.arrived_at - timedelta(days=lead))
            expected[(a.shipment_id, a.kind, lead)] = {
                "carrier_scac": a.carrier, "lane": a.lane, "vessel": a.vessel, "month": _month(a.arrived_at),
                "eta_known": eta is not None, "eta_at": eta,
                "eta_error_hours": _hours(eta, a.arrived_at) if eta is not None else None,
                "eta_versions_before_arrival": seen, "eta_revisions_before_arrival": seen - 1 if seen else None,
            }  # fmt: skip
    return expected


@pytest.fixture(scope="module")
def arrivals(history: BuiltWarehouse) -> list[Arrival]:
    """The arrived legs of the history world, recomputed from the raw tables."""
    return _arrivals(history)


def test_eta_accuracy_is_the_eta_known_at_each_lead_time_against_the_arrival(history, arrivals):
    expected = _expected_accuracy(arrivals)
    rows = {(r["shipment_id"], r["arrival"], r["lead_time_days"]): r
            for r in history.dicts("select * from analytics.eta_accuracy")}  # fmt: skip
    assert set(rows) == set(expected)  # every arrived leg at every lead time, none dropped
    known = 0
    for key, want in expected.items():
        row = rows[key]
        assert row["carrier_scac"] == want["carrier_scac"] and row["lane"] == want["lane"], key
        assert row["vessel"] == want["vessel"] and row["arrival_month"].strftime("%Y-%m") == want["month"], (
            key
        )
        assert row["eta_known"] is want["eta_known"] and row["eta_at"] == want["eta_at"], key
        assert row["eta_error_hours"] == pytest.approx(want["eta_error_hours"]), key
        assert row["eta_versions_before_arrival"] == want["eta_versions_before_arrival"], key
        assert row["eta_revisions_before_arrival"] == want["eta_revisions_before_arrival"], key
        known += want["eta_known"]
    assert known >= 20
    # the history holds legs whose ETA was revised several times before they arrived
    assert (
        sum(1 for a in arrivals if a.kind == "port_of_discharge" and a.versions_before_arrival() >= 3) >= 20
    )


def test_eta_accuracy_summary_aggregates_by_carrier_lane_vessel_and_month(history, arrivals):
    groups: dict[tuple[str, str, str, int], list[dict[str, Any]]] = defaultdict(list)
    for (_, kind, lead), row in _expected_accuracy(arrivals).items():
        for dimension, value in (("carrier", row["carrier_scac"]), ("lane", row["lane"]),
                                 ("vessel", row["vessel"]), ("month", row["month"])):  # fmt: skip
            if value is not None:
                groups[(dimension, value, kind, lead)].append(row)
    rows = {(r["dimension"], r["dimension_value"], r["arrival"], r["lead_time_days"]): r
            for r in history.dicts("select * from analytics.eta_accuracy_summary")}  # fmt: skip
    assert set(rows) == set(groups)
    compared = 0
    for key, members in groups.items():
        errors = [m["eta_error_hours"] for m in members if m["eta_known"]]
        revisions = [
            m["eta_revisions_before_arrival"]
            for m in members
            if m["eta_revisions_before_arrival"] is not None
        ]
        row = rows[key]
        assert (row["arrivals"], row["arrivals_with_eta"]) == (len(members), len(errors)), key
        if not errors:
            assert row["mean_absolute_error_hours"] is None and row["share_within_1_day"] is None, key
            continue
        compared += 1
        assert row["mean_absolute_error_hours"] == pytest.approx(mean(abs(e) for e in errors)), key
        assert row["bias_hours"] == pytest.approx(mean(errors)), key
        assert row["share_within_1_day"] == pytest.approx(sum(abs(e) <= 24 for e in errors) / len(errors)), (
            key
        )
        assert row["mean_revisions"] == (pytest.approx(mean(revisions)) if revisions else None), key
    assert compared >= 20


def _schedules(history: BuiltWarehouse, arrivals: list[Arrival]) -> list[dict[str, Any]]:
    """Per POD arrival and schedule basis: the schedule, the dates compared and the status."""
    shipments = {s["id"]: s for s in history.dicts("select * from ocean_tracking.shipments")}
    zones = available_timezones()
    out = []
    for a in arrivals:
        if a.kind != "port_of_discharge":
            continue
        s = shipments[a.shipment_id]
        zone = ZoneInfo(s["pod_timezone"] if s["pod_timezone"] in zones else "UTC")
        departed = s["pol_atd_at"]
        for basis, scheduled in (("original_eta", s["pod_original_eta_at"]),
                                 ("eta_at_departure", a.eta_known_at(departed) if departed else None)):  # fmt: skip
            record = {"shipment_id": a.shipment_id, "basis": basis, "carrier": a.carrier, "lane": a.lane,
                      "month": _month(a.arrived_at), "scheduled_at": scheduled, "status": "no_schedule", "delay_days": None}  # fmt: skip
            if scheduled is not None:
                days_off = (a.arrived_at.astimezone(zone).date() - scheduled.astimezone(zone).date()).days
                record["status"] = ("early" if days_off < -ON_TIME_WINDOW_DAYS
                                    else "late" if days_off > ON_TIME_WINDOW_DAYS else "on_time")  # fmt: skip
                record["delay_days"] = _hours(a.arrived_at, scheduled) / 24
            out.append(record)
    return out


def test_schedule_reliability_per_arrival_follows_the_sea_intelligence_rule(history, arrivals):
    expected = {(r["shipment_id"], r["basis"]): r for r in _schedules(history, arrivals)}
    rows = {(r["shipment_id"], r["schedule_basis"]): r
            for r in history.dicts("select * from analytics.schedule_reliability_arrivals")}  # fmt: skip
    assert set(rows) == set(expected)
    for key, want in expected.items():
        assert rows[key]["scheduled_at"] == want["scheduled_at"], key
        assert rows[key]["arrival_status"] == want["status"], key
        assert rows[key]["delay_days"] == (
            pytest.approx(want["delay_days"]) if want["delay_days"] is not None else None
        )
    assert sum(1 for w in expected.values() if w["status"] != "no_schedule") >= 20


def test_schedule_reliability_per_carrier_lane_and_month(history, arrivals):
    groups: dict[tuple[str, str, str, str], list[dict[str, Any]]] = defaultdict(list)
    for record in _schedules(history, arrivals):
        groups[(record["basis"], record["carrier"], record["lane"], record["month"])].append(record)
    rows = {(r["schedule_basis"], r["carrier_scac"], r["lane"], r["arrival_month"].strftime("%Y-%m")): r
            for r in history.dicts("select * from analytics.schedule_reliability")}  # fmt: skip
    assert set(rows) == set(groups)
    for key, members in groups.items():
        status = [m["status"] for m in members]
        late = [m["delay_days"] for m in members if m["status"] == "late"]
        compared = len(members) - status.count("no_schedule")
        row = rows[key]
        assert (row["arrivals"], row["arrivals_compared"], row["arrivals_excluded_no_schedule"]) == (
            len(members), compared, status.count("no_schedule")), key  # fmt: skip
        assert (row["arrivals_early"], row["arrivals_on_time"], row["arrivals_late"]) == (
            status.count("early"), status.count("on_time"), status.count("late")), key  # fmt: skip
        assert row["reliability"] == (
            pytest.approx(status.count("on_time") / compared) if compared else None
        ), key
        assert row["mean_delay_days_of_late"] == (pytest.approx(mean(late)) if late else None), key
    assert len(rows) >= 20


def test_carriers_reliability_profiles_show(history):
    """The sandbox gives carriers different reliability (MAEU best ... ZIMU worst): the pooled figures of
    the best profiles beat those of the worst, on schedule reliability and on ETA accuracy a week out."""

    def pooled(carriers: tuple[str, ...]) -> tuple[float, float]:
        listed = ", ".join(f"'{c}'" for c in carriers)
        [(reliability, mae)] = history.query(f"""
            select
                (select sum(arrivals_on_time) / sum(arrivals_compared) from analytics.schedule_reliability
                 where schedule_basis = 'original_eta' and carrier_scac in ({listed})),
                (select avg(abs(eta_error_hours)) from analytics.eta_accuracy
                 where arrival = 'port_of_discharge' and lead_time_days = 7 and carrier_scac in ({listed}))""")
        return reliability, mae

    best, worst = pooled(BEST_CARRIERS), pooled(WORST_CARRIERS)
    assert best[0] > worst[0] and best[1] < worst[1], (best, worst)


def test_the_original_schedule_leaves_no_arrival_out_and_the_history_basis_counts_what_it_excludes(history):
    [(pod_arrivals,)] = history.query(
        "select count(*) from ocean_tracking.shipments where pod_ata_at is not null"
    )
    totals = dict(history.query("""select schedule_basis, sum(arrivals) from analytics.schedule_reliability
                                   group by schedule_basis"""))  # fmt: skip
    assert totals == {"original_eta": pod_arrivals, "eta_at_departure": pod_arrivals}
    [(excluded,)] = history.query("""select sum(arrivals_excluded_no_schedule) from analytics.schedule_reliability
                                     where schedule_basis = 'eta_at_departure'""")  # fmt: skip
    assert 0 < excluded < pod_arrivals  # arrivals that departed before the first sync: counted, not dropped
