"""Moving a plain DuckDB warehouse into the lake with one command, keeping everything.

Every table of every dlt dataset in the file comes along with dlt's own `_dlt_pipeline_state`,
`_dlt_loads` and `_dlt_version`: a sync into the lake restores its state from there (the pipeline name is
the same), so the ids fetched once, the map schedule, the incremental cursors and the SCD2 history of
ETAs carry on instead of being fetched or started again. The `writeback` schema (published outcomes), the
`analytics` models and every other schema and view come too; dlt's staging schemas do not (dlt recreates
them). The copy is one lake transaction inside the writer lock: all of it, or nothing. A view that names
the file's own catalog (dbt-duckdb writes `"warehouse"."analytics"."container_status"` into a model's view)
names the lake instead, as dbt writes it there.

DuckLake stores what Parquet can hold. Types dlt creates in DuckDB all survive; a column of a type the
lake refuses becomes the nearest type it keeps, and the report names each one: INTERVAL (Parquet has no
negative interval), ENUM, UNION, BIT and BIGNUM become VARCHAR (cast back with `::interval` etc.), and a
fixed-size ARRAY a list.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipelines.errors import ConfigurationError, InputError, PipelineError
from pipelines.settings import INTERNAL_STAGING_LAYOUT, LAKE_NAME, writeback_journal_path
from pipelines.warehouse.backup import copy_sqlite
from pipelines.warehouse.locks import locked_error
from pipelines.warehouse.store import WarehouseStore
from pipelines.warehouse.tables import create_geometry_view

SOURCE_ALIAS = "migrating_from"
DLT_VERSION_TABLE = "_dlt_version"
# dlt's staging dataset beside each dataset, transient and recreated by dlt: its name now, and dlt's default
STAGING_LAYOUTS = (INTERNAL_STAGING_LAYOUT, "%s_staging")
GEOMETRY_VIEW = "map_features_geo"  # recreated by `create_geometry_view`, not copied
# Types a DuckLake table cannot hold (whole, or nested in a STRUCT, LIST or MAP), and what they become.
_UNSUPPORTED = (
    (re.compile(r"\bINTERVAL\b"), "VARCHAR"),
    (re.compile(r"\bENUM\((?:'(?:[^']|'')*'(?:,\s*)?)*\)"), "VARCHAR"),
    (re.compile(r"\bBIT\b"), "VARCHAR"),
    (re.compile(r"\b(?:BIGNUM|VARINT)\b"), "VARCHAR"),
    (re.compile(r"\[\d+\]"), "[]"),  # a fixed-size ARRAY: a LIST
)


@dataclass
class MigrationReport:
    """What a migration copied: rows per table (`schema.table`), views made, columns retyped, the journal."""

    tables: dict[str, int] = field(default_factory=dict)
    views: list[str] = field(default_factory=list)
    retyped: list[str] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)


def lake_type(data_type: str) -> str:
    """The type a column of DuckDB type `data_type` gets in the lake (the same, when the lake keeps it)."""
    if data_type.startswith("UNION("):
        return "VARCHAR"
    for pattern, replacement in _UNSUPPORTED:
        data_type = pattern.sub(replacement, data_type)
    return data_type


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _schemas_to_move(con: duckdb.DuckDBPyConnection) -> dict[str, list[str]]:
    """Tables per schema of the source file, dlt's staging schemas left out."""
    tables: dict[str, list[str]] = {}
    for schema, table in con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = ? order by all",
        [SOURCE_ALIAS],
    ).fetchall():
        tables.setdefault(schema, []).append(table)
    datasets = {schema for schema, names in tables.items() if DLT_VERSION_TABLE in names}
    staging = {layout % dataset for dataset in datasets for layout in STAGING_LAYOUTS}
    return {schema: names for schema, names in tables.items() if schema not in staging}


def _copy_table(con: duckdb.DuckDBPyConnection, schema: str, table: str, report: MigrationReport) -> None:
    columns = con.execute(
        "select column_name, data_type, is_nullable from duckdb_columns() "
        "where database_name = ? and schema_name = ? and table_name = ? order by column_index",
        [SOURCE_ALIAS, schema, table],
    ).fetchall()
    definitions, selects = [], []
    for name, data_type, nullable in columns:
        kept = lake_type(data_type)
        definitions.append(f"{_quoted(name)} {kept}{'' if nullable else ' not null'}")
        if kept == data_type:
            selects.append(_quoted(name))
        else:
            selects.append(f"cast({_quoted(name)} as {kept}) as {_quoted(name)}")
            report.retyped.append(f"{schema}.{table}.{name}: {data_type} -> {kept}")
    target = f"{_quoted(schema)}.{_quoted(table)}"
    con.execute(f"create table {target} ({', '.join(definitions)})")
    con.execute(f"insert into {target} select {', '.join(selects)} from {SOURCE_ALIAS}.{target}")


def _refuse_existing(con: duckdb.DuckDBPyConnection, store: WarehouseStore, schemas: list[str]) -> None:
    present = con.execute(
        "select schema_name, count(*) from duckdb_tables() where database_name = current_database() "
        "and list_contains(?, schema_name) group by all order by all",
        [schemas],
    ).fetchall()
    if present:
        held = ", ".join(f"{schema} ({count} table{'s' * (count != 1)})" for schema, count in present)
        raise ConfigurationError(
            f"Not migrated: {store.place} already has {held}; migrate only into a lake without them "
            "(a new data dir, or another DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG)."
        )


def migrate_duckdb(source: Path, store: WarehouseStore, *, journal: Path) -> MigrationReport:
    """Copy the DuckDB warehouse `source` (left untouched) into the lake `store`, in one transaction
    under the writer lock, then recreate its views and check every table's row count. The write-back
    journal beside `source` is copied to `journal` when that is another file and does not exist yet.
    Refuses when the lake already has tables in any schema the file brings."""
    if not store.is_lake:
        raise ConfigurationError(
            "lake migrate moves a DuckDB file into the DuckLake; the target is not a lake."
        )
    if not source.is_file():
        raise InputError(f"No DuckDB warehouse at {source}: name it with --from.")
    report = MigrationReport()
    with store.writing():
        with store.connect() as con:
            tables = _copy_into_lake(con, source, store, report)
        for dataset in (schema for schema, names in tables.items() if DLT_VERSION_TABLE in names):
            create_geometry_view(store, dataset)
    _carry_journal(source, journal, report)
    return report


def _copy_into_lake(
    con: duckdb.DuckDBPyConnection, source: Path, store: WarehouseStore, report: MigrationReport
) -> dict[str, list[str]]:
    """Attach `source` read-only beside the lake `con` is using, copy its tables in one transaction,
    then its views, and check the counts; the tables per schema that were copied."""
    quoted = str(source).replace("'", "''")
    try:
        con.execute(f"attach '{quoted}' as {SOURCE_ALIAS} (read_only)")
    except duckdb.Error as error:
        unusable = InputError(
            f"{source} cannot be opened as a DuckDB warehouse: {str(error).splitlines()[0]}"
        )
        raise (locked_error(error, source) or unusable) from None
    try:
        tables = _schemas_to_move(con)
        if not tables:
            raise InputError(f"{source} holds no tables: nothing to migrate.")
        _refuse_existing(con, store, list(tables))
        con.begin()
        try:
            for schema, names in tables.items():
                con.execute(f"create schema if not exists {_quoted(schema)}")
                for table in names:
                    _copy_table(con, schema, table, report)
            con.commit()
        except Exception:
            con.rollback()
            raise
        # DuckDB names a file's catalog after its stem: a view's fully qualified names carry it
        _recreate_views(con, source.stem, report)
        _check_counts(con, tables, report)
    finally:
        con.execute(f"detach {SOURCE_ALIAS}")
    return tables


def in_the_lake(view_sql: str, catalog: str) -> str:
    """`view_sql` with every name qualified by the file's `catalog` (`catalog.schema.table`) qualified by the
    lake's instead; quoted or not, never inside a string. DuckDB's own tokenizer finds the names."""
    tokens = duckdb.tokenize(view_sql)
    ends = [start for start, _ in tokens[1:]] + [len(view_sql)]
    texts = [view_sql[start:end].strip() for (start, _), end in zip(tokens, ends, strict=True)]
    pieces, position = [], 0
    for index, ((start, kind), text) in enumerate(zip(tokens, texts, strict=True)):
        after = texts[index + 1 : index + 4]  # `.schema.` when this is the catalog of `catalog.schema.table`
        names_the_catalog = (index == 0 or texts[index - 1] != ".") and after[0::2] == [".", "."]
        if kind == duckdb.token_type.identifier and text.strip('"') == catalog and names_the_catalog:
            pieces += [view_sql[position:start], LAKE_NAME]
            position = start + len(text)
    return "".join(pieces) + view_sql[position:]


def _recreate_views(con: duckdb.DuckDBPyConnection, catalog: str, report: MigrationReport) -> None:
    """Every view of the file but the geometry view, from its SQL (names of the file's `catalog` made the
    lake's), in the order they were made; one that no longer binds is reported, not fatal (the tables are
    already in)."""
    views = con.execute(
        "select schema_name, view_name, sql from duckdb_views() where database_name = ? and not internal "
        "order by view_oid",
        [SOURCE_ALIAS],
    ).fetchall()
    for schema, view, sql in views:
        if view == GEOMETRY_VIEW:
            continue
        try:
            con.execute(f"create schema if not exists {_quoted(schema)}")
            con.execute(f"set schema = '{schema}'")  # an unqualified name in the view means its own schema
            con.execute(in_the_lake(sql, catalog))
            report.views.append(f"{schema}.{view}")
        except duckdb.Error as error:
            report.warnings.append(f"view {schema}.{view} not recreated: {str(error).splitlines()[0]}")
        finally:
            con.execute("set schema = 'main'")


def _check_counts(
    con: duckdb.DuckDBPyConnection, tables: dict[str, list[str]], report: MigrationReport
) -> None:
    for schema, names in tables.items():
        for table in names:
            name = f"{_quoted(schema)}.{_quoted(table)}"
            (copied,) = con.execute(f"select count(*) from {name}").fetchone()
            (original,) = con.execute(f"select count(*) from {SOURCE_ALIAS}.{name}").fetchone()
            if copied != original:
                raise PipelineError(
                    f"{schema}.{table}: {original} rows in the file but {copied} in the lake."
                )
            report.tables[f"{schema}.{table}"] = copied


def _carry_journal(source: Path, journal: Path, report: MigrationReport) -> None:
    """The write-back journal of the DuckDB warehouse (beside it, unless configured) goes with it."""
    old = writeback_journal_path(source)
    if not old.exists() or old.resolve() == journal.resolve():
        return
    if journal.exists():
        report.warnings.append(f"the lake's write-back journal {journal} exists; {old} was left as it is")
        return
    journal.parent.mkdir(parents=True, exist_ok=True)
    copy_sqlite(old, journal)
    report.warnings.append(f"the write-back journal {old} was copied to {journal}")
