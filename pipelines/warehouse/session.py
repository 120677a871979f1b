"""The analysts' session on the lake: DuckDB's own command line, ready to query.

`lake session` runs the `duckdb` executable of the `duckdb-cli` package (locked to the same DuckDB as the
Python package, so the bundled extension binaries fit it) with auto-install off, spatial loaded and the
lake attached READ_ONLY as `lake` and in use: `select * from ocean_tracking.containers` works at once. A
read-only session never waits for a sync and never blocks one (see `store.py`). The extensions come from
their PyPI wheels (`install_bundled_extensions`), so nothing is downloaded, here or in a firewalled CI.
"""

from __future__ import annotations

import os
import shutil
import signal
import subprocess
import sys
from pathlib import Path

import duckdb

from pipelines.errors import ConfigurationError
from pipelines.settings import LAKE_NAME
from pipelines.warehouse.extensions import offline_connection
from pipelines.warehouse.store import WarehouseStore

CLI_NAME = "duckdb"
# What the command line is told first: never fetch an extension (they are installed from the wheels).
OFFLINE_STATEMENT = "SET autoinstall_known_extensions = false"
OUTPUT_MODES = ("box", "csv", "json", "jsonlines", "line", "list", "markdown", "table")


def session_statements(store: WarehouseStore) -> list[str]:
    """The statements that make a DuckDB session ready on the lake: spatial loaded (GEOMETRY, ST_*), the
    lake attached read-only (its data path comes from the catalog) and in use. Also what `--print-sql`
    shows, for a user's own DuckDB."""
    return ["LOAD spatial", store.attach_sql(read_only=True), f"USE {LAKE_NAME}"]


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


def session_command(
    store: WarehouseStore, cli: Path, *, sql: str | None = None, mode: str | None = None
) -> list[str]:
    """The command line that opens the session: interactive, or with `sql` one query run and printed
    (stopping at the first error, the user's ~/.duckdbrc skipped) in `mode` (box, csv, json, ...)."""
    command = [str(cli), ":memory:"]
    if sql is not None:
        command += ["-no-init", "-bail"]
    if mode is not None:
        if mode not in OUTPUT_MODES:
            raise ConfigurationError(f"Unknown output mode {mode!r}: use one of {', '.join(OUTPUT_MODES)}.")
        command.append(f"-{mode}")
    for statement in (OFFLINE_STATEMENT, *session_statements(store)):
        command += ["-cmd", statement]
    if sql is not None:
        command += ["-c", sql]
    return command


def run_session(store: WarehouseStore, *, sql: str | None = None, mode: str | None = None) -> int:
    """Open the session (or run `sql`) and return the command line's exit code. The lake must exist and
    the extensions are installed from their wheels first, so the session starts offline."""
    store.require_exists()
    cli = find_duckdb_cli()
    offline_connection().close()  # installs the bundled extensions where the command line finds them
    command = session_command(store, cli, sql=sql, mode=mode)
    if sql is not None:
        return subprocess.run(command, check=False).returncode
    # Ctrl-C cancels the query in DuckDB's shell; it must not end this process underneath it.
    previous = signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        return subprocess.run(command, check=False).returncode
    finally:
        signal.signal(signal.SIGINT, previous)


def print_sql(store: WarehouseStore) -> str:
    """The statements for a user's own DuckDB (the same version, with the ducklake, sqlite and spatial
    extensions installed: `lake session` installs them offline), one a line."""
    lines = [f"{statement};" for statement in session_statements(store)]
    return "\n".join(lines)
