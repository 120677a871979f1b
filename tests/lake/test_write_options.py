"""The writer's lake options (`LAKE_WRITE_OPTIONS`): kept in the catalog, so dlt's own load connections
write Parquet row groups of at most 10,000 rows (DuckDB holds a whole row group in memory while it writes
one), and so does every other writer: a model's or a migration's `create table as`."""

from __future__ import annotations

import duckdb
import pytest

from pipelines.settings import LAKE_NAME
from pipelines.warehouse import LAKE_WRITE_OPTIONS
from tests.support.lakes import lake_in

ROW_GROUP_ROWS = 10_000
VECTOR = 2048  # DuckDB fills row groups in whole vectors: 10,000 rows asked, 10,240 written


def _options(con: duckdb.DuckDBPyConnection) -> dict[str, str]:
    return dict(con.execute(f"select option_name, value from ducklake_options('{LAKE_NAME}')").fetchall())


def test_a_writer_gives_a_new_lake_its_options_and_a_reader_sees_them(tmp_path):
    store = lake_in(tmp_path)
    with store.writing(), store.connect() as con:
        assert _options(con)["parquet_row_group_size"] == str(ROW_GROUP_ROWS)
    with store.connect(read_only=True) as con:
        assert _options(con) == {**_options(con), **LAKE_WRITE_OPTIONS}


@pytest.mark.slow
def test_a_table_is_written_in_row_groups_of_at_most_10_000_rows(tmp_path):
    store = lake_in(tmp_path)
    with store.writing(), store.connect() as con:
        # 40,000 rows of 1 KB: one row group under DuckLake's defaults (122,880 rows), four under ours
        con.execute("create table wide as select i as id, "
                    "(select string_agg(md5(i::varchar || j::varchar), '') from range(32) t(j))::blob as payload "
                    "from range(40000) r(i)")
        files = [row[0] for row in con.execute(f"select data_file from ducklake_list_files('{LAKE_NAME}', 'wide')").fetchall()]
        groups = con.execute(
            "select row_group_id, max(row_group_num_rows), sum(total_uncompressed_size) "
            "from parquet_metadata(?) group by file_name, row_group_id", [files]
        ).fetchall()
    assert len(groups) > 1, groups
    assert sum(rows for _, rows, _ in groups) == 40000
    assert all(rows < ROW_GROUP_ROWS + VECTOR for _, rows, _ in groups), groups
