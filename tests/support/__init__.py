"""What the tests share besides fixtures: the servers they start (sandbox, PostgreSQL, S3), syncs and their
readers, copies of lakes, processes that hold a lock, Dagster helpers. Fixtures live in the conftest modules,
which nothing imports; everything a test imports by name comes from here.

- `sandboxes`: the keys, seed and instant every sandbox starts from, starting one, its control endpoints
- `syncs`: a client and a CLI environment pointed at a sandbox, one sync into a lake, reading it back
- `lakes`: where a data folder's lake is, copying a lake, fingerprinting its files
- `shared`: a state built once for the whole run (every xdist worker) under a file lock, handed out read-only
- `suite_order`: the order the parallel phase hands the test modules out in (longest first)
- `holders`: another process holding a DuckDB file, a lake's writer lock or an analyst's session
- `dagster`: the definitions' resources pointed at a sandbox, materializing the models and maps
- `scripted`: a scripted HTTP server, a unit-level double for the client's protocol handling
- `postgres`, `s3`: a real PostgreSQL + PostGIS server and a real S3-compatible server (moto)
- `deploy`: the deployment files read as data
- `load_script` (here): one of `scripts/` imported, to call its functions in the test's process
"""

import importlib.util
from pathlib import Path
from types import ModuleType

REPO = Path(__file__).resolve().parents[2]  # the repository


def load_script(name: str) -> ModuleType:
    """`scripts/<name>.py` as a module (a script, not a package module): its functions, called in process."""
    spec = importlib.util.spec_from_file_location(name, REPO / "scripts" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module
