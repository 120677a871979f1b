# Sourced by scripts/demo and scripts/test: installs uv into a private tools venv and syncs the
# locked environment into .venv. Needs only a Python 3.11 interpreter on PATH. Leaves how long each step
# took in install_seconds and dbt_parse_seconds (scripts/test prints them).
set -euo pipefail
repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
cd "$repo_root"

python_bin="${PYTHON:-$(command -v python3.11 || command -v python3)}"
if ! "$python_bin" -c 'import sys; sys.exit(sys.version_info[:2] != (3, 11))'; then
  echo "error: Python 3.11 is required (found $("$python_bin" --version 2>&1)); set PYTHON=/path/to/python3.11" >&2
  exit 1
fi

install_started=$SECONDS
uv_version="0.13.8"
if [ ! -x .tools/bin/uv ] || [ "$(.tools/bin/uv --version | cut -d' ' -f2)" != "$uv_version" ]; then
  "$python_bin" -m venv .tools
  .tools/bin/python -m pip install --quiet --disable-pip-version-check "uv==$uv_version"
fi
export UV_PYTHON_DOWNLOADS=never
# Compiled bytecode, as the image has it (deploy/Dockerfile): every process the demo, the tests and Dagster
# start imports dlt, DuckDB and Dagster, and where PYTHONDONTWRITEBYTECODE is set (this machine, CI) nothing
# is ever cached, so each one would compile them again (1.7 s instead of 0.7 s to import the CLI).
.tools/bin/uv sync --frozen --all-extras --python "$python_bin" --quiet --compile-bytecode
"$repo_root/.venv/bin/python" -m compileall -q -j 0 pipelines assets sandbox demo tests bench scripts >/dev/null
install_seconds=$((SECONDS - install_started))
# The dbt manifest the Dagster definitions load (sql/target/manifest.json): made here, never at import.
parse_started=$SECONDS
.venv/bin/dbt parse --project-dir sql --profiles-dir sql --quiet
dbt_parse_seconds=$((SECONDS - parse_started))
export PATH="$repo_root/.venv/bin:$PATH"
export RUNTIME__DLTHUB_TELEMETRY=false
