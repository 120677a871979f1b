"""Run the real CLI with one hook that SIGKILLs the process at a named moment of a sync.

    python -m tests.support.kill_driver <moment> sync --no-progress

Before the kill the hook writes `<moment>: <what it saw>` to the file named by $KILL_DRIVER_MARKER, so a
test tells "killed at that moment" from "died some other way" and from "the hook never fired".
"""

from __future__ import annotations

import os
import signal
import sys
import threading
from collections.abc import Callable
from typing import Any

MARKER_ENV = "KILL_DRIVER_MARKER"
# of the 211 requests a full sync of the test world sends (one at a time, in a fixed order)
EXTRACT_KILL_AT_REQUEST = 100


def kill(moment: str, detail: str) -> None:
    """Record where the process dies (flushed to disk), then SIGKILL it: no cleanup, no atexit, no finally."""
    with open(os.environ[MARKER_ENV], "w") as marker:
        marker.write(f"{moment}: {detail}\n")
        marker.flush()
        os.fsync(marker.fileno())
    os.kill(os.getpid(), signal.SIGKILL)


def _hook_extract() -> None:
    """Midway through extraction: as the client is about to send its N-th API request."""
    from pipelines.api.client import OceanTrackingClient

    original = OceanTrackingClient._call
    sent = 0
    lock = threading.Lock()

    def call(self: OceanTrackingClient, method: str, url: str, **kwargs: Any) -> Any:
        nonlocal sent
        with lock:
            sent += 1
            if sent == EXTRACT_KILL_AT_REQUEST:
                kill("extract", f"before request {sent}: {method} {url}")
        return original(self, method, url, **kwargs)

    OceanTrackingClient._call = call  # type: ignore[method-assign]


def _hook_extracted() -> None:
    """Between extract and normalize: the extracted package and the new state are committed on disk."""
    import dlt

    def normalize(self: dlt.Pipeline, *args: Any, **kwargs: Any) -> Any:
        kill("extracted", f"extracted packages {list(self.list_extracted_load_packages())}")

    dlt.Pipeline.normalize = normalize  # type: ignore[method-assign]


def _hook_normalize() -> None:
    """Inside normalize: every job file of the package written, the schema and the package not committed."""
    from dlt.normalize.normalize import Normalize

    original = Normalize.map_single

    def map_single(self: Normalize, schema: Any, load_id: str, files: Any) -> Any:
        result = original(self, schema, load_id, files)
        kill("normalize", f"{len(result.file_metrics)} job files written to package {load_id}")

    Normalize.map_single = map_single  # type: ignore[method-assign]


def _hook_normalize_commit() -> None:
    """Inside normalize's commit: the package is moved to the normalized folder, its extracted copy not yet
    deleted (the window dlt logs as "do not kill this process")."""
    from dlt.common.storages import LoadStorage

    original = LoadStorage.commit_new_load_package

    def commit(self: LoadStorage, load_id: str) -> None:
        original(self, load_id)
        kill("normalize_commit", f"package {load_id} committed, its extracted copy still there")

    LoadStorage.commit_new_load_package = commit  # type: ignore[method-assign]


def _hook_load() -> None:
    """Inside load: right after the first merge job (a final table written) is marked completed, while the
    other tables' merges are still to run."""
    from dlt.load.load import Load

    original = Load.complete_jobs

    def complete_jobs(self: Load, load_id: str, jobs: Any, schema: Any) -> Any:
        package = self.load_storage.normalized_packages
        if "complete_job" not in vars(package):
            complete_job = package.complete_job

            def complete_and_maybe_kill(job_load_id: str, file_name: str) -> str:
                moved = complete_job(job_load_id, file_name)
                if file_name.endswith(".sql"):
                    running = len(package.get_load_package_jobs(job_load_id)["started_jobs"])
                    kill("load", f"merge job {file_name} completed, {running} jobs still running")
                return moved

            package.complete_job = complete_and_maybe_kill  # type: ignore[method-assign]
        return original(self, load_id, jobs, schema)

    Load.complete_jobs = complete_jobs  # type: ignore[method-assign]


def _hook_after_load() -> None:
    """After the load returned (the package is loaded), before the geometry view and the models, holding
    the warehouse's writer lock (taken for the view)."""
    import pipelines.sync

    def refresh_views(pipeline, target) -> None:
        kill("after_load", f"before the geometry view of {target.store.place}")

    pipelines.sync.refresh_views = refresh_views


HOOKS: dict[str, Callable[[], None]] = {
    "extract": _hook_extract,
    "extracted": _hook_extracted,
    "normalize": _hook_normalize,
    "normalize_commit": _hook_normalize_commit,
    "load": _hook_load,
    "after_load": _hook_after_load,
}
MOMENTS = tuple(HOOKS)


def main(argv: list[str] | None = None) -> int:
    """Install the hook named by the first argument, then run the CLI with the rest."""
    moment, *cli_args = sys.argv[1:] if argv is None else argv
    HOOKS[moment]()
    from pipelines.cli import main as cli_main

    return cli_main(cli_args)


if __name__ == "__main__":
    sys.exit(main())
