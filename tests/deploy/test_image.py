"""The image's environment loads the code location: deploy/Dockerfile's own `uv sync` and `dbt parse`
commands (read from the file, so the test and the image cannot drift), run for real in a clean folder
holding only what the Dockerfile copies, give an environment whose Python imports `assets.definitions`
from that folder, has the production extras and none of the dev group, and passes
`dagster definitions validate` for the module the image's default command serves.

No Docker daemon is needed: the commands run with the project's uv (.tools/bin/uv, the version the image
pins) against this interpreter, with the uv cache making the install quick."""

from __future__ import annotations

import json
import os
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.deploy import ROOT, copy_sources, dockerfile_instructions, workdir

pytestmark = pytest.mark.slow

UV = ROOT / ".tools" / "bin" / "uv"
CHECK = """
import importlib.util, json, sys
import assets.definitions as location
print(json.dumps({
    "file": location.__file__,
    "jobs": sorted(job.name for job in location.defs.jobs),
    "assets": len(location.defs.resolve_all_asset_keys()),
    "present": {m: importlib.util.find_spec(m) is not None
                for m in ("dagster_k8s", "dagster_postgres", "psycopg2", "dbt.adapters.postgres", "pytest", "ruff")},
}))
"""


def _in_project(command: str, image_workdir: str, project: Path) -> list[str]:
    """A Dockerfile RUN command as arguments, its absolute paths under the image's WORKDIR moved to `project`."""
    prefix = image_workdir.rstrip("/") + "/"
    return [str(project / word[len(prefix):]) if word.startswith(prefix) else word for word in shlex.split(command)]


@pytest.fixture(scope="module")
def image_environment(tmp_path_factory) -> Path:
    """A clean folder built the way deploy/Dockerfile builds /app: its COPY sources, then each of its
    `uv sync` and `dbt parse` RUN lines in order. Returns the folder (its environment in `.venv`)."""
    assert UV.exists(), f"{UV} missing: run `bash scripts/bootstrap.sh` first"
    instructions = dockerfile_instructions()
    image_workdir = workdir(instructions)
    project = tmp_path_factory.mktemp("image") / "app"
    project.mkdir()
    for source in copy_sources(instructions):
        origin = ROOT / source
        if origin.is_dir():
            shutil.copytree(origin, project / source, ignore=shutil.ignore_patterns("__pycache__", "target", "logs"))
        else:
            shutil.copy2(origin, project / source)
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "PYTHONPATH", "UV_PROJECT_ENVIRONMENT"}}
    env.update({
        "UV_PYTHON_DOWNLOADS": "never",
        "UV_PROJECT_ENVIRONMENT": str(project / ".venv"),
        "UV_NO_PROGRESS": "1",
        "DBT_SEND_ANONYMOUS_USAGE_STATS": "false",
    })
    steps = [i.run_command() for i in instructions if i.keyword == "RUN"]
    steps = [step for step in steps if step.startswith("uv sync") or "dbt parse" in step]
    assert [s.split()[0] for s in steps][:2] == ["uv", "uv"] and "dbt parse" in steps[-1], steps
    for step in steps:
        args = _in_project(step, image_workdir, project)
        if args[0] == "uv":
            args = [str(UV), *args[1:], "--python", sys.executable]
        result = subprocess.run(args, cwd=project, env=env, capture_output=True, text=True, timeout=900)
        assert result.returncode == 0, f"{step}\n{result.stdout[-3000:]}\n{result.stderr[-3000:]}"
    return project


def test_the_image_environment_imports_the_code_location(image_environment, tmp_path):
    """The environment's Python, started outside the folder with no PYTHONPATH, imports
    `assets.definitions` from the folder (the editable install), with the jobs the repository defines,
    the production extras present and the dev group absent."""
    python = image_environment / ".venv" / "bin" / "python"
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env.update({"DAGSTER_HOME": str(tmp_path), "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "data")})
    result = subprocess.run([str(python), "-c", CHECK], cwd=tmp_path, env=env, capture_output=True, text=True,
                            timeout=300)  # fmt: skip
    assert result.returncode == 0, result.stderr[-3000:]
    report = json.loads(result.stdout.strip().splitlines()[-1])
    assert Path(report["file"]).is_relative_to(image_environment), report["file"]
    assert {"full_sync", "refresh_tracking_and_maps", "lake_maintenance"} <= set(report["jobs"])
    assert report["assets"] > 20
    assert report["present"] == {"dagster_k8s": True, "dagster_postgres": True, "psycopg2": True,
                                 "dbt.adapters.postgres": True, "pytest": False, "ruff": False}  # fmt: skip
    assert (image_environment / "sql" / "target" / "manifest.json").exists()


def test_dagster_validates_the_module_the_image_serves(image_environment, tmp_path):
    """`dagster definitions validate` with the image's `-m` module (from the Dockerfile's CMD) and the
    environment's dagster loads the code location without error."""
    cmd = [i.arguments for i in dockerfile_instructions() if i.keyword == "CMD"][-1]
    words = json.loads(cmd)
    module = words[words.index("-m") + 1]
    env = {key: value for key, value in os.environ.items() if key not in {"VIRTUAL_ENV", "PYTHONPATH"}}
    env.update({"DAGSTER_HOME": str(tmp_path), "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "data")})
    (tmp_path / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    dagster = image_environment / ".venv" / "bin" / "dagster"
    result = subprocess.run([str(dagster), "definitions", "validate", "-m", module], cwd=tmp_path, env=env,
                            capture_output=True, text=True, timeout=300)  # fmt: skip
    assert result.returncode == 0, (result.stdout + result.stderr)[-3000:]
