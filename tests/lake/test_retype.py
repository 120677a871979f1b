"""`lake migrate --retype`: a warehouse whose columns dlt typed by guess before the registry declared them,
brought to the declared types as a user runs it (the CLI, in its own process).

The older warehouse is a copy of the suite's synced lake with two columns turned back to what dlt guessed
before they were declared, in the tables and in dlt's stored schema: `containers.weight_in_lbs` BIGINT (the
sandbox's weights are whole numbers; DuckLake widens BIGINT to DOUBLE in place) and `ports.latitude` VARCHAR
(the live service sends coordinates as strings; no engine widens VARCHAR to DOUBLE: a table rewrite)."""

from __future__ import annotations

import json
import subprocess
import sys
from dataclasses import dataclass

import pytest

import sandbox.world.render as render
from pipelines.cli.commands import declared_schema
from pipelines.compat import lake_connections_kept
from pipelines.errors import InputError
from pipelines.settings import DATASET_NAME, INTERNAL_STAGING_LAYOUT, SOURCE_NAME
from pipelines.warehouse import WarehouseStore, loader_session
from pipelines.warehouse.destinations import ducklake_target, make_pipeline
from pipelines.warehouse.retype import apply_retype, plan_retype
from tests.support.syncs import SyncResult, cli_env, sync_once

STAGING = INTERNAL_STAGING_LAYOUT % DATASET_NAME
# (schema, table, column, the type dlt guessed, its dlt data type)
GUESSED = (
    (DATASET_NAME, "containers", "weight_in_lbs", "BIGINT", "bigint"),
    (STAGING, "containers", "weight_in_lbs", "BIGINT", "bigint"),
    (DATASET_NAME, "ports", "latitude", "VARCHAR", "text"),
)


def _guess_back(store: WarehouseStore, workdir, guessed=GUESSED) -> None:
    """Give the columns their guessed types back: each table rebuilt with the column cast (DuckLake narrows
    nothing in place), and dlt's stored schema (in the pipeline's working folder and `_dlt_version`) saying
    the guessed type, as dlt stored it before the column was declared."""
    pipeline = make_pipeline(ducklake_target(store), workdir / "dlt")
    with lake_connections_kept():
        pipeline.sync_destination()
        with loader_session(pipeline, store) as con:
            for schema, table, column, guessed_type, _ in guessed:
                name = f"{schema}.{table}"
                con.execute(f"create table {name}__old as select * replace (cast({column} as {guessed_type}) as "
                            f"{column}) from {name}; drop table {name}; alter table {name}__old rename to {table}")  # fmt: skip
        schema = pipeline.schemas[SOURCE_NAME]
        for _, table, column, _, data_type in guessed:
            schema.tables[table]["columns"][column]["data_type"] = data_type
        pipeline.schemas.save_schema(schema)
        with pipeline.destination_client(SOURCE_NAME) as client:
            client.update_stored_schema(only_tables=[schema.version_table_name])


@pytest.fixture
def older(synced_copy: SyncResult, tmp_path) -> SyncResult:
    """A copy of the synced lake as a warehouse loaded before `GUESSED` were declared."""
    _guess_back(synced_copy.store, tmp_path)
    return synced_copy


@dataclass(frozen=True)
class Look:
    """What the tests read of the lake, in one read-only session: the type of each guessed column of the
    dataset and its values (now or at a snapshot), the type in dlt's merge staging, the newest snapshot, and the
    dlt types of the guessed columns in dlt's newest stored schema (`_dlt_version`)."""

    types: dict[tuple[str, str], str]
    values: list[tuple]
    staging: str
    snapshot: int
    stored: dict[tuple[str, str], str]

    @classmethod
    def of(cls, store: WarehouseStore, version: int | None = None) -> Look:
        """Read it, at `version` when given (types and values only: the rest is now)."""
        at = "" if version is None else f"at (version => {version})"
        with store.connect(read_only=True, search_path=(DATASET_NAME,)) as con:

            def one(sql: str):
                return con.execute(sql).fetchone()[0]

            types = {(table, column): one(f"select typeof({column}) from {table} {at} limit 1")
                     for schema, table, column, _, _ in GUESSED if schema == DATASET_NAME}  # fmt: skip
            values = con.execute(f"select id, try_cast(weight_in_lbs as double) from containers {at} union all "
                                 f"select id, try_cast(latitude as double) from ports {at} order by all").fetchall()  # fmt: skip
            staging = one("select data_type from information_schema.columns where table_catalog = current_database() "
                          f"and table_schema = '{STAGING}' and table_name = 'containers' "
                          "and column_name = 'weight_in_lbs'")  # fmt: skip
            snapshot = one("select max(snapshot_id) from lake.snapshots()")
            schema = json.loads(one("select schema from _dlt_version order by inserted_at desc limit 1"))
        stored = {(table, column): schema["tables"][table]["columns"][column]["data_type"]
                  for schema_name, table, column, _, _ in GUESSED if schema_name == DATASET_NAME}  # fmt: skip
        return cls(types, values, staging, snapshot, stored)


def _plan_rows(stdout: str) -> set[tuple[str, ...]]:
    """The rows of the tables the command printed, each as its cells."""
    return {
        tuple(cell.strip() for cell in line.strip("│").split("│"))
        for line in stdout.splitlines()
        if "│" in line
    }


def _retype(env: dict[str, str], *extra: str) -> subprocess.CompletedProcess:
    done = subprocess.run([sys.executable, "-m", "pipelines", "lake", "migrate", "--retype", *extra], env=env,
                          capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    return done


def test_guessed_types_are_shown_then_rewritten_and_the_next_sync_agrees(
    older, own_sandbox, tmp_path, monkeypatch
):
    env = cli_env(
        own_sandbox.base_url, tmp_path, OCEAN_TRACKING_PIPELINES_DIR=str(tmp_path / "dlt"), COLUMNS="200"
    )
    old = Look.of(older.store)
    assert old.types == {("containers", "weight_in_lbs"): "BIGINT", ("ports", "latitude"): "VARCHAR"}
    assert old.staging == "BIGINT" and set(old.stored.values()) == {"bigint", "text"}

    shown = _retype(env)
    assert {
        (f"{DATASET_NAME}.containers", "weight_in_lbs", "BIGINT", "DOUBLE", "in place", ""),
        (f"{STAGING}.containers", "weight_in_lbs", "BIGINT", "DOUBLE", "in place", ""),
        (f"{DATASET_NAME}.ports", "latitude", "VARCHAR", "DOUBLE", "table rewrite", ""),
        ("containers", "weight_in_lbs", "bigint", "double"),
        ("ports", "latitude", "text", "double"),
    } <= _plan_rows(shown.stdout), shown.stdout
    assert "Nothing changed: run again with --yes" in shown.stdout
    assert Look.of(older.store) == old

    applied = _retype(env, "--yes")
    assert f"The snapshot before is {old.snapshot}" in applied.stdout, applied.stdout
    assert "tables rebuilt: ocean_tracking.ports" in applied.stdout, applied.stdout
    new = Look.of(older.store)
    assert set(new.types.values()) == {"DOUBLE"} and new.staging == "DOUBLE" and new.values == old.values
    assert set(new.stored.values()) == {"double"}
    # time travel: the snapshot before still has the guessed types and the same values
    then = Look.of(older.store, old.snapshot)
    assert (then.types, then.values) == (old.types, old.values)
    working_folder = make_pipeline(ducklake_target(older.store), tmp_path / "dlt")  # the one the command used
    local = working_folder.schemas[SOURCE_NAME]
    assert local.tables["containers"]["columns"]["weight_in_lbs"]["data_type"] == "double"
    assert plan_retype(older.store, DATASET_NAME, declared_schema(), pipelines_dir=tmp_path / "dlt").empty

    # the service now weighs one container at 12.5 lbs: the next sync stores 12.5, in the column itself
    weighed = older.scalar("select id from containers order by id limit 1")
    rendered = render.container_resource

    def weighing(*args, **kwargs):
        resource = rendered(*args, **kwargs)
        if resource["id"] == weighed:
            resource["attributes"]["weight_in_lbs"] = 12.5
        return resource

    monkeypatch.setattr(render, "container_resource", weighing)
    after = sync_once(own_sandbox, tmp_path)
    assert after.scalar(f"select weight_in_lbs from containers where id = '{weighed}'") == 12.5
    assert after.query("select column_name from information_schema.columns where column_name like '%\\_\\_v\\_%' "
                        "escape '\\'") == []  # fmt: skip
    assert Look.of(after.store).stored[("containers", "weight_in_lbs")] == "double"


def test_values_the_declared_type_cannot_take_refuse_the_whole_retype(synced_copy, tmp_path):
    store = synced_copy.store
    _guess_back(store, tmp_path, guessed=GUESSED[:1] + GUESSED[2:])
    with store.connect() as con:
        con.execute(
            "update ocean_tracking.ports set latitude = 'n/a' where id = (select min(id) from ocean_tracking.ports)"
        )
    before = Look.of(store)

    plan = plan_retype(store, DATASET_NAME, declared_schema(), pipelines_dir=tmp_path / "dlt")
    assert [(c.table, c.column, c.unfit) for c in plan.unfit] == [("ports", "latitude", 1)]
    with pytest.raises(
        InputError, match=r"Nothing retyped: .*ocean_tracking\.ports\.latitude \(1 not DOUBLE\)"
    ):
        apply_retype(store, plan, declared_schema(), pipelines_dir=tmp_path / "dlt")
    assert Look.of(store) == before
