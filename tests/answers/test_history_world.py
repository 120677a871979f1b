"""The history world (the `history` fixture: one account synced every five days for eleven weeks) holds
what the performance models need, and every model built on it with rows and every dbt test passed."""

from __future__ import annotations

from collections import Counter

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
    assert empty == ["containers_at_sea"]  # the world ends after its voyages: none is at sea on its last day
    failed = [f"{check['asset']}:{check['check']}" for check in history.check_evaluations if not check["passed"]]
    assert history.check_evaluations and failed == []
