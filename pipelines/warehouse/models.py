"""The analytics models: the dbt project under `sql/` (dbt-core + dbt-duckdb; dbt-postgres for PostgreSQL).

One source of truth, many engines: the models (`sql/models/marts`, one table or view `analytics.<model>`
each, what analysts query; `sql/models/staging`, the typed copies of the raw tables the marts are built
from, in a schema of their own, `_analytics_staging`) read the raw tables dlt loads as dbt sources
(`ocean_tracking.<table>`), and where DuckDB and PostgreSQL differ they call `adapter.dispatch` macros
(`sql/macros/`). A raw table or a column dlt has not created yet reads as typed nulls / no rows
(`contract_source`), so a model builds empty instead of failing. What an earlier layout left (the staging
models beside the marts, a renamed mart, dlt's staging under its old name) is dropped after every run
(`sql/macros/replaced_layout.sql`). The CLI sync calls `build_models` (an in-process `dbt build`); the
Dagster assets (`assets/models.py`, dagster-dbt) run the same `dbt build` with the same target and vars
(`dbt_target`, `dbt_vars`): one runner. Both hold the warehouse's writer lock around the build.
"""

from __future__ import annotations

import json
import logging
import os
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from functools import cache
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pipelines.errors import ModelBuildError
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME, INTERNAL_STAGING_LAYOUT
from pipelines.warehouse.store import WarehouseStore

if TYPE_CHECKING:  # the Dagster definitions import this module, and must not import dlt
    import dlt

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"  # the dbt project (and its profiles.yml)
MODELS_DIR = SQL_DIR / "models"
TARGET_DIR = SQL_DIR / "target"
MANIFEST_PATH = TARGET_DIR / "manifest.json"
PARSE_COMMAND = "dbt parse --project-dir sql --profiles-dir sql"
# a test runs only when every model it reads is selected (dbt's default also runs a test of an unselected
# model when it reads a selected one, e.g. deep_links' relationship to stg_shipments)
INDIRECT_SELECTION = ["--indirect-selection", "cautious"]
# nothing on the console (the CLI prints one line per model, or the one-line error); the log in sql/logs
QUIET_CONSOLE = ["--log-level", "none", "--log-level-file", "info", "--log-path", str(SQL_DIR / "logs")]
POSTGRES_PASSWORD_ENV = "DBT_ENV_SECRET_PG_PASSWORD"
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 60


@dataclass(frozen=True)
class SqlModel:
    """One model file of the dbt project: its name (file stem, the table `analytics.<name>`) and layer."""

    path: Path

    @property
    def name(self) -> str:
        """The model's (and its table's) name."""
        return self.path.stem

    @property
    def layer(self) -> str:
        """`staging` or `marts`: the folder under sql/models/."""
        return self.path.parent.name

    def schema(self, analytics_schema: str = ANALYTICS_SCHEMA) -> str:
        """The schema the model is built in, beside the models schema `analytics_schema`: the schema itself
        for a mart, its staging schema for a staging model (`staging_schema`, dbt_project.yml)."""
        return staging_schema(analytics_schema) if self.layer == "staging" else analytics_schema


def staging_schema(analytics_schema: str = ANALYTICS_SCHEMA) -> str:
    """The schema of the staging models beside the models schema `analytics_schema` (`_analytics_staging`):
    implementation analysts need not see, apart from the marts."""
    return INTERNAL_STAGING_LAYOUT % analytics_schema


@cache
def project_models() -> tuple[SqlModel, ...]:
    """The project's models (`sql/models/**/*.sql`), by file: what a build creates, for callers that only
    need the names (the manifest, `dbt parse`, has the rest)."""
    return tuple(SqlModel(path) for path in sorted(MODELS_DIR.rglob("*.sql")))


def mart_names() -> list[str]:
    """The marts, the models analysts query (in the models schema), by name."""
    return [model.name for model in project_models() if model.layer == "marts"]


def model_relation(name: str, analytics_schema: str = ANALYTICS_SCHEMA) -> str:
    """The quoted `schema."name"` of the project's model called `name` beside the models schema."""
    model = next(model for model in project_models() if model.name == name)
    return f'"{model.schema(analytics_schema)}"."{name}"'


def dbt_target(store: WarehouseStore) -> str:
    """The profile target (`sql/profiles.yml`) that builds in `store`: `ducklake` or `duckdb`."""
    return "ducklake" if store.is_lake else "duckdb"


def schema_vars(*, app_url: str, raw_schema: str, analytics_schema: str) -> dict[str, str]:
    """The `--vars` every build has, whatever the engine: `app_url` and the schemas read and written."""
    return {"app_url": app_url, "raw_schema": raw_schema, "analytics_schema": analytics_schema,
            "staging_schema": staging_schema(analytics_schema)}


def dbt_vars(store: WarehouseStore, *, app_url: str, raw_schema: str = DATASET_NAME,
             analytics_schema: str = ANALYTICS_SCHEMA) -> dict[str, str]:
    """The `--vars` of a build in `store`: the deep links' `app_url`, the schema dlt loaded the raw
    tables into, the schemas the models go to (one an account, and its staging schema), and where the
    warehouse is (the profile's defaults are only for runs by hand)."""
    common = schema_vars(app_url=app_url, raw_schema=raw_schema, analytics_schema=analytics_schema)
    if store.is_lake:
        return {**common, "lake_catalog": store.catalog or "", "lake_data_path": store.data_path or ""}
    return {**common, "duckdb_path": str(store.duckdb_file.resolve())}


def dbt_args(command: str, *, target: str, variables: dict[str, Any], select: list[str] | None = None) -> list[str]:
    """The dbt command line (without `dbt`) for `command` on this project, `target` and `variables`."""
    args = [command, "--project-dir", str(SQL_DIR), "--profiles-dir", str(SQL_DIR), "--target", target,
            "--vars", json.dumps(variables)]  # fmt: skip
    if select:
        args += ["--select", *select]
    return [*args, *INDIRECT_SELECTION]


def failure_line(result: Any) -> str | None:
    """One line for the first model or test that did not pass (which, and what failed), else None."""
    for node_result in getattr(result, "results", None) or []:
        status = str(getattr(node_result.status, "value", node_result.status))
        if status not in ("error", "fail", "runtime error"):
            continue
        node = node_result.node
        message = " ".join(str(node_result.message or status).split())
        if node.resource_type == "model":
            return f"dbt model {node.name} failed: {message}"
        # a model's test names its model; a raw table's (a source test) has no attached node but one parent
        parents = getattr(getattr(node, "depends_on", None), "nodes", None) or []
        attached = (getattr(node, "attached_node", None) or (parents[0] if len(parents) == 1 else "")).rsplit(".", 1)[-1]
        on = f" (on {attached})" if attached else ""
        return f"dbt {node.resource_type} {node.name}{on} failed: {message}"
    return None


def _close_duckdb_connections() -> None:
    """Close the DuckDB database dbt-duckdb keeps open in this process after a run: a DuckDB file stays
    locked (and cannot be opened with another configuration) for as long as it is open."""
    from dbt.adapters.duckdb.connections import DuckDBConnectionManager

    environment = DuckDBConnectionManager._ENV
    if environment is not None:
        environment.close()
    DuckDBConnectionManager.close_all_connections()


def invoke_dbt(args: list[str]) -> Any:
    """Run dbt in this process (`dbtRunner`, nothing on the console: dbt's log is `sql/logs/dbt.log`) and
    return its outcome (`dbtRunnerResult`: `success`, `result` with a result per node, `exception`),
    passed or not. In process: a `dbt` subprocess costs its interpreter, imports and parse on top (the
    Dagster models' step took 2.4x as long through dagster-dbt's subprocess runner: BENCHMARKS.md)."""
    from dbt.cli.main import dbtRunner

    # a throwaway target folder: sql/target keeps the manifest `dbt parse` made for the Dagster definitions
    with tempfile.TemporaryDirectory(prefix="dbt-") as target_path:
        try:
            return dbtRunner().invoke([*args, "--target-path", target_path, *QUIET_CONSOLE])
        finally:
            _close_duckdb_connections()


def outcome_error(args: list[str], outcome: Any) -> str:
    """One line naming what failed in a dbt outcome: the first model or test that did not pass, else dbt's
    own error."""
    line = failure_line(outcome.result)
    if line is None:
        error = outcome.exception or "see sql/logs/dbt.log"
        said = " ".join(str(error).split()) or f"{type(error).__name__} (see sql/logs/dbt.log)"  # never empty
        line = f"dbt {args[0]} failed: {said}"
    return line


def run_dbt(args: list[str]) -> Any:
    """Run dbt in this process (`invoke_dbt`) and return its result; raise `ModelBuildError` with one line
    naming what failed (a model, a test, or dbt itself)."""
    outcome = invoke_dbt(args)
    if outcome.success:
        return outcome.result
    if isinstance(outcome.exception, KeyboardInterrupt):  # Ctrl-C or SIGTERM while dbt ran: not a failure of dbt
        raise outcome.exception
    raise ModelBuildError(outcome_error(args, outcome))


def postgres_profile_env(credentials: Any) -> dict[str, str]:
    """The `postgres` target's environment (sql/profiles.yml) for dlt's Postgres credentials. The password
    goes in `DBT_ENV_SECRET_PG_PASSWORD`: dbt scrubs the values of `DBT_ENV_SECRET_*` from its logs."""
    return {
        "OCEAN_TRACKING_PG_HOST": str(credentials.host),
        "OCEAN_TRACKING_PG_PORT": str(credentials.port or 5432),
        "OCEAN_TRACKING_PG_USER": str(credentials.username),
        "OCEAN_TRACKING_PG_DATABASE": str(credentials.database),
        POSTGRES_PASSWORD_ENV: str(credentials.password or ""),
    }


@contextmanager
def _environment(variables: dict[str, str]) -> Iterator[None]:
    """Set `variables` in this process's environment for the block (dbt's profile reads them), then put
    back what was there."""
    saved = {name: os.environ.get(name) for name in variables}
    os.environ.update(variables)
    try:
        yield
    finally:
        for name, value in saved.items():
            if value is None:
                os.environ.pop(name, None)
            else:
                os.environ[name] = value


def build_models_in_postgres(pipeline: dlt.Pipeline, *, app_url: str, raw_schema: str = DATASET_NAME,
                             analytics_schema: str = ANALYTICS_SCHEMA) -> dict[str, int]:
    """`dbt build --target postgres` on the PostgreSQL database `pipeline` loads (its own credentials),
    after a sync there: the same models and tests as on the embedded warehouse, the geometry through
    PostGIS. Returns the rows of every mart; a failing model or test raises one line."""
    credentials = pipeline.destination_client().config.credentials
    variables = schema_vars(app_url=app_url, raw_schema=raw_schema, analytics_schema=analytics_schema)
    with _environment(postgres_profile_env(credentials)):
        run_dbt(dbt_args("build", target="postgres", variables=variables))
    with pipeline.sql_client() as client:
        built = {row[0] for row in client.execute_sql(
            "select table_name from information_schema.tables where table_schema = %s", analytics_schema)}
        return {name: client.execute_sql(f'select count(*) from {analytics_schema}."{name}"')[0][0]
                for name in mart_names() if name in built}  # fmt: skip


def build_models(store: WarehouseStore, *, app_url: str, select: list[str] | None = None,
                 raw_schema: str = DATASET_NAME, analytics_schema: str = ANALYTICS_SCHEMA) -> dict[str, int]:
    """`dbt build` (every model, then its tests, upstream first) into `store` under its writer lock;
    returns the rows of every mart (the models analysts query, in `analytics_schema`) after it. A failing
    model or test raises one line (`ModelBuildError`)."""
    variables = dbt_vars(store, app_url=app_url, raw_schema=raw_schema, analytics_schema=analytics_schema)
    with store.writing():
        run_dbt(dbt_args("build", target=dbt_target(store), variables=variables, select=select))
    with store.connect(read_only=True) as con:
        built = {
            row[0]
            for row in con.execute(
                "select table_name from information_schema.tables where table_schema = ? and table_catalog = current_database()",
                [analytics_schema],
            ).fetchall()
        }
        return {
            name: con.execute(f'select count(*) from {analytics_schema}."{name}"').fetchone()[0]
            for name in mart_names()
            if name in built
        }


def _cell(value: Any) -> str:
    text = "" if value is None else str(value)
    if len(text) > PREVIEW_CELL_CHARS:
        text = text[: PREVIEW_CELL_CHARS - 1] + "…"
    return text.replace("|", "\\|").replace("\n", " ")


def preview_markdown(con: Any, table: str, limit: int = PREVIEW_ROWS) -> str:
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
