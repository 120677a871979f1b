"""Analytics models as Dagster assets: one asset `analytics/<file stem>` per SQL file under `sql/`
(group `analytics`), built by the same runner the CLI sync uses (`pipelines.warehouse.models`).

Lineage comes from the SQL itself (parsed with sqlglot by the runner):
- `ocean_tracking.<table>` -> the ingest asset `ocean_tracking/<table>`; a dlt child table
  (`containers__holds_at_pod_terminal`) is loaded by its root resource, so it maps to `ocean_tracking/containers`;
- `analytics.<model>` -> `analytics/<model>`.

A model runs in the `ocean_tracking` pool (DuckDB has one writer) through the `warehouse` resource, with
the DuckDB variable `app_url` set from the `ocean_tracking_api` resource (deep links need it). The asset's
description is the file's header comment. Each model also gets the checks that say something about it.
"""

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import dagster as dg
import duckdb

from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.settings import ANALYTICS_SCHEMA
from pipelines.warehouse.models import (
    RAW_SCHEMA,
    SQL_DIR,
    SqlModel,
    preview_markdown,
    project_models,
    run_model,
)
from pipelines.warehouse.tables import table_exists

ANALYTICS_GROUP = "analytics"

# Marts that must have rows whenever the model driving their grain has rows. (containers_at_sea is
# legitimately empty when nothing is at sea; staging models are checked against their raw table.)
DRIVING_MODEL = {
    "container_status": "stg_containers",
    "shipment_eta_history": "stg_shipment_eta_versions",
    "port_calls": "stg_map_features",
    "voyage_legs": "port_calls",
    "deep_links": "stg_shipments",
}


def model_key(model: SqlModel) -> dg.AssetKey:
    """The asset key of a model: `analytics/<name>`."""
    return dg.AssetKey([ANALYTICS_SCHEMA, model.name])


def source_key(schema: str, table: str) -> dg.AssetKey:
    """The asset key of a relation a model reads (a dlt child table maps to its root resource)."""
    if schema == RAW_SCHEMA:
        return dg.AssetKey([RAW_SCHEMA, table.split("__")[0]])
    return dg.AssetKey([ANALYTICS_SCHEMA, table])


def model_deps(model: SqlModel) -> set[dg.AssetKey]:
    """The assets a model reads: ingest tables and other models."""
    return {source_key(schema, table) for schema, table in model.sources}


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
        key=model_key(model),
        deps=sorted(model_deps(model), key=lambda key: key.to_user_string()),
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
        with warehouse.writing(), warehouse.connect() as con:
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
# One check step per model (a multi-check): each step opens one read-only session and runs the model's
# checks; the blocking ones stop downstream models.


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
        asset=model_key(model),
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
        asset=model_key(model),
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
        asset=model_key(model),
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
        asset=model_key(model),
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
        with warehouse.connect(read_only=True) as con:
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
    """One asset per model."""
    return [build_model_asset(model) for model in models]


MODELS = project_models()
model_assets: list[dg.AssetsDefinition] = build_model_assets(MODELS)
model_checks: list[dg.AssetChecksDefinition] = build_model_checks(MODELS)
