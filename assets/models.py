"""Analytics models: one Dagster asset per SQL file under `sql/` (`analytics/<file stem>`, group `analytics`).

Each file is one model, `create or replace table analytics.<stem> as <select>`, and reads raw tables as
`ocean_tracking.<table>` and other models as `analytics.<model>`. The factory here parses every file
with sqlglot for those references, so the lineage graph comes from the SQL itself:
- `ocean_tracking.<table>` -> the ingest asset `ocean_tracking/<table>`; a dlt child table
  (`containers__holds_at_pod_terminal`) is loaded by its root resource, so it maps to `ocean_tracking/containers`;
- `analytics.<model>` -> `analytics/<model>`.

A model runs in the `ocean_tracking` pool (DuckDB has one writer) through the `warehouse` resource, with
the DuckDB variable `app_url` set from the `ocean_tracking_api` resource (deep links need it). The asset's
description is the file's header comment.

A raw table dlt has not created yet (a child table before the first hold or fee, `map_features` on an
account without routing data) is stood in for by an empty view inside the model's transaction, dropped
again before commit: the staging models' `contract` CTEs supply the typed columns, so the model builds
empty instead of failing, and dlt never sees the stand-in.
"""

import hashlib
import logging
import re
from collections.abc import Callable, Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import dagster as dg
import duckdb
import sqlglot
from sqlglot import exp

from assets.resources import ANALYTICS_SCHEMA, OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.pipeline import DATASET_NAME, table_exists

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parents[1] / "sql"
RAW_SCHEMA = DATASET_NAME
ANALYTICS_GROUP = "analytics"
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 60
_KEY_LINE = re.compile(r"^key:\s*(?P<columns>.+)$", re.IGNORECASE)

# Marts that must have rows whenever the model driving their grain has rows. (containers_at_sea is
# legitimately empty when nothing is at sea; staging models are checked against their raw table.)
DRIVING_MODEL = {
    "container_status": "stg_containers",
    "shipment_eta_history": "stg_shipment_eta_versions",
    "port_calls": "stg_map_features",
    "voyage_legs": "port_calls",
    "deep_links": "stg_shipments",
}


@dataclass(frozen=True)
class SqlModel:
    """One SQL file: its name (file stem), text, header comment and the relations it reads."""

    path: Path
    name: str
    sql: str
    description: str
    sources: frozenset[tuple[str, str]]  # (schema, table) read by the model, itself excluded

    @property
    def key(self) -> dg.AssetKey:
        return dg.AssetKey([ANALYTICS_SCHEMA, self.name])

    @property
    def layer(self) -> str:
        """`staging` or `marts`: the folder under sql/."""
        return self.path.parent.name

    @property
    def deps(self) -> set[dg.AssetKey]:
        return {source_key(schema, table) for schema, table in self.sources}

    @property
    def raw_sources(self) -> list[str]:
        return sorted(table for schema, table in self.sources if schema == RAW_SCHEMA)

    @property
    def unique_key(self) -> list[str]:
        """Columns named by the header's `Key:` line (the grain), e.g. `Key: container_id, leg_sequence`."""
        for line in self.description.splitlines():
            match = _KEY_LINE.match(line.strip())
            if match:
                return [column.strip() for column in match["columns"].split(",") if column.strip()]
        return []

    @property
    def code_version(self) -> str:
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


def source_key(schema: str, table: str) -> dg.AssetKey:
    """The asset key of a relation a model reads (a dlt child table maps to its root resource)."""
    if schema == RAW_SCHEMA:
        return dg.AssetKey([RAW_SCHEMA, table.split("__")[0]])
    return dg.AssetKey([ANALYTICS_SCHEMA, table])


def header_comment(sql: str) -> str:
    """The leading `--` comment block of a SQL file, without the dashes."""
    lines = []
    for line in sql.splitlines():
        stripped = line.strip()
        if not stripped.startswith("--"):
            break
        lines.append(stripped[2:].strip())
    return "\n".join(lines).strip()


def parse_model(path: Path) -> SqlModel:
    """Read one model file and check it materializes `analytics.<file stem>`."""
    sql = path.read_text()
    tree = sqlglot.parse_one(sql, read="duckdb")
    target = tree.this if isinstance(tree, exp.Create) else None
    if not isinstance(target, exp.Table) or (target.db, target.name) != (ANALYTICS_SCHEMA, path.stem):
        raise ValueError(
            f"{path}: a model file must be `create or replace table {ANALYTICS_SCHEMA}.{path.stem} as ...`"
        )
    sources = frozenset(
        (table.db, table.name)
        for table in tree.find_all(exp.Table)
        if table.db in (RAW_SCHEMA, ANALYTICS_SCHEMA)
        and (table.db, table.name) != (ANALYTICS_SCHEMA, path.stem)
    )
    description = header_comment(sql)
    if not description:
        raise ValueError(f"{path}: a model file starts with a `--` comment saying what it is and its grain")
    return SqlModel(path=path, name=path.stem, sql=sql, description=description, sources=sources)


def load_models(sql_dir: Path = SQL_DIR) -> list[SqlModel]:
    """Every `sql/**/*.sql` model, by name; two files with one stem would be one table, so that fails."""
    models = [parse_model(path) for path in sorted(sql_dir.rglob("*.sql"))]
    names = [model.name for model in models]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"model names must be unique across sql/: {duplicates}")
    known = set(names)
    for model in models:
        unknown = {table for schema, table in model.sources if schema == ANALYTICS_SCHEMA} - known
        if unknown:
            raise ValueError(f"{model.path}: reads {sorted(unknown)}, which no file under sql/ builds")
    return models


# ---- running a model ---------------------------------------------------------------------------------


def run_model(con: duckdb.DuckDBPyConnection, model: SqlModel, *, app_url: str) -> dict[str, Any]:
    """Build one model in a single transaction; returns its row count and the raw tables stood in for."""
    if not con.execute(
        "select count(*) from information_schema.schemata where schema_name = ?", [RAW_SCHEMA]
    ).fetchone()[0]:
        raise RuntimeError(
            f"schema {RAW_SCHEMA} does not exist in the warehouse: run the ingest assets first"
        )
    con.execute(f"create schema if not exists {ANALYTICS_SCHEMA}")
    con.execute("set variable app_url = ?", [app_url])
    missing = [table for table in model.raw_sources if not table_exists(con, RAW_SCHEMA, table)]
    con.begin()
    try:
        for table in missing:
            logger.warning("%s: %s.%s does not exist yet; read as empty", model.name, RAW_SCHEMA, table)
            con.execute(
                f'create view {RAW_SCHEMA}."{table}" as select null::integer as _missing_source where false'
            )
        con.execute(model.sql)
        for table in missing:
            con.execute(f'drop view {RAW_SCHEMA}."{table}"')
        con.commit()
    except Exception:
        con.rollback()
        raise
    rows = con.execute(f"select count(*) from {ANALYTICS_SCHEMA}.{model.name}").fetchone()[0]
    return {"rows": rows, "missing_sources": missing}


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    if len(text) > PREVIEW_CELL_CHARS:
        text = text[: PREVIEW_CELL_CHARS - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def preview_markdown(con: duckdb.DuckDBPyConnection, table: str, limit: int = PREVIEW_ROWS) -> str:
    """The first rows of a table as a markdown table (geometries as WKT, long cells cut)."""
    columns = con.execute(f"describe {table}").fetchall()
    selects = [
        f'st_astext("{name}")' if str(type_).upper().startswith("GEOMETRY") else f'"{name}"'
        for name, type_, *_ in columns
    ]
    rows = con.execute(f"select {', '.join(selects)} from {table} limit {int(limit)}").fetchall()
    names = [name for name, *_ in columns]
    lines = ["| " + " | ".join(_cell(name) for name in names) + " |", "|" + "---|" * len(names)]
    lines += ["| " + " | ".join(_cell(value) for value in row) + " |" for row in rows]
    return "\n".join(lines)


def _column_schema(con: duckdb.DuckDBPyConnection, table: str) -> dg.TableSchema:
    return dg.TableSchema(
        columns=[
            dg.TableColumn(name, str(type_))
            for name, type_, *_ in con.execute(f"describe {table}").fetchall()
        ]
    )


# ---- assets ------------------------------------------------------------------------------------------


def build_model_asset(model: SqlModel) -> dg.AssetsDefinition:
    """The asset `analytics/<model>`: runs the SQL file, reports row count, columns and a preview."""

    @dg.asset(
        key=model.key,
        deps=sorted(model.deps, key=lambda key: key.to_user_string()),
        description=model.description,
        group_name=ANALYTICS_GROUP,
        pool=OCEAN_TRACKING_POOL,
        kinds={"duckdb", "sql"},
        code_version=model.code_version,
        metadata={"sql_file": str(model.path.relative_to(SQL_DIR.parent)), "layer": model.layer},
    )
    def _model(
        context: dg.AssetExecutionContext, warehouse: Warehouse, ocean_tracking_api: OceanTrackingApi
    ) -> dg.MaterializeResult:
        table = f"{ANALYTICS_SCHEMA}.{model.name}"
        with warehouse.connect() as con:
            outcome = run_model(con, model, app_url=ocean_tracking_api.app_url)
            preview = preview_markdown(con, table)
            schema = _column_schema(con, table)
        context.log.info("%s: %d rows", table, outcome["rows"])
        metadata: dict[str, Any] = {
            "dagster/row_count": dg.MetadataValue.int(outcome["rows"]),
            "dagster/column_schema": schema,
            "preview": dg.MetadataValue.md(preview),
        }
        if outcome["missing_sources"]:
            metadata["missing_sources"] = dg.MetadataValue.json(outcome["missing_sources"])
        return dg.MaterializeResult(metadata=metadata)

    return _model


# ---- checks ------------------------------------------------------------------------------------------
# One check step per model (a multi-check): each step opens one plain read-only connection (counts need
# no spatial extension) and runs the model's checks; the blocking ones stop downstream models.


@contextmanager
def _read(warehouse: Warehouse) -> Iterator[duckdb.DuckDBPyConnection]:
    con = duckdb.connect(str(warehouse.path), read_only=True)
    try:
        yield con
    finally:
        con.close()


def _count(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> int:
    if not table_exists(con, schema, table):
        return 0
    return con.execute(f'select count(*) from {schema}."{table}"').fetchone()[0]


@dataclass(frozen=True)
class _Check:
    spec: dg.AssetCheckSpec
    evaluate: Callable[[duckdb.DuckDBPyConnection], tuple[bool, dict[str, Any]]]


def _grain_check(model: SqlModel) -> _Check:
    key_sql = ", ".join(model.unique_key)
    null_sql = " or ".join(f"{column} is null" for column in model.unique_key)
    table = f"{ANALYTICS_SCHEMA}.{model.name}"

    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
        duplicates = con.execute(
            f"select count(*) from (select {key_sql} from {table} group by all having count(*) > 1)"
        ).fetchone()[0]
        nulls = con.execute(f"select count(*) from {table} where {null_sql}").fetchone()[0]
        return duplicates == 0 and nulls == 0, {"duplicate_keys": duplicates, "rows_with_null_key": nulls}

    spec = dg.AssetCheckSpec(
        "unique_key",
        asset=model.key,
        description=f"One row per ({key_sql}), none of them null: the grain the model's header states.",
        blocking=True,
    )
    return _Check(spec, evaluate)


def _staging_rows_check(model: SqlModel) -> _Check:
    (source,) = model.raw_sources

    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
        rows, source_rows = _count(con, ANALYTICS_SCHEMA, model.name), _count(con, RAW_SCHEMA, source)
        return rows == source_rows, {"rows": rows, "source_rows": source_rows}

    spec = dg.AssetCheckSpec(
        "rows_match_source",
        asset=model.key,
        description=f"A staging model is a projection: as many rows as {RAW_SCHEMA}.{source}.",
        blocking=True,
    )
    return _Check(spec, evaluate)


def _not_empty_check(model: SqlModel, driver: str) -> _Check:
    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
        rows, driver_rows = _count(con, ANALYTICS_SCHEMA, model.name), _count(con, ANALYTICS_SCHEMA, driver)
        return rows > 0 or driver_rows == 0, {"rows": rows, f"{driver}_rows": driver_rows}

    spec = dg.AssetCheckSpec(
        "not_empty_when_source_is",
        asset=model.key,
        description=f"Has rows whenever {ANALYTICS_SCHEMA}.{driver} has rows.",
    )
    return _Check(spec, evaluate)


def _one_row_per_container_check(model: SqlModel) -> _Check:
    def evaluate(con: duckdb.DuckDBPyConnection) -> tuple[bool, dict[str, Any]]:
        rows, distinct, unmatched = con.execute(
            f"""
            select
                count(*),
                count(distinct status.container_id),
                count(*) filter (where raw.id is null)
            from {ANALYTICS_SCHEMA}.container_status as status
            left join {RAW_SCHEMA}.containers as raw on raw.id = status.container_id
            """
        ).fetchone()
        containers = _count(con, RAW_SCHEMA, "containers")
        passed = rows == distinct == containers and unmatched == 0
        return passed, {
            "rows": rows,
            "distinct_containers": distinct,
            "raw_containers": containers,
            "rows_not_in_raw": unmatched,
        }

    spec = dg.AssetCheckSpec(
        "one_row_per_container",
        asset=model.key,
        description=f"Exactly one row for every container in {RAW_SCHEMA}.containers, and no others.",
        blocking=True,
    )
    return _Check(spec, evaluate)


def _checks_of(model: SqlModel, names: set[str]) -> list[_Check]:
    checks = []
    if model.unique_key:
        checks.append(_grain_check(model))
    if model.layer == "staging" and len(model.raw_sources) == 1:
        checks.append(_staging_rows_check(model))
    driver = DRIVING_MODEL.get(model.name)
    if driver in names:
        checks.append(_not_empty_check(model, driver))
    if model.name == "container_status":
        checks.append(_one_row_per_container_check(model))
    return checks


def _multi_check(model: SqlModel, checks: list[_Check]) -> dg.AssetChecksDefinition:
    @dg.multi_asset_check(
        name=f"{ANALYTICS_SCHEMA}__{model.name}__checks",
        specs=[check.spec for check in checks],
        pool=OCEAN_TRACKING_POOL,
    )
    def _run(warehouse: Warehouse) -> Iterator[dg.AssetCheckResult]:
        with _read(warehouse) as con:
            for check in checks:
                passed, metadata = check.evaluate(con)
                yield dg.AssetCheckResult(
                    asset_key=check.spec.asset_key,
                    check_name=check.spec.name,
                    passed=passed,
                    metadata=metadata,
                )

    return _run


def build_model_checks(models: Iterable[SqlModel]) -> list[dg.AssetChecksDefinition]:
    """The checks that say something about each model: its grain, and that it is not silently empty."""
    models = list(models)
    names = {model.name for model in models}
    return [_multi_check(model, checks) for model in models if (checks := _checks_of(model, names))]


def build_model_assets(models: Sequence[SqlModel]) -> list[dg.AssetsDefinition]:
    return [build_model_asset(model) for model in models]


MODELS = load_models()
model_assets: list[dg.AssetsDefinition] = build_model_assets(MODELS)
model_checks: list[dg.AssetChecksDefinition] = build_model_checks(MODELS)
