"""The analysts' session on the lake, DuckDB's own command line ready to query: `lake session` runs the `duckdb` executable of the `duckdb-cli` package (locked to the same DuckDB as the
Python package, so the bundled extension binaries fit it) with auto-install off, spatial loaded and the
lake attached READ_ONLY as `lake` and in use, in the marts' schema (`analytics`, once the models are built):
`show tables` lists the marts, and `select * from ocean_tracking.containers` works at once. A
read-only session never waits for a sync and never blocks one (see `WarehouseStore`). The extensions come from
their PyPI wheels (`ensure_bundled_extensions`), so nothing is downloaded, here or in a firewalled CI.

On the lake across hosts (a PostgreSQL catalog, files in S3-compatible storage) the session also needs the
catalog's password and the storage's secret: those statements go to the command line in an init file only
its owner can read, deleted when the session ends, never as arguments (which every user of the host sees
in the process list). `--print-sql` shows them with the secrets blanked out.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path

import duckdb

from pipelines.errors import ConfigurationError, redact
from pipelines.settings import ANALYTICS_SCHEMA, LAKE_NAME
from pipelines.warehouse import WarehouseStore, is_remote, lake_data_path, storage_secret_statements
from pipelines.warehouse.connections import catalog_password, ensure_bundled_extensions

CLI_NAME = "duckdb"
# What the command line is told first: never fetch an extension (they are installed from the wheels).
OFFLINE_STATEMENT = "SET autoinstall_known_extensions = false"
OUTPUT_MODES = ("box", "csv", "json", "jsonlines", "line", "list", "markdown", "table")


@dataclass(frozen=True)
class SessionSql:
    """The statements that make a session ready, and the secret values among them (a catalog password,
    storage keys): when there are any, the statements never go on a command line nor to the screen."""

    statements: list[str]
    secrets: list[str] = field(default_factory=list)

    def shown(self) -> list[str]:
        """The statements with every secret blanked out (`***`)."""
        return [redact(statement, *self.secrets) for statement in self.statements]


def session_sql(store: WarehouseStore, default_schema: str | None = ANALYTICS_SCHEMA) -> SessionSql:
    """The statements that make a DuckDB session ready on the lake: the storage secret when its files are
    in object storage (from dlt's configuration, scoped to the data path the catalog keeps), spatial loaded
    (GEOMETRY, ST_*), the lake attached read-only (its data path comes from the catalog) and in use, in
    `default_schema` (the marts of an account) when the lake has it."""
    statements, secrets = ["LOAD spatial"], []
    data_path = store.data_path if is_remote(store.data_path) else None
    schemas: set[str] = set()
    if (data_path is None and store.catalog_on_postgres) or (default_schema is not None and store.exists()):
        with store.connect(read_only=True) as con:
            stored = lake_data_path(con)
            schemas = {name for (name,) in con.execute(
                "select schema_name from duckdb_schemas() where database_name = current_database()").fetchall()}  # fmt: skip
        if data_path is None and store.catalog_on_postgres:
            data_path = stored if is_remote(stored) else None
    if data_path is not None:
        secret_statements, secrets = storage_secret_statements(data_path)
        statements = ["LOAD httpfs", *secret_statements, *statements]
    if store.catalog_on_postgres and (password := catalog_password(store.catalog)):
        secrets = [*secrets, password]
    use = f"{LAKE_NAME}.{default_schema}" if default_schema in schemas else LAKE_NAME
    return SessionSql([*statements, store.attach_sql(read_only=True), f"USE {use}"], secrets)


def find_duckdb_cli() -> Path:
    """The `duckdb` executable: the one beside this Python (the venv's bin, where `duckdb-cli` puts it),
    else the first on PATH; checked to be the same DuckDB version as the Python package, because the
    bundled extension binaries are built for exactly that version."""
    beside = Path(sys.executable).parent / CLI_NAME
    found = beside if beside.is_file() and os.access(beside, os.X_OK) else None
    if found is None and (on_path := shutil.which(CLI_NAME)):
        found = Path(on_path)
    if found is None:
        raise ConfigurationError(
            f"The DuckDB command line ({CLI_NAME}) is not installed beside {sys.executable} nor on PATH: "
            "run `uv sync --frozen` (it installs duckdb-cli), or use --print-sql with your own DuckDB."
        )
    version = subprocess.run(
        [str(found), "-version"], capture_output=True, text=True, timeout=60
    ).stdout.split()
    wanted = f"v{duckdb.__version__}"
    if not version or version[0] != wanted:
        raise ConfigurationError(
            f"{found} is DuckDB {version[0] if version else '(unknown version)'}, the lake's extensions are for "
            f"{wanted}: run `uv sync --frozen`, or use --print-sql with a DuckDB of that version."
        )
    return found


@contextmanager
def session_command(
    store: WarehouseStore, cli: Path, *, sql: str | None = None, mode: str | None = None,
    default_schema: str | None = ANALYTICS_SCHEMA,
) -> Iterator[list[str]]:
    """The command line that opens the session (in `default_schema` when the lake has it): interactive, or
    with `sql` one query run and printed (stopping at the first error, the user's ~/.duckdbrc skipped) in
    `mode` (box, csv, json, ...). With secrets, the statements are in an owner-only init file (in place of
    ~/.duckdbrc) for the block."""
    if mode is not None and mode not in OUTPUT_MODES:
        raise ConfigurationError(f"Unknown output mode {mode!r}: use one of {', '.join(OUTPUT_MODES)}.")
    ready = session_sql(store, default_schema)
    command = [str(cli), ":memory:"]
    with tempfile.TemporaryDirectory(prefix="lake-session-") as folder:  # created 0700: only its owner reads it
        if ready.secrets:
            init = Path(folder) / "init.sql"
            lines = [f"{statement};" for statement in (OFFLINE_STATEMENT, *ready.statements)]
            # the statements' own results (CREATE SECRET's "Success") are not the user's output
            init.write_text("\n".join([".output /dev/null", *lines, ".output", ""]))
            command += ["-init", str(init)]
        elif sql is not None:
            command.append("-no-init")
        if sql is not None:
            command.append("-bail")
        if mode is not None:
            command.append(f"-{mode}")
        if not ready.secrets:
            for statement in (OFFLINE_STATEMENT, *ready.statements):
                command += ["-cmd", statement]
        if sql is not None:
            command += ["-c", sql]
        yield command


def run_session(store: WarehouseStore, *, sql: str | None = None, mode: str | None = None,
                default_schema: str | None = ANALYTICS_SCHEMA) -> int:
    """Open the session (or run `sql`) in `default_schema` (when the lake has it) and return the command
    line's exit code. The lake must exist and the extensions are installed from their wheels first, so the
    session starts offline."""
    store.require_exists()
    cli = find_duckdb_cli()
    ensure_bundled_extensions()  # where the command line finds them
    with session_command(store, cli, sql=sql, mode=mode, default_schema=default_schema) as command:
        if sql is not None:
            return subprocess.run(command, check=False).returncode
        # Ctrl-C cancels the query in DuckDB's shell; it must not end this process underneath it.
        previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
        try:
            return subprocess.run(command, check=False).returncode
        finally:
            signal.signal(signal.SIGINT, previous)


def print_sql(store: WarehouseStore, default_schema: str | None = ANALYTICS_SCHEMA) -> str:
    """The statements for a user's own DuckDB (the same version, with the ducklake, sqlite (or postgres
    and httpfs) and spatial extensions installed: `lake session` installs them offline), one a line;
    secrets (the catalog's password, the storage keys) are shown as `***`, to be filled in by hand."""
    ready = session_sql(store, default_schema)
    lines = [f"{' '.join(statement.split())};" for statement in ready.shown()]
    if ready.secrets:
        lines.insert(0, "-- replace each *** with your own password or key before running these")
    return "\n".join(lines)
