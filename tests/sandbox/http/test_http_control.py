"""Control endpoints under /_sandbox/ and the CLI's ready line."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from datetime import datetime
from pathlib import Path

import requests

from tests.support.sandbox_http import Client, ok
from tests.support.sandboxes import FULL_KEY, SANDBOX_START

REPO = Path(__file__).resolve().parents[3]


def test_clock_get_and_advance(make_sandbox):
    srv = make_sandbox()
    before = datetime.fromisoformat(requests.get(srv.root_url + "/_sandbox/clock", timeout=5).json()["now"])
    after = requests.post(srv.root_url + "/_sandbox/clock", json={"advance_seconds": 86400}, timeout=5).json()
    delta = datetime.fromisoformat(after["now"]) - before
    assert 86400 <= delta.total_seconds() < 86400 + 60
    for bad in ({"advance_seconds": -1}, {"advance_seconds": "x"}, {}):
        assert requests.post(srv.root_url + "/_sandbox/clock", json=bad, timeout=5).status_code == 400
    assert requests.post(srv.root_url + "/_sandbox/clock", data=b"{", timeout=5).status_code == 400


def test_stats_and_reset(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    for _ in range(3):
        ok(cl.get("/shipments?page[size]=1"))
    cl.s.get(srv.base_url + "/shipments", headers={"Authorization": "Token wrong"}, timeout=5)
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=5).json()
    (fp,) = stats["requests_by_key"]
    assert fp.startswith("key_") and FULL_KEY not in fp
    assert stats["requests_by_key"][fp]["default"] == 3
    assert stats["requests_by_route"]["GET /v2/shipments"] == 3
    assert stats["unauthorized"] == 1
    assert {"rate_limited_total", "faults_served"} <= set(stats)
    reset = requests.post(srv.root_url + "/_sandbox/stats/reset", timeout=5).json()
    assert reset["requests_by_key"] == {} and reset["unauthorized"] == 0


def test_health(sandbox):
    body = requests.get(sandbox.root_url + "/_sandbox/health", timeout=5).json()
    assert body["status"] == "ok" and set(body["accounts"]) >= {"primary", "basic"}


def test_cli_prints_ready_line_and_serves():
    env = {**os.environ, "SANDBOX_RATE_WINDOW": "5"}
    proc = subprocess.Popen([sys.executable, "-m", "sandbox", "--port", "0", "--shipments", "50", "--seed", "3",
                             "--start", SANDBOX_START.isoformat(),
                             "--api-key", "cli-key-123", "--api-key-no-routing", "cli-basic-456",
                             "--revoked-key", "cli-old-789"], cwd=REPO, env=env,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        m = re.search(r"base_url=(\S+/v2) app_url=(\S+/app)", line)
        assert m, line
        assert "api_key=cli-key-123" in line and "api_key_no_routing=cli-basic-456" in line
        base = m.group(1)
        assert requests.get(base + "/shipments", headers={"Authorization": "Token cli-key-123"}, timeout=10).ok
        assert requests.get(base + "/shipments", headers={"Authorization": "Token cli-old-789"},
                            timeout=10).status_code == 401
    finally:  # stopping it is not under test here: its warm-up thread may hold the interpreter a while
        proc.kill()
        proc.wait(60)


def test_cli_generates_a_key_when_none_given():
    proc = subprocess.Popen([sys.executable, "-m", "sandbox", "--port", "0", "--shipments", "50",
                             "--start", SANDBOX_START.isoformat()], cwd=REPO,
                            stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        line = proc.stdout.readline()
        key = re.search(r"api_key=(\S+)", line).group(1)
        base = re.search(r"base_url=(\S+)", line).group(1)
        assert requests.get(base + "/parties", headers={"Authorization": f"Token {key}"}, timeout=10).ok
    finally:  # stopping it is not under test here: its warm-up thread may hold the interpreter a while
        proc.kill()
        proc.wait(60)


def test_a_request_abandoned_mid_body_is_counted_apart(make_sandbox):
    """A client killed while its upload was on the wire: the sandbox processed nothing, so the route's
    count (what the service really handled) leaves it out and `abandoned_by_route` has it."""
    import socket
    import time

    srv = make_sandbox()
    with socket.create_connection(("127.0.0.1", srv.port), timeout=5) as raw:
        raw.sendall(
            b"POST /v2/documents HTTP/1.1\r\nHost: x\r\nContent-Type: application/vnd.api+json\r\n"
            + f"Authorization: Token {FULL_KEY}\r\nContent-Length: 5000\r\n\r\n".encode()
            + b'{"data": {"type": "document"'
        )
        time.sleep(0.3)
    stats = {}
    for _ in range(50):  # the server notices the closed socket on its own schedule
        stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=5).json()
        if stats["abandoned_by_route"]:
            break
        time.sleep(0.1)
    assert stats["abandoned_by_route"] == {"POST /v2/documents": 1}
    assert stats["requests_by_route"].get("POST /v2/documents", 0) == 0
    assert requests.get(srv.base_url + "/documents", headers={"Authorization": f"Token {FULL_KEY}"},
                        timeout=5).json()["data"] == []  # fmt: skip
