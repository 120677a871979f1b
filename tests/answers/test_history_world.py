"""The history world (the `history` fixture: one account synced every five days for eleven weeks) holds
what the performance models need, and every model built on it with rows and every dbt test passed."""

from __future__ import annotations

import itertools
from collections import Counter
from datetime import timedelta

import pytest

from pipelines.warehouse.models import mart_names
from tests.support.dagster import BuiltWarehouse


def test_over_fifty_arrivals_were_seen_with_three_etas_or_more_before_they_arrived(history: BuiltWarehouse):
    """One sync sees one ETA per arrival: the ETA accuracy models need syncs spread over the voyages."""
    seen = history.query(
        """select history.shipment_id, count(distinct history.pod_eta_at), count(distinct history._dlt_valid_from)
           from ocean_tracking.shipment_eta_history as history
           join ocean_tracking.shipments as shipments on shipments.id = history.shipment_id
           where shipments.pod_ata_at is not null and history._dlt_valid_from < shipments.pod_ata_at
           group by history.shipment_id"""
    )
    etas_seen = Counter(min(etas, times) for _, etas, times in seen)
    assert sum(count for etas, count in etas_seen.items() if etas >= 3) >= 50, sorted(etas_seen.items())


def test_holds_fees_and_last_free_days_changed_while_the_syncs_watched(history: BuiltWarehouse):
    [(containers, with_versions, fee_changes)] = history.query(
        """select count(distinct container_id),
                  count(distinct container_id) filter (where _dlt_valid_to is not null),
                  count(*) filter (where fees is not null and _dlt_valid_to is not null)
           from ocean_tracking.container_charge_history"""
    )
    assert with_versions >= 50 and fee_changes >= 20, (containers, with_versions, fee_changes)


def test_every_mart_has_rows_and_every_dbt_test_passed(history: BuiltWarehouse):
    empty = [name for name in mart_names() if history.query(f"select count(*) from analytics.{name}") == [(0,)]]
    # the world ends after its voyages: none is at sea on its last day; and no webhook ever followed it
    assert sorted(empty) == ["containers_at_sea", "webhook_freshness"]
    failed = [f"{check['asset']}:{check['check']}" for check in history.check_evaluations if not check["passed"]]
    assert history.check_evaluations and failed == []


def _hours(delta: timedelta) -> float:
    return round(delta.total_seconds() / 3600, 2)


def test_eta_history_records_each_pod_eta_change(history: BuiltWarehouse):
    warehouse = history  # sixteen syncs, five days apart

    # expected, from the raw SCD2 rows: consecutive versions with the same POD ETA are one ETA version
    raw = warehouse.query(
        "select shipment_id, pod_eta_at, _dlt_valid_from, _dlt_valid_to from ocean_tracking.shipment_eta_history"
        " order by shipment_id, _dlt_valid_from"
    )
    original = dict(warehouse.query("select id, pod_original_eta_at from ocean_tracking.shipments"))
    expected: dict[str, list[dict]] = {}
    for shipment_id, eta, valid_from, valid_to in raw:
        versions = expected.setdefault(shipment_id, [])
        if versions and versions[-1]["pod_eta_at"] == eta:
            versions[-1]["valid_to"] = valid_to
        else:
            versions.append({"pod_eta_at": eta, "valid_from": valid_from, "valid_to": valid_to})
    changed = {sid: versions for sid, versions in expected.items() if len(versions) >= 2}
    assert len(changed) >= 20, "the syncs saw too few POD ETAs change"

    actual = warehouse.dicts("select * from analytics.shipment_eta_changes order by shipment_id, eta_version")
    assert len(actual) == sum(len(versions) for versions in expected.values())
    by_shipment: dict[str, list[dict]] = {}
    for row in actual:
        by_shipment.setdefault(row["shipment_id"], []).append(row)
    for shipment_id, versions in changed.items():
        rows = by_shipment[shipment_id]
        assert [row["eta_version"] for row in rows] == list(range(1, len(versions) + 1))
        assert [row["pod_eta_at"] for row in rows] == [v["pod_eta_at"] for v in versions]
        assert [row["valid_from"] for row in rows] == [v["valid_from"] for v in versions]
        assert rows[-1]["valid_to"] is None and rows[-1]["is_current"]
        assert rows[0]["previous_pod_eta_at"] is None and rows[0]["eta_change_hours"] is None
        for previous, row in itertools.pairwise(rows):
            assert row["previous_pod_eta_at"] == previous["pod_eta_at"]
            assert previous["valid_to"] == row["valid_from"]  # versions are contiguous
            if row["pod_eta_at"] is not None and previous["pod_eta_at"] is not None:
                assert row["eta_change_hours"] == pytest.approx(
                    _hours(row["pod_eta_at"] - previous["pod_eta_at"])
                )
        for row in rows:
            if row["pod_eta_at"] is not None and original[shipment_id] is not None:
                delta = row["pod_eta_at"] - original[shipment_id]
                assert row["eta_vs_original_hours"] == pytest.approx(_hours(delta))
