"""Asset checks on the ingest tables, read through `Warehouse.connect(read_only=True)`.

- keys and references are dbt tests on the sources, generated from the registry (`pipelines.source`)
  and mapped to checks on these assets by dagster-dbt (`assets.models`), not SQL of ours;
- geometries: `st_isvalid` on `map_features_geo` (null geometries counted apart, not failures);
- sync issues: a warning when an item skipped by the syncs (`sync_issues`) has failed for over a day;
- schema drift: a warning, per table the API feeds, when the warehouse holds a column the API's spec does
  not document (a new attribute) or a dlt variant column (values that did not fit the declared type);
- freshness, two ways: `warehouse_loaded_recently` reads dlt's own `_dlt_loads` (it sees loads made
  outside Dagster too, e.g. `python -m pipelines sync`), and every ingest asset carries a Dagster
  `FreshnessPolicy.time_window` (set by the translator in `assets.ingest`) that Dagster evaluates
  from its own materialization records, with no sensor and no warehouse read. Dagster 1.13 marks the
  sensor-driven `build_last_update_freshness_checks` as superseded by these policies.

All checks sit in the `ocean_tracking` pool: DuckDB refuses a reader in another process while a
writer holds the file, so a check never overlaps an ingest op of another run.

With several accounts (`assets.accounts`) every check is partitioned by account like the tables it checks
(Dagster 1.13's `AssetCheckSpec(partitions_def=...)`, a preview feature): it reads its partition's dataset, and
its result is recorded for that partition.
"""

import os
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from functools import partial

import dagster as dg
import duckdb

from assets.accounts import account_of, account_partitions
from assets.ingest import DEFAULT_FRESHNESS_HOURS, asset_key
from assets.resources import OCEAN_TRACKING_POOL, Warehouse
from pipelines.settings import FRESHNESS_HOURS_ENV
from pipelines.source import TABLES, schema_drift
from pipelines.warehouse import loaded_columns, table_exists


def _missing(table: str) -> dg.AssetCheckResult:
    return dg.AssetCheckResult(
        passed=False,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{table} is not in the warehouse yet (never loaded, or no rows ever).",
    )


def check_geometries(con: duckdb.DuckDBPyConnection, schema: str) -> dg.AssetCheckResult:
    """Invalid route geometries break GeoParquet exports and spatial joins; nulls are legitimate
    (features without a position), so they are reported, not failed."""
    if not table_exists(con, schema, "map_features_geo"):
        return _missing("map_features_geo")
    rows, nulls, invalid, invalid_split = con.execute(
        f"""select count(*),
                   count(*) filter (where geometry is null),
                   count(*) filter (where geometry is not null and not st_isvalid(geometry)),
                   count(*) filter (where geometry_split is not null and not st_isvalid(geometry_split))
            from {schema}.map_features_geo"""
    ).fetchone()
    return dg.AssetCheckResult(
        passed=invalid == 0 and invalid_split == 0,
        metadata={
            "rows": int(rows),
            "null_geometries": int(nulls),
            "invalid_geometries": int(invalid),
            "invalid_split_geometries": int(invalid_split),
        },
    )


def freshness_hours() -> float:
    """How old the last load may be: $OCEAN_TRACKING_FRESHNESS_HOURS, else 26 h (daily sync + slack)."""
    return float(os.environ.get(FRESHNESS_HOURS_ENV) or DEFAULT_FRESHNESS_HOURS)


def check_loaded_recently(con: duckdb.DuckDBPyConnection, schema: str) -> dg.AssetCheckResult:
    """Freshness of the warehouse itself, whoever loaded it (Dagster run or CLI sync)."""
    limit = timedelta(hours=freshness_hours())
    if not table_exists(con, schema, "_dlt_loads"):
        return _missing("_dlt_loads")
    last = con.execute(f"select max(inserted_at) from {schema}._dlt_loads where status = 0").fetchone()[0]
    if last is None:
        return dg.AssetCheckResult(passed=False, description="no successful load recorded")
    age = datetime.now(UTC) - last.astimezone(UTC)
    return dg.AssetCheckResult(
        passed=age <= limit,
        metadata={
            "last_load_at": last.astimezone(UTC).isoformat(),
            "age_hours": round(age.total_seconds() / 3600, 3),
            "limit_hours": limit.total_seconds() / 3600,
        },
    )


ITEM_FAILING_WARN_AFTER = timedelta(days=1)


def check_item_issues(con: duckdb.DuckDBPyConnection, schema: str) -> dg.AssetCheckResult:
    """Warn when an item the syncs skip has failed for more than a day: a failure that long is no passing
    fault of the service but something to report to it (or a container gone wrong)."""
    if not table_exists(con, schema, "sync_issues"):
        return dg.AssetCheckResult(passed=True, metadata={"failing_items": 0}, description="no item ever failed")
    rows = con.execute(
        f"""select resource, item_id, http_status, message, first_seen_at, attempts
            from {schema}.sync_issues where not coalesce(resolved, false) order by first_seen_at, resource, item_id"""
    ).fetchall()
    now = datetime.now(UTC)
    stale = [row for row in rows if now - row[4].astimezone(UTC) > ITEM_FAILING_WARN_AFTER]
    sample = [
        {"resource": r, "item_id": i, "http_status": status, "message": m, "first_seen_at": f.isoformat(), "attempts": a}
        for r, i, status, m, f, a in stale[:10]
    ]
    return dg.AssetCheckResult(
        passed=not stale,
        severity=dg.AssetCheckSeverity.WARN,
        description=f"{len(stale)} item(s) failing for over a day" if stale else None,
        metadata={
            "failing_items": len(rows),
            "failing_over_a_day": len(stale),
            "oldest_first_seen_at": rows[0][4].astimezone(UTC).isoformat() if rows else "",
            "failing_over_a_day_sample": dg.MetadataValue.json(sample),
        },
    )


def check_schema_drift(con: duckdb.DuckDBPyConnection, schema: str, table: str) -> dg.AssetCheckResult:
    """Warn when `table` (or one of its nested tables) holds a column nobody declared, usually a new
    attribute of the API, or a variant column; columns an older warehouse typed otherwise are listed
    (dlt never changes a column's type) but pass."""
    if not table_exists(con, schema, table):
        return _missing(table)
    ours = {name: columns for name, columns in loaded_columns(con, schema).items()
            if name == table or name.startswith(f"{table}__")}  # fmt: skip
    drift = schema_drift(ours)
    problems = [f"{len(drift.new_columns)} undeclared column(s)"] if drift.new_columns else []
    problems += [f"{len(drift.variant_columns)} variant column(s)"] if drift.variant_columns else []
    return dg.AssetCheckResult(
        passed=not drift.drifted,
        severity=dg.AssetCheckSeverity.WARN,
        description="; ".join(problems) or None,
        metadata={
            "new_columns": dg.MetadataValue.json([f"{t}.{c} ({kind})" for t, c, kind in drift.new_columns]),
            "variant_columns": dg.MetadataValue.json([f"{t}.{c}" for t, c in drift.variant_columns]),
            "retyped_columns": dg.MetadataValue.json(
                [f"{t}.{c}: declared {declared}, loaded {loaded}" for t, c, declared, loaded in drift.retyped]
            ),
        },
    )


Evaluator = Callable[[duckdb.DuckDBPyConnection, str], dg.AssetCheckResult]


def _catalog() -> dict[dg.AssetCheckKey, tuple[dg.AssetCheckSpec, Evaluator]]:
    """Every ingest check: its spec and how to evaluate it on a connection."""
    entries: list[tuple[dg.AssetCheckSpec, Evaluator]] = []
    table_checks: tuple[tuple[str, str, str, Evaluator], ...] = (
        ("geometries_valid", "map_features",
         "st_isvalid on every non-null geometry of map_features_geo; nulls counted apart", check_geometries),
        ("warehouse_loaded_recently", "shipments",
         "the last successful dlt load (_dlt_loads, status 0) is recent", check_loaded_recently),
        ("no_item_failing_over_a_day", "sync_issues",
         "no item skipped by the syncs (sync_issues) has failed for more than a day (warns)", check_item_issues),
    )  # fmt: skip
    for name, table, description, evaluate in table_checks:
        entries.append((dg.AssetCheckSpec(name, asset=asset_key(table), description=description,
                                          partitions_def=account_partitions), evaluate))
    for table in (name for name, entry in TABLES.items() if entry.declared):
        entries.append((
            dg.AssetCheckSpec(
                "columns_as_declared",
                asset=asset_key(table),
                description=f"{table} and its nested tables hold only the columns the API documents, "
                "and no variant column (warns)",
                partitions_def=account_partitions,
            ),
            partial(check_schema_drift, table=table),
        ))
    return {spec.key: (spec, evaluate) for spec, evaluate in entries}


CATALOG = _catalog()


# One step evaluates every selected check on one read-only connection: a step per check cost ~1 s of
# process overhead and spatial-extension loading each (measured: 19 checks added ~25 s to a run).
@dg.multi_asset_check(
    specs=[spec for spec, _ in CATALOG.values()],
    name="ocean_tracking_ingest_checks",
    can_subset=True,
    pool=OCEAN_TRACKING_POOL,
)
def ocean_tracking_ingest_checks(
    context: dg.AssetCheckExecutionContext, warehouse: Warehouse
) -> Iterator[dg.AssetCheckResult]:
    """Evaluate the selected ingest checks (geometries, freshness, sync issues, schema drift) on the
    dataset of the partition's account."""
    warehouse = warehouse.for_account(account_of(context))
    with warehouse.connect(read_only=True) as con:
        for key in sorted(context.selected_asset_check_keys, key=lambda k: k.to_user_string()):
            _, evaluate = CATALOG[key]
            result = evaluate(con, warehouse.dataset_name)
            yield dg.AssetCheckResult(
                asset_key=key.asset_key,
                check_name=key.name,
                passed=result.passed,
                severity=result.severity,
                description=result.description,
                metadata=result.metadata,
            )


ingest_checks: list[dg.AssetChecksDefinition] = [ocean_tracking_ingest_checks]
