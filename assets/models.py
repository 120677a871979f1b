"""Analytics models as Dagster assets: the dbt project under `sql/` through dagster-dbt (`@dbt_assets`).

One asset `analytics/<model>` per dbt model (group `analytics`), built by `dbt build` with the same
target and vars as the CLI sync (`pipelines.warehouse.models`): one runner. The lineage, descriptions and
checks come from dbt's manifest, `sql/target/manifest.json`, made at setup time (`scripts/bootstrap.sh`
runs `dbt parse`), never while the definitions import:
- a source `ocean_tracking.<table>` -> the ingest asset `ocean_tracking/<table>`; a dlt child table
  (`containers__holds_at_pod_terminal`) is loaded by its root resource, so it maps to `ocean_tracking/containers`;
- a model `<model>` -> `analytics/<model>`; its description is the model's in the schema yml;
- every dbt test on a model -> an asset check on it (the grain, accepted values, relationships, row counts).

The build runs in the `ocean_tracking` pool (one writer) under the warehouse's writer lock, with `app_url`
from the `ocean_tracking_api` resource (deep links need it). Each materialization reports its row count,
columns and a preview, read after the build.
"""

import json
import sys
import tempfile
from collections.abc import Iterator, Mapping
from pathlib import Path
from typing import Any

import dagster as dg
from dagster_dbt import DagsterDbtTranslator, DagsterDbtTranslatorSettings, DbtCliResource, dbt_assets

from assets.resources import OCEAN_TRACKING_POOL, OceanTrackingApi, Warehouse
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.models import (
    INDIRECT_SELECTION,
    MANIFEST_PATH,
    PARSE_COMMAND,
    SQL_DIR,
    dbt_target,
    dbt_vars,
    preview_markdown,
)

ANALYTICS_GROUP = "analytics"
# dbt as installed beside this interpreter (a venv not on PATH, e.g. a Dagster run launched by path)
DBT_EXECUTABLE = str(Path(sys.executable).with_name("dbt"))


class ManifestMissingError(RuntimeError):
    """The dbt manifest the definitions are built from has not been made yet."""


def source_key(table: str) -> dg.AssetKey:
    """The ingest asset that loads a raw table: a dlt child table (`containers__x`) maps to its root resource."""
    return dg.AssetKey([DATASET_NAME, table.split("__")[0]])


def model_key(name: str) -> dg.AssetKey:
    """The asset key of a model: `analytics/<name>`."""
    return dg.AssetKey([ANALYTICS_SCHEMA, name])


class OceanTrackingTranslator(DagsterDbtTranslator):
    """Sources -> the ingest assets, models -> `analytics/<model>` in the group `analytics`."""

    def get_asset_key(self, dbt_resource_props: Mapping[str, Any]) -> dg.AssetKey:
        """`ocean_tracking/<root table>` for a source, `analytics/<model>` for a model."""
        if dbt_resource_props["resource_type"] == "source":
            return source_key(dbt_resource_props["name"])
        return model_key(dbt_resource_props["name"])

    def get_description(self, dbt_resource_props: Mapping[str, Any]) -> str:
        """The model's description in the schema yml (what it is, its grain, its `Key:`), without the SQL."""
        return dbt_resource_props.get("description") or f"dbt model {dbt_resource_props['name']}"

    def get_group_name(self, dbt_resource_props: Mapping[str, Any]) -> str | None:
        """Every model is in the group `analytics`."""
        return ANALYTICS_GROUP


def load_manifest() -> dict[str, Any]:
    """The manifest `dbt parse` wrote; a missing one fails the definitions with the one command to run."""
    if not MANIFEST_PATH.exists():
        raise ManifestMissingError(
            f"{MANIFEST_PATH} is missing: run `{PARSE_COMMAND}` (scripts/bootstrap.sh does) and load again."
        )
    return json.loads(MANIFEST_PATH.read_text())


MANIFEST = load_manifest()
TRANSLATOR = OceanTrackingTranslator(
    settings=DagsterDbtTranslatorSettings(enable_asset_checks=True, enable_duplicate_source_asset_keys=True)
)


def _with_table_metadata(
    context: dg.AssetExecutionContext, events: list[Any], warehouse: Warehouse
) -> Iterator[Any]:
    """The build's events, each model's output with its row count, columns and a preview (read after the
    build: a DuckDB file admits no reader while dbt writes it)."""

    def key_of(event: Any) -> dg.AssetKey | None:
        if isinstance(event, dg.Output):
            return context.assets_def.keys_by_output_name.get(event.output_name)
        return event.asset_key if isinstance(event, dg.AssetMaterialization) else None

    keys = {key for event in events if (key := key_of(event)) is not None}
    tables: dict[dg.AssetKey, dict[str, Any]] = {}
    if keys:
        with warehouse.connect(read_only=True) as con:
            for key in keys:
                table = f'{ANALYTICS_SCHEMA}."{key.path[-1]}"'
                columns = con.execute(f"describe {table}").fetchall()
                rows = con.execute(f"select count(*) from {table}").fetchone()[0]
                tables[key] = {
                    "dagster/row_count": dg.MetadataValue.int(rows),
                    "dagster/column_schema": dg.TableSchema(
                        columns=[dg.TableColumn(name, str(type_)) for name, type_, *_ in columns]
                    ),
                    "preview": dg.MetadataValue.md(preview_markdown(con, table)),
                }
    for event in events:
        key = key_of(event)
        if key in tables:
            yield event.with_metadata({**event.metadata, **tables[key]})
        else:
            yield event


@dbt_assets(
    manifest=MANIFEST,
    dagster_dbt_translator=TRANSLATOR,
    name="analytics_models",
    pool=OCEAN_TRACKING_POOL,
)
def analytics_models(
    context: dg.AssetExecutionContext, warehouse: Warehouse, ocean_tracking_api: OceanTrackingApi
) -> Iterator[Any]:
    """`dbt build` of the selected models and their tests, in the configured warehouse, under its writer lock."""
    store = warehouse.store()
    dbt = DbtCliResource(
        project_dir=str(SQL_DIR), profiles_dir=str(SQL_DIR), target=dbt_target(store), dbt_executable=DBT_EXECUTABLE
    )
    args = ["build", "--vars", json.dumps(dbt_vars(store, app_url=ocean_tracking_api.app_url)), *INDIRECT_SELECTION]
    # a throwaway target folder per run (dagster-dbt would leave one per run under sql/target)
    with tempfile.TemporaryDirectory(prefix="dbt-") as target_path, store.writing():
        invocation = dbt.cli(args, context=context, raise_on_error=False, target_path=Path(target_path))
        events = list(invocation.stream())
        succeeded = invocation.is_successful()
        error = None if succeeded else invocation.get_error()
    yield from _with_table_metadata(context, events, warehouse)
    if not succeeded:
        failed = [
            f"{event.asset_key.path[-1]}.{event.check_name}"
            for event in events
            if isinstance(event, dg.AssetCheckResult) and not event.passed
        ]
        raise dg.Failure(
            description=f"dbt build failed: {error or 'see the dbt output above'}"
            + (f"; failed tests: {', '.join(failed)}" if failed else "")
        )


model_assets: list[dg.AssetsDefinition] = [analytics_models]  # dbt's tests are its asset checks
