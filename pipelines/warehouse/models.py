"""The analytics models: one SQL file under `sql/` per table `analytics.<file stem>`, run on DuckDB.

Each file is `create or replace table analytics.<stem> as <select>` and reads raw tables as
`ocean_tracking.<table>` and other models as `analytics.<model>`; sqlglot parses the references, so the
order models run in (and the Dagster lineage built from it) comes from the SQL itself. The CLI sync runs
`build_models`; the Dagster model assets run `run_model` one asset at a time: the same SQL, one runner.

A raw table dlt has not created yet (a child table before the first hold or fee, `map_features` on an
account without routing data) is stood in for by an empty view inside the model's transaction, dropped
again before commit: the staging models' `contract` CTEs supply the typed columns, so the model builds
empty instead of failing, and dlt never sees the stand-in.
"""

from __future__ import annotations

import hashlib
import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from functools import cache
from graphlib import TopologicalSorter
from pathlib import Path
from typing import Any

import duckdb
import sqlglot
from sqlglot import exp

from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME
from pipelines.warehouse.tables import table_exists

logger = logging.getLogger(__name__)

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
RAW_SCHEMA = DATASET_NAME
PREVIEW_ROWS = 5
PREVIEW_CELL_CHARS = 60
_KEY_LINE = re.compile(r"^key:\s*(?P<columns>.+)$", re.IGNORECASE)


@dataclass(frozen=True)
class SqlModel:
    """One SQL file: its name (file stem), text, header comment and the relations it reads."""

    path: Path
    name: str
    sql: str
    description: str
    sources: frozenset[tuple[str, str]]  # (schema, table) read by the model, itself excluded

    @property
    def layer(self) -> str:
        """`staging` or `marts`: the folder under sql/."""
        return self.path.parent.name

    @property
    def raw_sources(self) -> list[str]:
        """The raw tables (`ocean_tracking.<table>`) the model reads."""
        return sorted(table for schema, table in self.sources if schema == RAW_SCHEMA)

    @property
    def upstream_models(self) -> list[str]:
        """The other models (`analytics.<model>`) this one reads."""
        return sorted(table for schema, table in self.sources if schema == ANALYTICS_SCHEMA)

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
        """A hash of the SQL text: changes exactly when the model's definition does."""
        return hashlib.sha256(self.sql.encode()).hexdigest()[:16]


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
    """Every `sql/**/*.sql` model in the order they can run (upstream first).

    Two files with one stem would be one table, and a model reading one no file builds cannot run:
    both fail here, before anything runs."""
    models = [parse_model(path) for path in sorted(sql_dir.rglob("*.sql"))]
    names = [model.name for model in models]
    duplicates = sorted({name for name in names if names.count(name) > 1})
    if duplicates:
        raise ValueError(f"model names must be unique across sql/: {duplicates}")
    known = set(names)
    for model in models:
        unknown = set(model.upstream_models) - known
        if unknown:
            raise ValueError(f"{model.path}: reads {sorted(unknown)}, which no file under sql/ builds")
    by_name = {model.name: model for model in models}
    order = TopologicalSorter({model.name: model.upstream_models for model in models}).static_order()
    return [by_name[name] for name in order]


@cache
def project_models() -> tuple[SqlModel, ...]:
    """The project's models under `sql/`, parsed once per process."""
    return tuple(load_models())


def run_model(con: duckdb.DuckDBPyConnection, model: SqlModel, *, app_url: str) -> dict[str, Any]:
    """Build one model in a single transaction; returns its row count and the raw tables stood in for."""
    if not con.execute(
        "select count(*) from information_schema.schemata where schema_name = ?", [RAW_SCHEMA]
    ).fetchone()[0]:
        raise RuntimeError(f"schema {RAW_SCHEMA} does not exist in the warehouse: load the account first")
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


def build_models(
    con: duckdb.DuckDBPyConnection, *, app_url: str, models: Sequence[SqlModel] | None = None
) -> dict[str, int]:
    """Build every model (upstream first) on one connection; rows per model."""
    return {
        model.name: run_model(con, model, app_url=app_url)["rows"]
        for model in (models if models is not None else project_models())
    }


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
