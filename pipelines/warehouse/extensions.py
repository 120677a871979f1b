"""DuckDB extensions, offline: spatial, and DuckLake with its catalogs (SQLite, PostgreSQL) and S3 storage.

`INSTALL <name>` downloads from DuckDB's extension repository, which production hosts behind firewalls
and CI cannot reach, and DuckDB autoloads (and by default auto-installs) `ducklake` and `sqlite_scanner`
the moment anything attaches a lake, dlt's loader included. The `duckdb-extension-*` wheels ship DuckDB's
own signed binaries, so we install those into DuckDB's extension directory (`INSTALL '<path>'` copies a
local file, no network) and turn auto-install off: a missing binary is then a clear error, never a
download that hangs. The DuckDB command line finds the same binaries, so the analysts' CLI works offline.

Several processes starting at once on a fresh machine (a parallel test run, a Dagster run worker beside a
CLI sync) would otherwise race: one copies a binary while another finds it half-written (`Extension
".../ducklake.duckdb_extension" not found`). The check-and-install holds the project's one file lock (`locks.exclusive_file_lock`)
in the extension directory, so the second process waits and then finds every binary whole.

The directory is per home folder (`~/.duckdb/extensions`), and a new machine or a Kubernetes pod starts with
an empty one. dlt's own connections (the loader, the state restore, the questions `extract/loaded.py` asks)
autoload `ducklake`, `postgres_scanner` and `httpfs` from it and never install, so `ducklake_target` calls
`ensure_bundled_extensions` before dlt connects: a host that finds the lake already created by another
(and so never opens a connection of ours first) would otherwise fail on `httpfs ... not found`.
"""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path

import duckdb

from pipelines.errors import ConfigurationError
from pipelines.settings import own_spill_directory
from pipelines.warehouse.locks import exclusive_file_lock

# What every connection we or dlt open is configured with: never fetch an extension from the network.
OFFLINE_CONFIG = {"autoinstall_known_extensions": False}


def in_memory_config() -> dict[str, object]:
    """`OFFLINE_CONFIG` for an in-memory database, spilling into a folder of its own (`settings.own_spill_directory`:
    DuckDB's default, `.tmp` in the working directory, crashes two databases that spill into it at once)."""
    return {**OFFLINE_CONFIG, "temp_directory": own_spill_directory()}


# extension name -> the Python package (wheel) that ships its binary
BUNDLED = {
    "spatial": "duckdb_extension_spatial",
    "ducklake": "duckdb_extension_ducklake",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    # the lake across hosts: a PostgreSQL catalog, and its data in S3-compatible object storage
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}
INSTALL_LOCK_NAME = ".ocean-tracking-install.lock"
_installing = threading.Lock()
_installed_in: set[Path] = set()  # extension directories this process found complete


@cache
def bundled_extension_path(name: str) -> Path:
    """Path of the extension's binary in its wheel, for the installed DuckDB version."""
    package = __import__(BUNDLED[name])
    package_dir = Path(package.__path__[0])
    wanted = package_dir / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.exists():
        return wanted
    found = sorted(package_dir.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        wheel = BUNDLED[name].replace("_", "-")
        raise RuntimeError(
            f"{wheel} is installed without a {name} binary; reinstall it with the version matching "
            f"duckdb {duckdb.__version__} (uv sync --frozen)."
        )
    return found[-1]


def extension_directory(con: duckdb.DuckDBPyConnection) -> Path:
    """The folder DuckDB installs extensions under for this connection: the `extension_directory` setting,
    else `<home_directory or $HOME>/.duckdb/extensions` (DuckDB's own default)."""
    configured, home = con.execute(
        "select current_setting('extension_directory'), current_setting('home_directory')"
    ).fetchone()
    if configured:
        return Path(configured)
    return Path(home or Path.home()) / ".duckdb" / "extensions"


def install_bundled_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Put the bundled binaries in DuckDB's extension directory unless they are there; once a process and
    directory, holding the directory's install lock (another process installing meanwhile is waited for).
    After this, `ATTACH 'ducklake:...'` (ours or dlt's, on any catalog and storage) and `LOAD spatial` work
    offline."""
    directory = extension_directory(con)
    with _installing:
        if directory in _installed_in:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigurationError(
                f"DuckDB keeps its extensions in {directory}, which cannot be created ({error.strerror}): "
                "run with HOME set to a folder this user can write."
            ) from None
        lock = directory / INSTALL_LOCK_NAME
        with exclusive_file_lock(lock, f"the DuckDB extension install lock {lock}"):
            rows = con.execute("select extension_name from duckdb_extensions() where installed").fetchall()
            present = {name for (name,) in rows}
            for name in BUNDLED:
                if name not in present:
                    con.execute(f"force install '{bundled_extension_path(name)}'")
        _installed_in.add(directory)


def ensure_bundled_extensions() -> None:
    """Install the bundled binaries where every DuckDB connection of this process looks for them (see
    `install_bundled_extensions`), before connections that cannot install them (dlt's) are opened."""
    with duckdb.connect(config=OFFLINE_CONFIG) as con:
        install_bundled_extensions(con)


def load_spatial(con: duckdb.DuckDBPyConnection) -> None:
    """Make ST_* functions (lengths, distances, validity) and the GEOMETRY type available here."""
    con.execute(f"load '{bundled_extension_path('spatial')}'")


def offline_connection(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect` with auto-install off, the bundled extensions installed and spatial loaded."""
    config = in_memory_config() if database == ":memory:" else OFFLINE_CONFIG  # a file spills beside itself
    con = duckdb.connect(database, read_only=read_only, config=config)
    try:
        install_bundled_extensions(con)
        load_spatial(con)
    except Exception:
        con.close()
        raise
    return con
