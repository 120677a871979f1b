"""The lake attached once per sync (`pipelines.compat.lake_connections_kept`): dlt's ducklake destination would
open and attach a connection for every borrow (each table's load job, each merge, the state, every read of the
warehouse during the extraction); inside a sync it attaches once and every connection is detached and closed
when the sync ends."""

from __future__ import annotations

from pipelines import compat
from tests.support.syncs import ENTITY_TABLES, sync_once


def test_a_sync_attaches_the_lake_once_and_leaves_no_connection_open(own_sandbox, synced_copy, synced):
    before = compat.lake_connections_opened()

    second = sync_once(own_sandbox, synced_copy.workdir)

    assert compat.lake_connections_opened() - before == 1
    assert not any(compat._idle.values()), "a kept connection outlived its sync"
    # the sync loaded as a sync does: the copy holds the same rows as the lake it was copied from
    for table in ENTITY_TABLES:
        assert second.scalar(f"select count(*) from {table}") == synced.scalar(f"select count(*) from {table}"), table
