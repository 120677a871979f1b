# longer than 500 lines because the runner, its build plan and the record of builds are one room (the dbt-duckdb plugin is pipelines.warehouse.dbt_plugin, the analysts' session pipelines.warehouse.session)
"""The analytics models (the dbt project under `sql/`: dbt-core + dbt-duckdb; dbt-postgres for PostgreSQL): the
runner that builds them (`build_models`, `plan_build`) and what the Dagster assets share with it.

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

The dbt-duckdb plugin of `sql/profiles.yml` (DuckDB extensions offline, the DuckLake attached) is
`pipelines.warehouse.dbt_plugin`, apart so that importing this runner never imports dbt.

The analysts' session that queries them (`lake session`) is `pipelines.warehouse.session`.
"""

from __future__ import annotations

import hashlib
import json
import os
import tempfile
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from dataclasses import dataclass
from datetime import UTC, datetime
from functools import cache, partial
from pathlib import Path
from typing import TYPE_CHECKING, Any

import duckdb

from pipelines.errors import ModelBuildError
from pipelines.settings import (
    ANALYTICS_SCHEMA,
    DATASET_NAME,
    INTERNAL_STAGING_LAYOUT,
    LAKE_NAME,
    SOURCE_NAME,
    every_test_interval,
)
from pipelines.warehouse import WarehouseStore, commit_message, current_snapshot, replace_rows, table_exists

if TYPE_CHECKING:  # the Dagster definitions import this module, and must not import dlt
    import dlt


SQL_DIR = Path(__file__).resolve().parents[2] / "sql"  # the dbt project (and its profiles.yml)
MODELS_DIR = SQL_DIR / "models"
SEEDS_DIR = SQL_DIR / "seeds"  # reference tables (CSV) dbt loads beside the staging models
TARGET_DIR = SQL_DIR / "target"
MANIFEST_PATH = TARGET_DIR / "manifest.json"
PARSE_COMMAND = "dbt parse --project-dir sql --profiles-dir sql"
# a test runs only when every model it reads is selected (dbt's default also runs a test of an unselected
# model when it reads a selected one, e.g. deep_links' relationship to stg_shipments)
INDIRECT_SELECTION = ["--indirect-selection", "cautious"]
# nothing on the console (the CLI prints one line per model, or the one-line error); the log in sql/logs
QUIET_CONSOLE = ["--log-level", "none", "--log-level-file", "info", "--log-path", str(SQL_DIR / "logs")]
POSTGRES_PASSWORD_ENV = "DBT_ENV_SECRET_PG_PASSWORD"
# What changes from one build to the next reaches the models as environment variables their macros read only
# while executing (`macros/lake_commits.sql`, `macros/changed_entities.sql`), not as `--vars`: dbt keys the
# parse it saves (`partial_parse.msgpack`) on the vars, so a var new at every build would parse the whole
# project again each time (BENCHMARKS.md: 4.61 s a build's parse in a fresh process, 1.95 s re-using one).
COMMIT_MESSAGE_ENV = "OCEAN_TRACKING_DBT_COMMIT_MESSAGE"
CHANGED_SINCE_ENV = "OCEAN_TRACKING_DBT_CHANGED_SINCE"
# The lake a build attaches, read by the profile's plugin when it connects (`pipelines.warehouse.dbt_plugin`):
# dbt keys its saved parse on the vars and on the profile's values too, so a lake named in either would make
# the first build of every other lake (each test's copy, each account's host) parse the whole project again.
LAKE_CATALOG_ENV = "OCEAN_TRACKING_DBT_LAKE_CATALOG"
LAKE_DATA_PATH_ENV = "OCEAN_TRACKING_DBT_LAKE_DATA_PATH"
# dbt's saved parse per project, target and vars (`saved_parse_path`): regenerable, so in the temp folder, which
# every host can write (the image's code and sql/target are read-only). Found when a build runs: finding the
# temp folder writes a probe file, and importing this module (the Dagster definitions do) writes nothing.
SAVED_PARSE_FOLDER = "ocean-tracking-dbt-parse"
PARTIAL_PARSE_FILE = "partial_parse.msgpack"
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 60
# What a build's output depends on besides the data (`project_fingerprint`), under sql/.
FINGERPRINTED_FOLDERS = ("models", "macros", "tests", "seeds")
# The record of the last complete build on a lake (`record_build`), in the staging schema.
BUILD_RECORD_TABLE = "models_built"
BUILD_RECORD = '"{schema}".' + f'"{BUILD_RECORD_TABLE}"'
# Keys of a lake snapshot's `changes` that rewrite files without changing any row (maintenance's compaction),
# and those that change rows only (any other key changes a table's or a view's layout).
LAKE_CHANGES_WITHOUT_DATA = ("merge_adjacent", "compacted_table", "rewrite_delete")
LAKE_ROW_CHANGES = ("tables_inserted_into", "tables_deleted_from", "inlined_insert", "inlined_delete")



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


def seed_names() -> list[str]:
    """The project's seeds (`sql/seeds/*.csv`) by name: the tables `dbt build` loads beside the staging models."""
    return [path.stem for path in sorted(SEEDS_DIR.glob("*.csv"))]


def mart_names() -> list[str]:
    """The marts, the models analysts query (in the models schema), by name."""
    return [model.name for model in project_models() if model.layer == "marts"]


def model_relation(name: str, analytics_schema: str = ANALYTICS_SCHEMA) -> str:
    """The quoted `schema."name"` of the project's model (or seed, loaded beside the staging models) called
    `name` beside the models schema."""
    if name in seed_names():
        return f'"{staging_schema(analytics_schema)}"."{name}"'
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
    tables into, the schemas the models go to (one an account, and its staging schema), and for a DuckDB
    file its path (the profile's defaults are only for runs by hand). A lake is named in the build's
    environment instead (`build_environment`), so every lake's builds share one saved parse."""
    common = schema_vars(app_url=app_url, raw_schema=raw_schema, analytics_schema=analytics_schema)
    if store.is_lake:
        return common
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


def build_environment(store: WarehouseStore, *, commit_message: str = "", changed_since: str | None = None) -> dict[str, str]:
    """The environment of one dbt run on `store` (`invoke_dbt`): the lake it attaches (`LAKE_CATALOG_ENV`), the
    lake commits' message (`macros/lake_commits.sql`) and the commit time of the last build's newest load for
    the incremental marts (`macros/changed_entities.sql`; empty: every entity). Every key always, so that
    nothing left in the shell reaches a build."""
    lake = (store.catalog or "", store.data_path or "") if store.is_lake else ("", "")
    return {LAKE_CATALOG_ENV: lake[0], LAKE_DATA_PATH_ENV: lake[1], COMMIT_MESSAGE_ENV: commit_message,
            CHANGED_SINCE_ENV: changed_since or ""}  # fmt: skip


def saved_parse_path(args: list[str]) -> Path:
    """Where dbt's saved parse of this project for the target and vars of `args` is kept between processes.
    Keyed by what dbt checks before re-using one (the vars) and what it does not (the project's folder), so
    that builds of other accounts or checkouts do not replace each other's, while every lake's builds share
    one (`LAKE_CATALOG_ENV`); dbt itself checks the rest (every file's checksum, the profile, its version) and
    parses again what changed."""

    def value(flag: str) -> str:
        return args[args.index(flag) + 1] if flag in args else ""

    key = json.dumps([str(SQL_DIR), value("--target"), value("--vars")])
    return Path(tempfile.gettempdir()) / SAVED_PARSE_FOLDER / f"{hashlib.sha256(key.encode()).hexdigest()[:24]}.msgpack"


def _keep_parse(written: Path, saved: Path) -> None:
    """Move the parse dbt just saved (`written`, only there when it parsed something) to `saved`, atomically:
    a build reading it meanwhile reads the old one or the new one. Best effort: without it the next build
    parses the whole project, as with none."""
    if not written.is_file():
        return
    try:
        saved.parent.mkdir(parents=True, exist_ok=True)
        staged = saved.with_name(f"{saved.name}.{os.getpid()}")
        written.replace(staged)
        staged.replace(saved)
    except OSError:
        pass


def invoke_dbt(args: list[str], environment: dict[str, str] | None = None) -> Any:
    """Run dbt in this process (`dbtRunner`, nothing on the console: dbt's log is `sql/logs/dbt.log`) with
    `environment` set for the run (`build_environment`), and return its outcome (`dbtRunnerResult`:
    `success`, `result` with a result per node, `exception`), passed or not. In process: a `dbt` subprocess
    costs its interpreter, imports and parse on top (the Dagster models' step took 2.4x as long through
    dagster-dbt's subprocess runner: BENCHMARKS.md). It re-uses the parse an earlier build with the same vars
    saved (`saved_parse_path`), and writes no JSON artifacts: the outcome carries the results."""
    from dbt.cli.main import dbtRunner

    saved = saved_parse_path(args)
    # a throwaway target folder: sql/target keeps the manifest `dbt parse` made for the Dagster definitions
    with tempfile.TemporaryDirectory(prefix="dbt-") as target_path, _environment(environment or {}):
        reuse = ["--partial-parse-file-path", str(saved)] if saved.is_file() else []
        try:
            return dbtRunner().invoke([*args, "--target-path", target_path, "--no-write-json", *reuse,
                                       *QUIET_CONSOLE])  # fmt: skip
        finally:
            _close_duckdb_connections()
            _keep_parse(Path(target_path) / PARTIAL_PARSE_FILE, saved)


def run_dbt(args: list[str], environment: dict[str, str] | None = None) -> Any:
    """Run dbt in this process (`invoke_dbt`) and return its result; raise `ModelBuildError` with one line
    naming what failed (a model, a test, or dbt itself)."""
    outcome = invoke_dbt(args, environment)
    if outcome.success:
        return outcome.result
    if isinstance(outcome.exception, KeyboardInterrupt):  # Ctrl-C or SIGTERM while dbt ran: not a failure of dbt
        raise outcome.exception
    raise ModelBuildError(outcome_error(args, outcome))


def outcome_error(args: list[str], outcome: Any) -> str:
    """One line naming what failed in a dbt outcome: the first model or test that did not pass, else dbt's
    own error."""
    line = failure_line(outcome.result)
    if line is None:
        error = outcome.exception or "see sql/logs/dbt.log"
        said = " ".join(str(error).split()) or f"{type(error).__name__} (see sql/logs/dbt.log)"  # never empty
        line = f"dbt {args[0]} failed: {said}"
    return line


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
    run_dbt(dbt_args("build", target="postgres", variables=variables), postgres_profile_env(credentials))
    with pipeline.sql_client() as client:
        built = {row[0] for row in client.execute_sql(
            "select table_name from information_schema.tables where table_schema = %s", analytics_schema)}
        return {name: client.execute_sql(f'select count(*) from {analytics_schema}."{name}"')[0][0]
                for name in mart_names() if name in built}  # fmt: skip


# The generic tests that check a mart's values against their domain (a status among those known, a figure in its
# range, a mart not empty when its driver is not), not its structure (keys unique and present, references that
# resolve, row counts two marts share): a failure is the service's data drifting, a finding for a person and not a
# reason to stop the next merge. A build between two of every test (`every_test_interval`) leaves them out (20 of
# its 80 tests, about 1 s of a soak's hourly build); the structure is tested at every build.
DOMAIN_TESTS = ("accepted_values", "between", "not_empty_when")


@dataclass(frozen=True)
class BuildPlan:
    """What a `dbt build` on the lake has to build, from what changed since the last complete build.

    `select` is None for every model (`--full-refresh`: the incremental marts made afresh), else dbt
    selectors: the incremental marts reading a raw table whose rows changed, and either their own tests
    (indirect selection) but the domain tests (`exclude`: `DOMAIN_TESTS`) or, once `every_test_interval` has
    passed since a build last ran them (`every_test_at`), every test of the project. `changed_since` (what the incremental marts read, `macros/changed_entities.sql`, through
    `build_environment`) is the commit time of the newest load the last build read. `skip` when nothing the models read changed: no dbt run at all, so an unchanged sync
    commits no snapshot and writes no file. `snapshot` and `loaded_through` are what this build reads
    (recorded after it, `record_build`), `fingerprint` the project and vars it builds with, `reason` what
    decided it (for the log)."""

    select: list[str] | None
    skip: bool
    snapshot: int | None
    loaded_through: str | None
    fingerprint: str
    reason: str
    changed_since: str | None = None
    every_test_at: datetime | None = None  # when a build last ran every test; None: this one does
    exclude: list[str] | None = None  # what a build between two of every test leaves out (`DOMAIN_TESTS`)

    def dbt_arguments(self) -> list[str]:
        """The build's selection arguments: `--select ...` (and `--exclude ...`), or `--full-refresh` for
        every model."""
        if self.select is None:
            return ["--full-refresh"]
        return ["--select", *self.select, *(["--exclude", *self.exclude] if self.exclude else [])]


def project_fingerprint(variables: dict[str, Any]) -> str:
    """A digest of everything a build's output depends on besides the data: the dbt project's files
    (models, macros, tests, seeds, dbt_project.yml) and the build's vars (`app_url` is in the deep links).
    A new release or another `app_url` changes it, and the next build is a full one."""
    digest = hashlib.sha256(json.dumps(variables, sort_keys=True).encode())
    for path in sorted([SQL_DIR / "dbt_project.yml", *(path for folder in FINGERPRINTED_FOLDERS
                                                        for path in (SQL_DIR / folder).rglob("*") if path.is_file())]):
        digest.update(str(path.relative_to(SQL_DIR)).encode())
        digest.update(path.read_bytes())
    return digest.hexdigest()[:16]


@dataclass(frozen=True)
class LakeChanges:
    """The tables of a schema the lake's commits changed since a snapshot, by name: `rows` (rows inserted,
    deleted or updated) and `layout` (created, altered, dropped: a view reading the table must be made again,
    `contract_source` having read its columns when it was made)."""

    rows: frozenset[str]
    layout: frozenset[str]


def tables_changed_since(con: duckdb.DuckDBPyConnection, snapshot: int, schema: str, *,
                         metadata_schema: str = "main") -> LakeChanges | None:
    """What the lake's commits after `snapshot` changed in `schema` (`LakeChanges`), from the lake's own
    record of each commit (`snapshots().changes`: table ids for row changes, `schema.table` names for DDL; ids
    resolved through the catalog's tables, in `metadata_schema`: `main` in SQLite, the store's schema in
    PostgreSQL). Compaction changes no row and is left out. None when the lake no longer holds every snapshot
    since (maintenance expired `snapshot`): the changes are then unknown."""
    oldest = con.execute(f"select min(snapshot_id) from {LAKE_NAME}.snapshots()").fetchone()[0]
    if oldest is None or oldest > snapshot:
        return None
    catalog = f"__ducklake_metadata_{LAKE_NAME}.{metadata_schema}"  # the catalog's tables (DuckLake's specification)
    named = dict(con.execute(
        f"select t.table_id::varchar, t.table_name from {catalog}.ducklake_table t "
        f"join {catalog}.ducklake_schema s using (schema_id) where s.schema_name = ?", [schema]).fetchall())  # fmt: skip
    rows: set[str] = set()
    layout: set[str] = set()
    for (changes,) in con.execute(f"select changes from {LAKE_NAME}.snapshots() where snapshot_id > ?", [snapshot]).fetchall():
        for key, touched in (changes or {}).items():
            if key in LAKE_CHANGES_WITHOUT_DATA:
                continue
            changed = rows if key in LAKE_ROW_CHANGES else layout
            for item in touched or []:
                if item in named:
                    changed.add(named[item])
                elif item.startswith(f"{schema}."):
                    changed.add(item.split(".", 1)[1])
    return LakeChanges(frozenset(rows), frozenset(layout))


# Opens a session on the warehouse and closes it after the block: `WarehouseStore.connect`, or a sync's own
# (`pipelines.warehouse.loader_session`), so that a sync attaches the lake once, not once more per step.
Session = Callable[[], AbstractContextManager[duckdb.DuckDBPyConnection]]


@contextmanager
def kept_session(store: WarehouseStore) -> Iterator[Session]:
    """A `Session` that attaches the lake once for the block and lends that one connection to every use in it
    (a build's plan, its record, the rebuilt models' row counts): each attach of a 10,000-shipment lake costs
    0.4-1 s. A DuckDB file is opened at each use instead, as `store.connect` opens it: dbt opens it with its own
    configuration meanwhile, which a connection kept open would refuse."""
    if not store.is_lake:
        yield store.connect
        return
    with store.connect() as con:
        yield lambda: nullcontext(con)


def plan_build(store: WarehouseStore, variables: dict[str, Any], *, raw_schema: str, analytics_schema: str,
               session: Session | None = None) -> BuildPlan:
    """What a build of every model has to do on `store` now (`BuildPlan`), under the writer lock; read in
    `session` (default: a read-only session of its own).

    On a lake: from the record of the last complete build (`record_build`): nothing when no raw table
    changed since its snapshot; the models downstream of the raw tables whose rows changed (the incremental
    marts for the changed entities only); every model when there is no record, the project or the vars
    changed, a raw table's layout changed (a new table or column), or maintenance expired the recorded
    snapshot. A plain DuckDB file keeps no history of its commits: every model, each time.

    Why not dbt's own `source_status:fresher+` selector: it compares the sources' newest `loaded_at` with a
    `sources.json` a previous run left in a local folder, which another host writing the same lake, or a lake
    restored from a backup, does not share; and a newest load time misses rows only deleted (a custom field
    value removed). The lake's snapshots know every commit, wherever it was made."""
    fingerprint = project_fingerprint({key: value for key, value in variables.items()
                                       if key != "duckdb_path"})
    if not store.is_lake:
        return BuildPlan(None, False, None, None, fingerprint, "a DuckDB file: every model")
    with (session or partial(store.connect, read_only=True))() as con:
        snapshot = current_snapshot(con)
        loaded_through = None
        if table_exists(con, raw_schema, "_dlt_loads"):
            loaded_through = con.execute(f'select max(inserted_at)::varchar from "{raw_schema}"._dlt_loads').fetchone()[0]
        record = BUILD_RECORD.format(schema=staging_schema(analytics_schema))
        built = None
        if table_exists(con, staging_schema(analytics_schema), BUILD_RECORD_TABLE):
            row = con.execute(f"select * from {record}").fetchone()  # a record older than a column lacks it
            built = dict(zip([column[0] for column in con.description], row, strict=True)) if row else None
        every_model = partial(BuildPlan, None, False, snapshot, loaded_through, fingerprint)
        if built is None or built["loaded_through"] is None:
            return every_model("no complete build recorded: every model")
        if built["project_fingerprint"] != fingerprint:
            return every_model("the models or their vars changed: every model")
        changed = tables_changed_since(con, built["built_through_snapshot"], raw_schema,
                                       metadata_schema=store.catalog_tables_schema)
    if changed is None:
        return every_model("the last build's snapshot expired: every model")
    read = set(source_tables())
    if layout := sorted(changed.layout & read):  # new tables or columns: what every model reads may differ
        return every_model(f"the layout of {', '.join(layout)} changed: every model")
    if not (rows := sorted(changed.rows & read)):
        return BuildPlan(None, True, snapshot, loaded_through, fingerprint,
                         "no raw table the models read changed: nothing to build")  # fmt: skip
    # views read their tables as they are: made again only with a new layout (above) or release
    # the changed sources themselves: their tests (raw keys) gate the models reading them, at every build
    select = [f"source:{SOURCE_NAME}.{table}{kind}" for table in rows for kind in ("", "+,config.materialized:incremental")]
    # The tests of the staging views (82 of a build's 176, 3.7 s of its 11 s in a soak's hourly build) check
    # their raw tables whole, whatever changed, and the domain tests check values, not structure: both every
    # `every_test_interval`, not at every build
    every_test_at = built.get("every_test_at")
    if every_test_at is None or datetime.now(UTC) - every_test_at >= every_test_interval():
        return BuildPlan([*select, "resource_type:test"], False, snapshot, loaded_through, fingerprint,
                         f"changed since the last build: rows of {', '.join(rows)}; every test",
                         changed_since=built["loaded_through"])  # fmt: skip
    return BuildPlan(select, False, snapshot, loaded_through, fingerprint,
                     f"changed since the last build: rows of {', '.join(rows)}; the key tests of the raw tables "
                     "and marts rebuilt", changed_since=built["loaded_through"], every_test_at=every_test_at,
                     exclude=[f"test_name:{name}" for name in DOMAIN_TESTS])  # fmt: skip


def record_build(con: duckdb.DuckDBPyConnection, plan: BuildPlan, *, analytics_schema: str, message: str) -> None:
    """Record that the models are built through `plan.snapshot` and the loads committed by
    `plan.loaded_through`, with `plan.fingerprint` (the table `models_built` in the staging schema, one row),
    so the next build starts from there; in one lake commit whose message is `message`. In a writing session
    on the warehouse (`con`), under the writer lock, after a build that passed."""
    if plan.snapshot is None or plan.loaded_through is None:
        return
    schema = staging_schema(analytics_schema)
    con.execute("begin")
    commit_message(con, message)
    con.execute(f'create schema if not exists "{schema}"')
    replace_rows(con, schema, BUILD_RECORD_TABLE, "select ?::bigint as built_through_snapshot, ?::varchar as "
                 "loaded_through, ?::varchar as project_fingerprint, now() as recorded_at, "
                 "coalesce(?::timestamptz, now()) as every_test_at",
                 [plan.snapshot, plan.loaded_through, plan.fingerprint, plan.every_test_at])  # fmt: skip
    con.execute("commit")


@cache
def source_tables() -> tuple[str, ...]:
    """The raw tables the dbt project reads as sources (`models/staging/_sources.yml`)."""
    import yaml

    sources = yaml.safe_load((MODELS_DIR / "staging" / "_sources.yml").read_text())["sources"]
    return tuple(table["name"] for source in sources for table in source["tables"])


@dataclass(frozen=True)
class ModelsBuilt:
    """What `build_models` did: the rows of every mart after it, and what decided what it built."""

    rows: dict[str, int]
    reason: str


def build_models(store: WarehouseStore, *, app_url: str, select: list[str] | None = None,
                 raw_schema: str = DATASET_NAME, analytics_schema: str = ANALYTICS_SCHEMA,
                 sync_name: str = "", session: Session | None = None) -> ModelsBuilt:
    """`dbt build` (the models, then their tests, upstream first) into `store` under its writer lock;
    returns the rows of every mart (the models analysts query, in `analytics_schema`) after it. A failing
    model or test raises one line (`ModelBuildError`).

    Without `select`, only what changed is built (`plan_build`): nothing after an unchanged sync, the
    models reading the raw tables that changed otherwise; every lake commit of the build names
    `sync_name` (`build_environment`). The plan, the record and the rows are read and written in `session`
    (default: `store.connect`): a sync passes the session its load attached (about 0.4 s an attach on a soak's
    lake)."""
    variables = dbt_vars(store, app_url=app_url, raw_schema=raw_schema, analytics_schema=analytics_schema)
    with store.writing():
        plan = None if select else plan_build(store, variables, raw_schema=raw_schema,
                                              analytics_schema=analytics_schema, session=session)
        reason = plan.reason if plan else f"selected: {' '.join(select or [])}"
        message = f"{sync_name or 'models'}: dbt build ({reason})"
        if plan is None or not plan.skip:
            selection = plan.dbt_arguments() if plan else ["--select", *(select or [])]
            environment = build_environment(store, commit_message=message,
                                            changed_since=plan.changed_since if plan else None)
            run_dbt([*dbt_args("build", target=dbt_target(store), variables=variables), *selection], environment)
        with (session or store.connect)() as con:
            if plan is not None and not plan.skip:
                record_build(con, plan, analytics_schema=analytics_schema, message=message)
            built = {
                row[0]
                for row in con.execute(
                    "select table_name from information_schema.tables where table_schema = ? and table_catalog = current_database()",
                    [analytics_schema],
                ).fetchall()
            }
            rows = {
                name: con.execute(f'select count(*) from {analytics_schema}."{name}"').fetchone()[0]
                for name in mart_names()
                if name in built
            }
    return ModelsBuilt(rows, reason)


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
