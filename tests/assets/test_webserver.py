"""`dagster-webserver` serves the code location: the ingest keys are in its GraphQL asset graph."""

from __future__ import annotations

import os
import shutil
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from assets.ingest import INGEST_KEYS

ROOT = Path(__file__).resolve().parents[2]
QUERY = "{ assetNodes { assetKey { path } } }"


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@pytest.fixture
def webserver(tmp_path):
    """The webserver as a subprocess in a temporary DAGSTER_HOME holding the project's dagster.yaml
    (its relative storage paths land in tmp_path, the cwd); stopped by its own process group."""
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    port = _free_port()
    env = {
        **os.environ,
        "DAGSTER_HOME": str(tmp_path),
        "PYTHONPATH": os.pathsep.join(filter(None, [str(ROOT), os.environ.get("PYTHONPATH")])),
        "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "data"),  # the default lake and outputs: not in the repo
        "DAGSTER_DISABLE_TELEMETRY": "1",
    }
    bin_dir = Path(sys.executable).parent
    log = (tmp_path / "webserver.log").open("w")
    proc = subprocess.Popen(
        [str(bin_dir / "dagster-webserver"), "-m", "assets.definitions", "-h", "127.0.0.1", "-p", str(port)],
        cwd=tmp_path, env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
    )
    try:
        yield f"http://127.0.0.1:{port}", proc, tmp_path / "webserver.log"
    finally:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=10)
        log.close()


def _asset_paths(url: str, proc, log: Path, timeout: float = 120.0) -> set[tuple[str, ...]]:
    deadline = time.monotonic() + timeout
    last = None
    while time.monotonic() < deadline:
        assert proc.poll() is None, log.read_text()[-3000:]
        try:
            response = requests.post(f"{url}/graphql", json={"query": QUERY}, timeout=10)
            body = response.json()
            nodes = (body.get("data") or {}).get("assetNodes") or []
            if nodes:
                return {tuple(node["assetKey"]["path"]) for node in nodes}
            last = body
        except (requests.ConnectionError, ValueError) as error:
            last = error
        time.sleep(0.5)
    raise AssertionError(f"no asset graph within {timeout}s: {last}\n{log.read_text()[-3000:]}")


def test_webserver_serves_the_ingest_asset_graph(webserver):
    url, proc, log = webserver
    paths = _asset_paths(url, proc, log)
    assert {tuple(key.path) for key in INGEST_KEYS} <= paths


def _session_alive(session_id: int) -> list[int]:
    """Pids of live (not zombie) processes in a session."""
    pids = []
    for status in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = status.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[3]) == session_id and fields[0] != "Z":  # fields: state, ppid, pgrp, session
            pids.append(int(status.parent.name))
    return pids


@pytest.mark.slow
def test_dagster_dev_started_in_the_background_stops_on_sigterm_and_leaves_nothing(tmp_path):
    # the condition that made `dagster dev &` unstoppable: SIGINT inherited as ignored
    shutil.copy(ROOT / "dagster.yaml", tmp_path / "dagster.yaml")
    port = _free_port()
    env = {**os.environ, "DAGSTER_HOME": str(tmp_path), "OCEAN_TRACKING_DATA_DIR": str(tmp_path / "data")}
    with (tmp_path / "dev.log").open("w") as log:
        proc = subprocess.Popen(
            ["bash", str(ROOT / "scripts" / "dagster-dev"), "-h", "127.0.0.1", "-p", str(port)],
            env=env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_IGN),
        )
    try:
        _asset_paths(f"http://127.0.0.1:{port}", proc, tmp_path / "dev.log")
        proc.send_signal(signal.SIGTERM)
        assert proc.wait(timeout=60) is not None
        deadline = time.monotonic() + 30
        while _session_alive(proc.pid) and time.monotonic() < deadline:
            time.sleep(0.5)
        assert not _session_alive(proc.pid), (tmp_path / "dev.log").read_text()[-2000:]
        assert "Dagster services shut down" in (tmp_path / "dev.log").read_text()
    finally:
        if _session_alive(proc.pid):
            os.killpg(proc.pid, signal.SIGKILL)
