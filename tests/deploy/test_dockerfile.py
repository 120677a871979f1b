"""deploy/Dockerfile is lint-clean (hadolint), runs what the brief of the image promises (uv pinned as in
scripts/bootstrap.sh, the locked sync with the production extras, the dbt manifest, a non-root user, the
gRPC code server of pyproject's code location), and its ignore file lets in exactly what it copies."""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from tests.support.deploy import (
    DOCKERFILE,
    DOCKERIGNORE,
    ROOT,
    copy_sources,
    dockerfile_instructions,
    env_values,
    workdir,
)

HADOLINT = Path(sys.executable).parent / "hadolint"
SYNC = "uv sync --frozen --no-dev --extra postgres --extra distributed"


def _hadolint(path: Path) -> subprocess.CompletedProcess:
    return subprocess.run([str(HADOLINT), "--no-color", str(path)], capture_output=True, text=True, timeout=120)


def test_hadolint_passes_on_the_dockerfile():
    """hadolint reports nothing on deploy/Dockerfile (no rule is ignored anywhere in it)."""
    result = _hadolint(DOCKERFILE)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.strip() == ""
    assert "hadolint ignore" not in DOCKERFILE.read_text()


def test_hadolint_does_fail_on_a_bad_dockerfile(tmp_path):
    """The lint above can fail: an unpinned base image and an unpinned apt install are reported."""
    bad = tmp_path / "Dockerfile"
    bad.write_text("FROM python:latest\nRUN apt-get update && apt-get install -y curl\n")
    result = _hadolint(bad)
    assert result.returncode != 0
    assert "DL3007" in result.stdout  # `latest`
    assert "DL3008" in result.stdout  # apt versions not pinned


def test_the_base_image_and_uv_are_pinned_as_bootstrap_pins_them():
    """FROM names a Python 3.11 slim image by an exact tag, and uv is installed with pip at the version
    scripts/bootstrap.sh installs."""
    instructions = dockerfile_instructions()
    base = [i.arguments for i in instructions if i.keyword == "FROM"]
    assert len(base) == 1 and re.fullmatch(r"python:3\.11\.\d+-slim-\w+", base[0]), base
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    uv_version = re.search(r'^uv_version="([^"]+)"', bootstrap, re.MULTILINE).group(1)
    runs = [i.run_command() for i in instructions if i.keyword == "RUN"]
    assert any(re.search(rf'pip install .*"?uv=={re.escape(uv_version)}"?', run) for run in runs), runs
    assert env_values(instructions)["UV_PYTHON_DOWNLOADS"] == "never"


def test_the_sync_is_locked_without_dev_and_with_the_production_extras():
    """The image installs from uv.lock (`--frozen`), the dependencies first (a layer that only the lock
    invalidates, copied before the code), then the project, with the `postgres` and `distributed` extras."""
    instructions = dockerfile_instructions()
    syncs = [(n, i.run_command()) for n, i in enumerate(instructions) if i.keyword == "RUN" and "uv sync" in i.arguments]
    assert [cmd for _, cmd in syncs] == [f"{SYNC} --no-install-project", SYNC]
    first_code_copy = next(n for n, i in enumerate(instructions) if i.keyword == "COPY" and "pipelines" in i.arguments)
    lock_copy = next(n for n, i in enumerate(instructions) if i.keyword == "COPY" and "uv.lock" in i.arguments)
    assert lock_copy < syncs[0][0] < first_code_copy < syncs[1][0]
    extras = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    assert {"postgres", "distributed"} <= set(extras)


def test_the_image_makes_the_dbt_manifest_as_bootstrap_does():
    """The Dockerfile runs bootstrap.sh's `dbt parse` (same project and profiles folders) after the sync."""
    bootstrap = (ROOT / "scripts" / "bootstrap.sh").read_text()
    expected = re.search(r"dbt (parse .*)$", bootstrap, re.MULTILINE).group(1)
    runs = [i.run_command() for i in dockerfile_instructions() if i.keyword == "RUN"]
    parses = [run for run in runs if "dbt parse" in run]
    assert len(parses) == 1 and parses[0].endswith(f"/.venv/bin/dbt {expected}"), parses


def test_the_image_runs_the_code_server_of_the_project_location_as_a_non_root_user():
    """USER is a non-zero uid, DAGSTER_HOME is set, the gRPC port is exposed and the default command is
    `dagster api grpc` on that port, loading the module pyproject's [tool.dg.project] names."""
    instructions = dockerfile_instructions()
    users = [i.arguments for i in instructions if i.keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert env_values(instructions)["DAGSTER_HOME"].startswith("/")
    module = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dg"]["project"]["code_location_target_module"]
    exposed = [i.arguments for i in instructions if i.keyword == "EXPOSE"]
    cmd = [i.arguments for i in instructions if i.keyword == "CMD"][-1]
    assert cmd == f'["dagster", "api", "grpc", "-m", "{module}", "-h", "0.0.0.0", "-p", "{exposed[0]}"]'
    # the last instructions run as that user: nothing after USER switches back
    assert [i.keyword for i in instructions].index("USER") > max(
        n for n, i in enumerate(instructions) if i.keyword == "RUN"
    )


def test_the_ignore_file_lets_in_exactly_what_the_dockerfile_copies():
    """deploy/Dockerfile.dockerignore excludes everything (`*`: no .venv, .git, data/ in the context) and
    re-includes exactly the paths the COPY lines take, and each of them exists in the repository."""
    lines = [line.strip() for line in DOCKERIGNORE.read_text().splitlines()]
    patterns = [line for line in lines if line and not line.startswith("#")]
    assert patterns[0] == "*"
    included = {p[1:].rstrip("/") for p in patterns if p.startswith("!")}
    copied = {source.rstrip("/") for source in copy_sources(dockerfile_instructions())}
    assert included == copied
    assert all((ROOT / path).exists() for path in copied), copied
    assert {"sql/target/", "sql/logs/"} <= set(patterns)  # built in the image, never copied stale


# ---- the image's environment -----------------------------------------------------------------------------
# The image's environment loads the code location: deploy/Dockerfile's own `uv sync` and `dbt parse` commands
# (read from the file, so the test and the image cannot drift), run for real in a clean folder holding only
# what the Dockerfile copies, give an environment whose Python imports `assets.definitions` from that folder,
# has the production extras and none of the dev group, and passes `dagster definitions validate` for the
# module the image's default command serves.  No Docker daemon is needed: the commands run with the project's
# uv (.tools/bin/uv, the version the image pins) against this interpreter, with the uv cache making the
# install quick.


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


@pytest.mark.slow
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


@pytest.mark.slow
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
