"""Helpers for the deploy/ tests: where the deployment files are, and deploy/Dockerfile read as
instructions (continuation lines joined, comments dropped), so the tests take the image's commands from
the Dockerfile itself and cannot drift from it."""

from __future__ import annotations

import shlex
from dataclasses import dataclass
from pathlib import Path

import yaml

from tests.support import REPO

ROOT = REPO
DEPLOY = ROOT / "deploy"
DOCKERFILE = DEPLOY / "Dockerfile"
DOCKERIGNORE = DEPLOY / "Dockerfile.dockerignore"
INSTANCE_YAML = DEPLOY / "dagster.yaml"
HELM_VALUES = DEPLOY / "helm" / "values.yaml"
ACCOUNT_TAG = "ocean_tracking/account"
# Dagster's own tag on every run of a partition, however launched: with OCEAN_TRACKING_ACCOUNTS the partitions
# are the accounts (assets/accounts.py), so it is the account of every run, UI launches and backfills included.
PARTITION_TAG = "dagster/partition"
# The queue's limits in both deployments (and the root dagster.yaml): one run in progress per account.
RUN_TAG_LIMITS = [{"key": tag, "value": {"applyLimitPerUniqueValue": True}, "limit": 1} for tag in (PARTITION_TAG, ACCOUNT_TAG)]


@dataclass(frozen=True)
class Instruction:
    """One Dockerfile instruction: its keyword (upper case) and its arguments as written."""

    keyword: str
    arguments: str

    def run_command(self) -> str:
        """A RUN's shell command without its leading flags (`--mount=...`)."""
        assert self.keyword == "RUN", self
        words = self.arguments.split()
        while words and words[0].startswith("--"):
            words.pop(0)
        return " ".join(words)


def dockerfile_instructions(path: Path = DOCKERFILE) -> list[Instruction]:
    """The Dockerfile's instructions in order (parser directives and comments left out)."""
    instructions: list[Instruction] = []
    pending = ""
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if not pending and (not line or line.startswith("#")):
            continue
        if pending and line.startswith("#"):  # a comment inside a continued instruction
            continue
        if line.endswith("\\"):
            pending += line[:-1] + " "
            continue
        full = (pending + line).strip()
        pending = ""
        keyword, _, arguments = full.partition(" ")
        instructions.append(Instruction(keyword.upper(), arguments.strip()))
    assert not pending, f"{path}: the last instruction ends with a continuation"
    return instructions


def workdir(instructions: list[Instruction]) -> str:
    """The image's working directory (the last WORKDIR)."""
    workdirs = [i.arguments for i in instructions if i.keyword == "WORKDIR"]
    assert workdirs, "the Dockerfile sets no WORKDIR"
    return workdirs[-1]


def copy_sources(instructions: list[Instruction]) -> list[str]:
    """Every path the COPY instructions take from the build context, in order."""
    sources: list[str] = []
    for instruction in instructions:
        if instruction.keyword == "COPY":
            words = [w for w in shlex.split(instruction.arguments) if not w.startswith("--")]
            sources.extend(words[:-1])
    return sources


def env_values(instructions: list[Instruction]) -> dict[str, str]:
    """The ENV settings (`KEY=VALUE` form), later ones winning."""
    values: dict[str, str] = {}
    for instruction in instructions:
        if instruction.keyword == "ENV":
            for word in shlex.split(instruction.arguments):
                key, _, value = word.partition("=")
                values[key] = value
    return values


def load_yaml(path: Path) -> dict:
    """A YAML file as plain data."""
    return yaml.safe_load(path.read_text())
