"""Reading back what the pipeline loaded, from whichever destination it loads into.

The fetch log, the roster of departed shipments, the events a targeted refresh need not fetch again and the
map-freshness scheduler all ask the destination a question in DuckDB's SQL. Through dlt's dataset, so any
destination dlt reads answers (the DuckLake, a DuckDB file, Postgres, ...; dlt transpiles the SQL); a Delta
lake is read with the `deltalake` library dlt uses and queried by an in-memory DuckDB, because dlt's dataset
would need DuckDB's `delta` extension, which is downloaded at first use (no download happens here).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dlt
import duckdb
import pyarrow as pa
from dlt.destinations.exceptions import DestinationUndefinedEntity

from pipelines.warehouse.connections import in_memory_config

# Reading in batches keeps the transient Arrow memory small on a large account.
READ_BATCH_ROWS = 100_000


def loaded_tables(pipeline: dlt.Pipeline) -> dict[str, Any]:
    """Tables of the pipeline's schema that have columns (a table dlt never loaded has none), by name."""
    if not pipeline.default_schema_name:
        return {}
    return {name: table for name, table in pipeline.default_schema.tables.items() if table.get("columns")}


def query_loaded(pipeline: dlt.Pipeline, sql: str, *tables: str,
                 batch_rows: int = READ_BATCH_ROWS) -> Iterator[pa.RecordBatch]:
    """Run `sql` (DuckDB's dialect) over the loaded `tables` it reads, as Arrow batches. Nothing when one
    of them was never loaded, or the destination lost it (the schema knows it, the destination does not)."""
    known = loaded_tables(pipeline)
    if not tables or any(table not in known for table in tables):
        return
    try:
        if any(known[table].get("table_format") == "delta" for table in tables):
            from dlt.common.libs.deltalake import get_delta_tables

            con = duckdb.connect(config=in_memory_config())
            try:
                for table, delta in get_delta_tables(pipeline, *tables).items():
                    con.register(table, delta.to_pyarrow_dataset())
                yield from con.execute(sql).fetch_record_batch(batch_rows)
            finally:
                con.close()
            return
        yield from pipeline.dataset().query(sql, query_dialect="duckdb").iter_arrow(batch_rows)
    except DestinationUndefinedEntity:
        return


def loaded_rows(pipeline: dlt.Pipeline, sql: str, *tables: str) -> list[dict[str, Any]]:
    """`query_loaded` as a list of row dicts (for small answers)."""
    return [row for batch in query_loaded(pipeline, sql, *tables) for row in batch.to_pylist()]
