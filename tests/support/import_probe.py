"""What importing the Dagster code location does, seen from inside a fresh interpreter: the script prints the
files it opened for writing, the databases and sockets it connected to, and the heavy libraries it imported."""

# Run with `python -c IMPORT_PROBE`; its last line of output is JSON: {"events": [...], "heavy": [...]}.
IMPORT_PROBE = r"""
import json, os, sys
events = []
WRITE_FLAGS = os.O_WRONLY | os.O_RDWR | os.O_CREAT | os.O_APPEND
def audit(event, args):
    if event == "open" and isinstance(args[0], (str, bytes)):
        path, mode, flags = args
        writes = (mode and any(c in str(mode) for c in "wax+")) or (isinstance(flags, int) and flags & WRITE_FLAGS)
        if writes and path != os.devnull:
            events.append(f"open for writing: {path}")
    elif event == "sqlite3.connect":
        events.append(f"sqlite3.connect: {args[0]}")
    elif event == "socket.connect":
        events.append(f"connect: {args[1]}")
sys.addaudithook(audit)
import duckdb
def refuse(*args, **kwargs):
    events.append(f"duckdb.connect{args}")
    raise RuntimeError("no database at import")
duckdb.connect = refuse
import assets.definitions
# requests is left out: dagster_dbt imports it (the models' assets are dagster-dbt's `@dbt_assets`)
heavy = sorted(m for m in ("dlt", "geopandas", "matplotlib", "pandas", "pyarrow", "shapely") if m in sys.modules)
print(json.dumps({"events": events, "heavy": heavy}))
"""
