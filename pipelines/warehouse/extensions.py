"""DuckDB extensions, offline: spatial, and DuckLake with its SQLite catalog.

`INSTALL <name>` downloads from DuckDB's extension repository, which production hosts behind firewalls
and CI cannot reach, and DuckDB autoloads (and by default auto-installs) `ducklake` and `sqlite_scanner`
the moment anything attaches a lake, dlt's loader included. The `duckdb-extension-*` wheels ship DuckDB's
own signed binaries, so we install those into DuckDB's extension directory (`INSTALL '<path>'` copies a
local file, no network) and turn auto-install off: a missing binary is then a clear error, never a
download that hangs. The DuckDB command line finds the same binaries, so the analysts' CLI works offline.
"""

from __future__ import annotations

import threading
from functools import cache
from pathlib import Path

import duckdb

# What every connection we or dlt open is configured with: never fetch an extension from the network.
OFFLINE_CONFIG = {"autoinstall_known_extensions": False}

# extension name -> the Python package (wheel) that ships its binary
BUNDLED = {
    "spatial": "duckdb_extension_spatial",
    "ducklake": "duckdb_extension_ducklake",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
}
_installed = threading.Lock()
_done: set[str] = set()


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


def install_bundled_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Put the bundled binaries in DuckDB's extension directory unless the same version is there; once
    a process. After this, `ATTACH 'ducklake:...'` (ours or dlt's) and `LOAD spatial` work offline."""
    with _installed:
        missing = [name for name in BUNDLED if name not in _done]
        if not missing:
            return
        rows = con.execute(
            "select extension_name, extension_version from duckdb_extensions() where installed"
        ).fetchall()
        present = {name for name, _version in rows}
        for name in missing:
            if name not in present:
                con.execute(f"force install '{bundled_extension_path(name)}'")
            _done.add(name)


def load_spatial(con: duckdb.DuckDBPyConnection) -> None:
    """Make ST_* functions (lengths, distances, validity) and the GEOMETRY type available here."""
    con.execute(f"load '{bundled_extension_path('spatial')}'")


def offline_connection(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect` with auto-install off, the bundled extensions installed and spatial loaded."""
    con = duckdb.connect(database, read_only=read_only, config=OFFLINE_CONFIG)
    try:
        install_bundled_extensions(con)
        load_spatial(con)
    except Exception:
        con.close()
        raise
    return con
