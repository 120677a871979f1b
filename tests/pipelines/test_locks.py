"""Waiting for a DuckDB file another process holds: a message naming the file and the holder, then either
the connection once the holder lets go, or one line saying what to do when the wait runs out."""

from __future__ import annotations

import logging
import time

import duckdb
import pytest

from pipelines.warehouse.locks import WarehouseLockedError, connect_waiting
from tests.conftest import hold_duckdb


def test_waits_for_the_holder_and_says_who_it_is(tmp_path, caplog):
    path = tmp_path / "warehouse.duckdb"
    duckdb.connect(str(path)).close()
    holder = hold_duckdb(path, 2.0)
    started = time.monotonic()
    with caplog.at_level(logging.WARNING, logger="pipelines.warehouse.locks"):
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
