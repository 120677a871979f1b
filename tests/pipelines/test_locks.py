"""Waiting for what another process holds: a message naming it and the holder, then either going on once
the holder lets go, or one line saying what to do when the wait runs out. A plain DuckDB file is held by
any process that opens it (the `duckdb` option); the DuckLake only by its one writer lock, never by a
reader."""

from __future__ import annotations

import logging
import time

import duckdb
import pytest

from pipelines.warehouse.connections import WarehouseLockedError, connect_waiting
from tests.support.holders import hold_duckdb, hold_lake
from tests.support.lakes import lake_in


@pytest.mark.slow
def test_waits_for_the_holder_and_says_who_it_is(tmp_path, caplog):
    path = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(path)).close()
    holder = hold_duckdb(path, 2.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pipelines.warehouse.connections"):
        con = connect_waiting(path, timeout=30)
    waited = time.monotonic() - started
    con.close()
    holder.wait(10)
    assert waited > 0.5  # it really waited for the other process
    [message] = [r.getMessage() for r in caplog.records]
    assert str(path) in message and f"process {holder.pid}" in message


def test_gives_up_with_one_line_naming_file_holder_and_remedy(tmp_path):
    path = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(path)).close()
    holder = hold_duckdb(path, 10.0)
    try:
        with pytest.raises(WarehouseLockedError) as raised:
            connect_waiting(path, timeout=0.5)
    finally:
        holder.kill()
        holder.wait(10)
    message = str(raised.value)
    assert "\n" not in message
    assert str(path) in message and f"process {holder.pid}" in message
    assert "OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS" in message


@pytest.mark.slow
def test_a_lake_writer_waits_for_the_writer_before_it_and_says_who_it_is(tmp_path, caplog):
    lake = lake_in(tmp_path / "data")
    holder = hold_lake(lake, 2.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pipelines.warehouse.connections"), lake.writing():
        waited = time.monotonic() - started
    holder.wait(10)
    assert waited > 0.5  # it really waited for the other process
    [message] = [r.getMessage() for r in caplog.records]
    assert "writer lock" in message and lake.place in message and f"process {holder.pid} " in message


@pytest.mark.slow
def test_a_lake_writer_gives_up_with_one_line_and_readers_never_wait(tmp_path, monkeypatch):
    lake = lake_in(tmp_path / "data")
    with lake.writing(), lake.connect() as con:
        con.execute("create table seen as select 1 as n")
    monkeypatch.setenv("OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS", "0.5")
    holder = hold_lake(lake, 600)
    try:
        with lake.connect(read_only=True) as con:  # would fail after 0.5 s, were it waiting for the writer
            assert con.execute("select n from seen").fetchall() == [(1,)]
        with pytest.raises(WarehouseLockedError) as raised, lake.writing():
            pass
    finally:
        holder.kill()
        holder.wait(10)
    message = str(raised.value)
    assert "\n" not in message
    assert "writer lock" in message and f"process {holder.pid} " in message
    assert "OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS" in message
