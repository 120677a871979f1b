"""A service that accepts connections and never answers: `python -m pipelines sync`, with the default
timeouts, attempts and request deadline, fails within 2 minutes of wall time (process start included) with
one line on stderr, exit code 2, no traceback and no key."""

from __future__ import annotations

import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pipelines.settings import ENV_PREFIX
from tests.conftest import FULL_KEY
from tests.e2e.conftest import cli_env

pytestmark = [pytest.mark.faults, pytest.mark.slow]

LIMIT_SECONDS = 120
RETRY_KNOBS = ("CONNECT_TIMEOUT", "READ_TIMEOUT", "MAX_ATTEMPTS", "BACKOFF_FACTOR", "MAX_RETRY_DELAY",
               "REQUEST_DEADLINE")


@contextmanager
def silent_server() -> Iterator[tuple[int, list[socket.socket]]]:
    """A TCP server on loopback that accepts every connection, reads nothing, answers nothing and keeps the
    connection open; yields its port and the connections it accepted so far."""
    listener = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def serve() -> None:
        listener.settimeout(0.1)
        while not stop.is_set():
            try:
                accepted.append(listener.accept()[0])
            except TimeoutError:
                continue
            except OSError:
                return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    try:
        yield listener.getsockname()[1], accepted
    finally:
        stop.set()
        thread.join(5)
        for connection in accepted:
            connection.close()
        listener.close()


def test_a_hung_service_fails_the_sync_within_two_minutes_in_one_line(tmp_path):
    with silent_server() as (port, accepted):
        env = cli_env(f"http://127.0.0.1:{port}/v2", tmp_path, window=60.0)
        for knob in RETRY_KNOBS:  # the defaults are what is under test
            env.pop(f"{ENV_PREFIX}{knob}", None)
        command = [sys.executable, "-m", "pipelines", "sync", "--no-progress"]
        started = time.monotonic()
        # cwd: no .dlt/config.toml of the project (or the developer's) can change a default
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=LIMIT_SECONDS + 60)
        took = time.monotonic() - started
        connections = len(accepted)

    assert done.returncode == 2, done.stdout + done.stderr
    assert took < LIMIT_SECONDS, f"{took:.0f} s"
    assert connections, "the sync never reached the silent server"
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), done.stderr
    assert "not answering" in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert FULL_KEY not in done.stdout + done.stderr
