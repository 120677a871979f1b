"""deploy/Dockerfile is lint-clean (hadolint), runs what the brief of the image promises (uv pinned as in
scripts/bootstrap.sh, the locked sync with the production extras, the dbt manifest, a non-root user, the
gRPC code server of pyproject's code location), and its ignore file lets in exactly what it copies."""

from __future__ import annotations

import re
import subprocess
import sys
import tomllib
from pathlib import Path

from tests.support.deploy import (
    DOCKERFILE,
    DOCKERIGNORE,
    ROOT,
    copy_sources,
    dockerfile_instructions,
    env_values,
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
    `dagster api grpc` on that port, loading the module pyproject's [tool.dagster] names."""
    instructions = dockerfile_instructions()
    users = [i.arguments for i in instructions if i.keyword == "USER"]
    assert users and users[-1].split(":")[0] not in {"0", "root"}
    assert env_values(instructions)["DAGSTER_HOME"].startswith("/")
    module = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["dagster"]["module_name"]
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
