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
pytestmark = pytest.mark.slow


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
