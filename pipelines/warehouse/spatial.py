"""Load DuckDB's spatial extension offline.

`INSTALL spatial` downloads from the extension repository, which production hosts behind firewalls and
CI here cannot reach. The `duckdb-extension-spatial` wheel ships DuckDB's own signed binary, so loading
it by path works anywhere with no unsigned-extension flag.
"""

from __future__ import annotations

from functools import cache
from pathlib import Path

import duckdb


@cache
def spatial_extension_path() -> Path:
    """Path of the spatial binary bundled for the installed DuckDB version."""
    import duckdb_extension_spatial

    package_dir = Path(duckdb_extension_spatial.__path__[0])
    wanted = package_dir / "extensions" / f"v{duckdb.__version__}" / "spatial.duckdb_extension"
    if wanted.exists():
        return wanted
    found = sorted(package_dir.glob("extensions/*/spatial.duckdb_extension"))
    if not found:
        raise RuntimeError(
            "duckdb-extension-spatial is installed without a spatial binary; reinstall it with the "
            f"version matching duckdb {duckdb.__version__}."
        )
    return found[-1]


def load_spatial(con: duckdb.DuckDBPyConnection) -> None:
    """Make ST_* functions (lengths, distances, validity) available on this connection."""
    con.execute(f"load '{spatial_extension_path()}'")
