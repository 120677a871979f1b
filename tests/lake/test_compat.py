"""The lake attached once per sync (`pipelines.compat.lake_connections_kept`): dlt's ducklake destination would
open and attach a connection for every borrow (each table's load job, each merge, the state, every read of the
warehouse during the extraction); inside a sync it attaches once and every connection is detached and closed
when the sync ends."""

from __future__ import annotations

import duckdb
import pytest

from pipelines import compat
from tests.support.syncs import ENTITY_TABLES, sync_once


@pytest.mark.slow
def test_a_sync_attaches_the_lake_once_and_leaves_no_connection_open(own_sandbox, synced_copy, synced):
    before = compat.lake_connections_opened()

    second = sync_once(own_sandbox, synced_copy.workdir)

    assert compat.lake_connections_opened() - before == 1
    assert not any(compat._idle.values()), "a kept connection outlived its sync"
    # the sync loaded as a sync does: the copy holds the same rows as the lake it was copied from
    for table in ENTITY_TABLES:
        assert second.scalar(f"select count(*) from {table}") == synced.scalar(f"select count(*) from {table}"), table


def test_outside_a_sync_dlt_opens_and_closes_its_connections_as_its_own_code_does(tmp_path):
    # the overrides change nothing outside `lake_connections_kept`: a dlt client attaches, then detaches and closes
    from pipelines.warehouse.destinations import ducklake_target, make_pipeline
    from tests.support.lakes import lake_in

    target = ducklake_target(lake_in(tmp_path / "data"))
    pipeline = make_pipeline(target, tmp_path / "dlt")
    before = compat.lake_connections_opened()
    with pipeline.sql_client() as client:
        con = client.native_connection
        assert con.execute("select current_database()").fetchone()[0] == "lake"
    assert compat.lake_connections_opened() == before, "counted only inside a sync"
    with pytest.raises(duckdb.ConnectionException):
        con.execute("select 1")  # closed at once, as dlt closes it
