"""States built once for the whole run and shared read-only: the first test (on any xdist worker) that asks for
one builds it under a file lock, the others wait for it and get the same folder. A test that reads gets the
shared folder; a test that writes takes its own copy (`tests.support.lakes.copy_lake`). What was built is
fingerprinted, and each worker checks at its end that no test wrote into it.

The sandbox world these states come from is frozen and seeded (`tests.support.sandboxes.FROZEN_WORLD`), so a
state one worker built from its own sandbox is the state any worker's sandbox would give."""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Callable
from pathlib import Path

import pytest

from pipelines.warehouse.connections import exclusive_file_lock
from tests.support.lakes import fingerprint

BUILT = ".built.json"  # in a finished state's folder: the fingerprint of what was built
# A state builds in tens of seconds; on a loaded 2-core machine a waiting worker may wait minutes.
BUILD_WAIT_SECONDS = 1800.0


def run_root(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The folder every worker of this run shares: the parent of the workers' own temporary folders under
    xdist, this session's temporary folder otherwise."""
    base = tmp_path_factory.getbasetemp()
    return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def shared_state(tmp_path_factory: pytest.TempPathFactory, name: str, build: Callable[[Path], None]) -> Path:
    """The folder of the shared state `name`, built by `build(folder)` the first time any worker of the run
    asks for it; a failed build leaves nothing, and the next asker builds again."""
    root = run_root(tmp_path_factory) / "shared"
    folder = root / name
    with exclusive_file_lock(root / f"{name}.lock", f"the shared test state {name}", timeout=BUILD_WAIT_SECONDS):
        if not (folder / BUILT).exists():
            shutil.rmtree(folder, ignore_errors=True)
            folder.mkdir(parents=True)
            try:
                build(folder)
            except BaseException:
                shutil.rmtree(folder, ignore_errors=True)
                raise
            (folder / BUILT).write_text(json.dumps(fingerprint(folder)))
    return folder


def changed_files(folder: Path) -> list[str]:
    """The files of a shared state that differ from what was built (added, removed or rewritten): empty
    unless a test wrote into it."""
    built = json.loads((folder / BUILT).read_text())
    now = {path: digest for path, digest in fingerprint(folder).items() if path != BUILT}
    return sorted(path for path in built.keys() | now.keys() if built.get(path) != now.get(path))
