"""A service that accepts connections and never answers: `python -m pipelines sync` fails within its request
deadline (process start included) with one line on stderr, exit code 2, no traceback and no key.

The process runs with a short deadline and timeouts, set the way a user sets them
(`SOURCES__OCEAN_TRACKING__REQUEST_DEADLINE`, `..._CONNECT_TIMEOUT`, `..._READ_TIMEOUT`), so the proof takes
seconds; that the defaults keep such a sync within two minutes is the same bound on the default settings."""

from __future__ import annotations

import dataclasses
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager

import pytest

from pipelines.api.config import Settings
from pipelines.settings import ENV_PREFIX
from tests.support.sandboxes import FULL_KEY
from tests.support.syncs import cli_env

pytestmark = pytest.mark.faults

LIMIT_SECONDS = 120  # what a hung service may cost a sync with the default settings
# What a process's start, dlt's setup and the error's report may add to the request deadline.
STARTUP_ALLOWANCE_SECONDS = 30
SHORT_DEADLINE = {"CONNECT_TIMEOUT": 1.0, "READ_TIMEOUT": 2.0, "REQUEST_DEADLINE": 6.0}
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


def test_the_default_deadline_keeps_a_hung_sync_within_two_minutes():
    # a request stops retrying when its next attempt could end past the deadline (RetryingClient._stop), so a
    # hung service fails the sync's first request within the deadline: the process test below shows it
    defaults = {f.name: f.default for f in dataclasses.fields(Settings)}
    assert defaults["connect_timeout"] + defaults["read_timeout"] <= defaults["request_deadline"]
    assert defaults["request_deadline"] + STARTUP_ALLOWANCE_SECONDS <= LIMIT_SECONDS


@pytest.mark.slow
@pytest.mark.serial(reason="asserts a bound on wall time")
def test_a_hung_service_fails_the_sync_within_its_deadline_in_one_line(tmp_path):
    with silent_server() as (port, accepted):
        env = cli_env(f"http://127.0.0.1:{port}/v2", tmp_path, window=60.0)
        for knob in RETRY_KNOBS:  # only the deadline and timeouts below are set: the rest are the defaults
            env.pop(f"{ENV_PREFIX}{knob}", None)
        env.update({f"{ENV_PREFIX}{knob}": str(value) for knob, value in SHORT_DEADLINE.items()})
        command = [sys.executable, "-m", "pipelines", "sync", "--no-progress"]
        started = time.monotonic()
        # cwd: no .dlt/config.toml of the project (or the developer's) can change a default
        done = subprocess.run(command, env=env, cwd=tmp_path, capture_output=True, text=True,
                              timeout=LIMIT_SECONDS + 60)
        took = time.monotonic() - started
        connections = len(accepted)

    assert done.returncode == 2, done.stdout + done.stderr
    limit = SHORT_DEADLINE["REQUEST_DEADLINE"] + STARTUP_ALLOWANCE_SECONDS
    assert took < limit, f"{took:.0f} s"
    assert connections, "the sync never reached the silent server"
    lines = done.stderr.splitlines()
    assert len(lines) == 1 and lines[0].strip(), done.stderr
    assert "not answering" in lines[0], lines[0]
    assert "Traceback" not in done.stderr
    assert FULL_KEY not in done.stdout + done.stderr
