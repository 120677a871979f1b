"""Columns an older warehouse typed by guess, rewritten to their declared types (`lake migrate --retype`).

Why: dlt types a column from its first values unless a hint declares it, and never changes the type of a
column once the table has it. A warehouse loaded before a column was declared in the registry
(`pipelines.source.TABLES`, `api_columns.json`) keeps the guessed type: `containers.weight_in_lbs` BIGINT where
`double` is declared now. Its next sync merges the declared type into dlt's schema while the table keeps BIGINT,
so 12.5 is stored as 12 (measured; before the column was declared, dlt put it in a variant column
`weight_in_lbs__v_double`).

What: `plan_retype` compares every raw table's column types, in the warehouse (its `information_schema`: the
dataset and dlt's merge staging beside it, which a load copies rows through) and in dlt's stored schema, with the
declared ones as dlt resolves them: the schema of the source the sync extracts (`DltSource.discover_schema`, the
resources' own hints; `pipelines.cli.commands.declared_schema`, handed in by the caller, since the source's
room sits above this one), mapped to the destination's types by dlt's type mapper. No type is restated here.
`apply_retype` then, under the dataset's sync lock and the warehouse's writer lock:
- rewrites the columns in ONE transaction: in place where the engine allows it (DuckLake's `ALTER COLUMN SET
  DATA TYPE` only widens, BIGINT to DOUBLE; which change it allows is asked of DuckLake itself, on an empty table
  of a throwaway in-memory lake), else the table is rebuilt (created with the declared types, filled with casts,
  the old one dropped, the new one renamed). On a lake the snapshot before stays: time travel to it still
  reads the old types. A plain DuckDB file changes any type in place (it keeps no snapshots);
- replaces dlt's stored schema the dlt way: the pipeline's schema updated (`Schema.update_table`), saved in its
  working folder (`pipeline.schemas.save_schema`) and stored in `<dataset>._dlt_version` (the destination
  client's `update_stored_schema`), so the next load types the columns as the warehouse now does.
A value the cast cannot convert refuses the whole retype before anything changes. The two steps are two commits:
after a failure between them, running the command again finds and does what is left.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import dlt
import duckdb
from dlt.common.schema import Schema

from pipelines.compat import lake_connections_kept
from pipelines.errors import ConfigurationError, InputError, PipelineError
from pipelines.settings import SOURCE_NAME
from pipelines.warehouse import (
    WarehouseStore,
    commit_message,
    current_snapshot,
    loaded_columns,
    loader_session,
)
from pipelines.warehouse.connections import offline_connection
from pipelines.warehouse.destinations import Target, duckdb_target, ducklake_target, make_pipeline

# The dlt column properties that make its type (the rest, keys and nullability, are not retyped).
TYPE_PROPERTIES = ("data_type", "precision", "scale", "timezone")
# The rebuilt table's name until it replaces the old one, in the same transaction.
REBUILT_SUFFIX = "__retyped"


@dataclass(frozen=True)
class ColumnRetype:
    """One column of the warehouse to retype: `schema.table.column` from the type it has (`stored`) to the
    declared one, in place or by rebuilding its table, and how many of its values the cast cannot convert."""

    schema: str
    table: str
    column: str
    stored: str
    declared: str
    in_place: bool
    unfit: int = 0

    @property
    def how(self) -> str:
        """`in place` or `table rewrite`, for the plan."""
        return "in place" if self.in_place else "table rewrite"


@dataclass(frozen=True)
class SchemaRetype:
    """One column of dlt's stored schema to retype: its type properties now and as declared."""

    table: str
    column: str
    stored: str
    declared: str
    hint: tuple[tuple[str, object], ...]  # the declared type properties (`TYPE_PROPERTIES`)


@dataclass(frozen=True)
class RetypePlan:
    """What a retype of `dataset` changes: columns in the warehouse and in dlt's stored schema."""

    dataset: str
    place: str
    warehouse: tuple[ColumnRetype, ...] = ()
    dlt_schema: tuple[SchemaRetype, ...] = ()

    @property
    def empty(self) -> bool:
        """True when every column already has its declared type, in the warehouse and in dlt's schema."""
        return not self.warehouse and not self.dlt_schema

    @property
    def unfit(self) -> tuple[ColumnRetype, ...]:
        """The columns holding values their declared type cannot take."""
        return tuple(change for change in self.warehouse if change.unfit)


@dataclass
class RetypeReport:
    """What `apply_retype` did: the plan, the tables rebuilt, the lake snapshot before it (None on a DuckDB
    file), and how long it took."""

    plan: RetypePlan
    rebuilt: list[str] = field(default_factory=list)
    snapshot_before: int | None = None
    seconds: float = 0.0


def retype_target(store: WarehouseStore, dataset: str) -> Target:
    """The sync's target for `store` and `dataset`: the pipeline a sync would use, so its working folder and
    stored schema are the ones retyped."""
    if store.is_lake:
        return ducklake_target(store, dataset)
    return duckdb_target(store.duckdb_file, dataset)


def widened_in_place(changes: set[tuple[str, str]]) -> set[tuple[str, str]]:
    """Those of the (stored, declared) type changes DuckLake makes with `ALTER COLUMN SET DATA TYPE` (its
    promotions only widen), asked of DuckLake itself: on empty tables of a throwaway in-memory lake."""
    widened = set()
    con = offline_connection()
    try:
        con.execute("attach 'ducklake::memory:' as probe")
        for number, (stored, declared) in enumerate(sorted(changes)):
            con.execute(f"create table probe.t{number} (c {stored})")
            try:
                con.execute(f"alter table probe.t{number} alter column c set data type {declared}")
                widened.add((stored, declared))
            except duckdb.Error:
                pass
    finally:
        con.close()
    return widened


def _quoted(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def _type_hint(column: dict) -> dict:
    return {name: column[name] for name in TYPE_PROPERTIES if name in column}


def _describe(hint: dict) -> str:
    extra = ", ".join(f"{name}={value}" for name, value in hint.items() if name != "data_type")
    return f"{hint.get('data_type')}{f' ({extra})' if extra else ''}"


def plan_retype(
    store: WarehouseStore, dataset: str, declared: Schema, *, pipelines_dir: str | Path | None = None
) -> RetypePlan:
    """Every column of `dataset`'s raw tables (and of their copies in dlt's merge staging) whose type in the
    warehouse or in dlt's stored schema is not the one `declared` (the source's schema,
    `pipelines.cli.commands.declared_schema`) gives it. Reads only: dlt's state and schema are restored from
    the warehouse into the pipeline's working folder, as a sync does first."""
    with lake_connections_kept():
        return _plan(store, dataset, declared, _pipeline(store, dataset, pipelines_dir))


def _pipeline(store: WarehouseStore, dataset: str, pipelines_dir: str | Path | None) -> dlt.Pipeline:
    store.require_exists()
    pipeline = make_pipeline(retype_target(store, dataset), pipelines_dir)
    if pipeline.has_pending_data:
        raise ConfigurationError(
            f"A sync of {dataset} left a load pending in {pipeline.working_dir}: run a sync first (it loads it "
            "under the types it was extracted with), then the retype."
        )
    pipeline.sync_destination()
    return pipeline


def _plan(store: WarehouseStore, dataset: str, declared: Schema, pipeline: dlt.Pipeline) -> RetypePlan:
    mapper = pipeline.destination.capabilities().get_type_mapper()
    stored_schema = pipeline.schemas[SOURCE_NAME] if SOURCE_NAME in pipeline.schema_names else None
    staging = pipeline.destination_client().config.normalize_staging_dataset_name(declared)
    warehouse: list[tuple[str, str, str, str, str, int]] = []
    dlt_schema: list[SchemaRetype] = []
    with loader_session(pipeline, store) as con:
        loaded = {schema: loaded_columns(con, schema) for schema in (dataset, staging)}
        for table in declared.data_tables():
            name = table["name"]
            stored_table = stored_schema.tables.get(name, {}) if stored_schema else {}
            for column_name, column in table["columns"].items():
                if not column.get("data_type"):
                    continue
                target_type = mapper.to_destination_type(column, table)
                for schema in (dataset, staging):
                    stored_type = loaded[schema].get(name, {}).get(column_name)
                    if stored_type is not None and stored_type.upper() != target_type.upper():
                        unfit = _unfit(con, schema, name, column_name, target_type)
                        warehouse.append((schema, name, column_name, stored_type, target_type, unfit))
                stored_column = stored_table.get("columns", {}).get(column_name)
                hint = _type_hint(column)
                if stored_column and stored_column.get("data_type") and _type_hint(stored_column) != hint:
                    dlt_schema.append(SchemaRetype(name, column_name, _describe(_type_hint(stored_column)),
                                                   _describe(hint), tuple(hint.items())))  # fmt: skip
    changes = {(stored, declared) for _, _, _, stored, declared, _ in warehouse}
    in_place = widened_in_place(changes) if store.is_lake and changes else changes  # a DuckDB file alters any
    retypes = tuple(ColumnRetype(schema, table, column, stored, declared, (stored, declared) in in_place, unfit)
                    for schema, table, column, stored, declared, unfit in warehouse)  # fmt: skip
    return RetypePlan(dataset, store.place, retypes, tuple(dlt_schema))


def _unfit(con: duckdb.DuckDBPyConnection, schema: str, table: str, column: str, target_type: str) -> int:
    """Values of the column the cast to `target_type` cannot convert (they would fail the rewrite)."""
    name = _quoted(column)
    return con.execute(
        f"select count(*) from {_quoted(schema)}.{_quoted(table)} "
        f"where {name} is not null and try_cast({name} as {target_type}) is null"
    ).fetchone()[0]


def apply_retype(
    store: WarehouseStore, shown: RetypePlan, declared: Schema, *, pipelines_dir: str | Path | None = None
) -> RetypeReport:
    """Carry out `shown` (the plan the user saw), planned again under the dataset's sync lock and the
    writer lock: refused when it differs (the warehouse changed meanwhile) or when a value does not fit its
    declared type. The warehouse's columns first, in one transaction, then dlt's stored schema."""
    started = time.monotonic()
    report = RetypeReport(shown)
    with store.syncing(shown.dataset), store.writing(), lake_connections_kept():
        pipeline = _pipeline(store, shown.dataset, pipelines_dir)
        plan = _plan(store, shown.dataset, declared, pipeline)
        if plan != shown:
            raise ConfigurationError(
                f"{store.place} changed since the retype was planned: run it again to see the new plan."
            )
        if plan.unfit:
            where = ", ".join(
                f"{c.schema}.{c.table}.{c.column} ({c.unfit} not {c.declared})" for c in plan.unfit
            )
            raise InputError(f"Nothing retyped: values that cannot be cast to their declared type in {where}; "
                             "fix or clear them, then run again.")  # fmt: skip
        if plan.warehouse:
            with loader_session(pipeline, store) as con:
                report.snapshot_before = current_snapshot(con) if store.is_lake else None
                report.rebuilt = _rewrite(con, plan.warehouse, lake=store.is_lake)
        if plan.dlt_schema:
            _store_schema(pipeline, plan.dlt_schema)
    report.seconds = time.monotonic() - started
    return report


@contextmanager
def _transaction(con: duckdb.DuckDBPyConnection, message: str | None) -> Iterator[None]:
    con.execute("begin")
    try:
        if message is not None:  # DuckLake keeps it with the snapshot; it holds only inside a transaction
            commit_message(con, message)
        yield
        con.execute("commit")
    except BaseException:
        con.execute("rollback")
        raise


def _rewrite(con: duckdb.DuckDBPyConnection, changes: tuple[ColumnRetype, ...], *, lake: bool) -> list[str]:
    """Retype the columns in one transaction: each table whose changes all alter in place is altered, any
    other is rebuilt once with all of its changes. The tables rebuilt."""
    by_table: dict[tuple[str, str], list[ColumnRetype]] = {}
    for change in changes:
        by_table.setdefault((change.schema, change.table), []).append(change)
    message = "lake migrate --retype: " + ", ".join(
        f"{c.schema}.{c.table}.{c.column} {c.stored} -> {c.declared}" for c in changes)  # fmt: skip
    rebuilt = []
    with _transaction(con, message if lake else None):
        for (schema, table), columns in by_table.items():
            target = f"{_quoted(schema)}.{_quoted(table)}"
            if all(change.in_place for change in columns):
                for change in columns:
                    con.execute(
                        f"alter table {target} alter column {_quoted(change.column)} set data type {change.declared}"
                    )
            else:
                _rebuild(con, schema, table, {change.column: change.declared for change in columns})
                rebuilt.append(f"{schema}.{table}")
    return rebuilt


def _rebuild(con: duckdb.DuckDBPyConnection, schema: str, table: str, declared: dict[str, str]) -> None:
    """Rebuild `schema.table` with the `declared` types (columns, order and NOT NULL kept), its rows cast, and
    put it in the old one's place; its row count checked."""
    columns = con.execute(
        "select column_name, data_type, is_nullable from information_schema.columns where table_catalog = "
        "current_database() and table_schema = ? and table_name = ? order by ordinal_position",
        [schema, table],
    ).fetchall()
    definitions, selects = [], []
    for name, data_type, nullable in columns:
        kind = declared.get(name, data_type)
        definitions.append(f"{_quoted(name)} {kind}{'' if nullable == 'YES' else ' not null'}")
        selects.append(f"cast({_quoted(name)} as {kind})" if name in declared else _quoted(name))
    old, new = f"{_quoted(schema)}.{_quoted(table)}", f"{_quoted(schema)}.{_quoted(table + REBUILT_SUFFIX)}"
    con.execute(f"create table {new} ({', '.join(definitions)})")
    con.execute(f"insert into {new} select {', '.join(selects)} from {old}")
    (before,), (after,) = (con.execute(f"select count(*) from {name}").fetchone() for name in (old, new))
    if before != after:
        raise PipelineError(
            f"{schema}.{table}: {before} rows before the retype but {after} after; nothing changed."
        )
    con.execute(f"drop table {old}")
    con.execute(f"alter table {new} rename to {_quoted(table)}")


def _store_schema(pipeline: dlt.Pipeline, changes: tuple[SchemaRetype, ...]) -> None:
    """Replace dlt's stored schema with one whose columns have their declared types: merged into the
    pipeline's schema as a resource's hints are (`Schema.update_table`), saved in its working folder
    (`pipeline.schemas.save_schema`) and stored in the dataset's `_dlt_version` by the destination client, as a
    load stores it (`update_stored_schema`). Limited to dlt's version table, which exists: unlimited (as
    `pipeline.sync_schema` runs it) it would also create every table the schema names and the warehouse does
    not hold yet, such as a nested table no row has had.

    dlt stores a schema only when its hash is not stored yet, and restores the newest stored: a schema that
    returns to an earlier content (the declared types a later guess replaced) would stay behind the guess.
    Then the stored versions are replaced as `dlt pipeline drop` replaces them (`drop_tables(delete_schema=
    True)` with no table: every version of the schema deleted, the new one stored); on a lake the snapshot
    before keeps them."""
    schema = pipeline.schemas[SOURCE_NAME]
    for change in changes:
        stored = schema.tables[change.table]
        partial = {
            "name": change.table,
            "columns": {change.column: {"name": change.column, **dict(change.hint)}},
        }
        if "parent" in stored:  # a nested table's partial names its parent, or dlt sees a conflict
            partial["parent"] = stored["parent"]
        schema.update_table(partial, normalize_identifiers=False)
    pipeline.schemas.save_schema(schema)
    with pipeline.destination_client(SOURCE_NAME) as client:
        if client.get_stored_schema_by_hash(schema.stored_version_hash) is not None:
            client.drop_tables(delete_schema=True)
        client.update_stored_schema(only_tables=[schema.version_table_name])
