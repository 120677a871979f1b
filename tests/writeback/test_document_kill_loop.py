"""Exactly once across crashes: `upload-documents` SIGKILLed at seeded random moments, 20 times over one
20-file folder, then run to completion: every file is one document on the service, none twice, none lost.

The CLI talks to the sandbox through a relay that holds each request and each answer for a few
milliseconds, so kills land in both windows that matter: before a POST reaches the service (the intent must
be settled as absent and re-sent) and after the service created the document but before the answer was
journaled (the intent must be settled as found, never re-sent)."""

from __future__ import annotations

import os
import random
import select
import signal
import socket
import sqlite3
import subprocess
import sys
import threading
import time
from collections import Counter
from contextlib import suppress
from pathlib import Path

import pytest

from tests.support.sandboxes import GENEROUS_LIMITS, SANDBOX_START, api_get, routes
from tests.support.syncs import cli_env

pytestmark = [pytest.mark.slow, pytest.mark.serial(reason="kills land at moments measured in wall time; a loaded machine would move them")]

FILES = 20
KILLS = 20
SEED = 49
HOLD = 0.05  # seconds each request and each answer waits in the relay
DOCS = "POST /v2/documents"


class SlowRelay:
    """A TCP relay in front of the sandbox: a request waits `hold` seconds and is dropped if its client died
    meanwhile (it never reached the service); an answer waits `hold` seconds after the service sent it (the
    service acted; a client killed now never hears of it). The service never sees a client disconnect
    mid-request, as a real one behind a load balancer would not."""

    def __init__(self, port: int, hold: float) -> None:
        self.upstream, self.hold = port, hold
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.port = self.listener.getsockname()[1]
        self.connections = 0  # accepted so far: a process has started talking once this moves
        threading.Thread(target=self._accept, daemon=True).start()

    def url(self, base_url: str) -> str:
        """`base_url` of the sandbox, pointed at the relay."""
        return base_url.replace(f":{self.upstream}/", f":{self.port}/")

    def close(self) -> None:
        """Stop accepting connections."""
        self.listener.close()

    def _accept(self) -> None:
        while True:
            try:
                client, _ = self.listener.accept()
            except OSError:
                return
            self.connections += 1
            server = socket.create_connection(("127.0.0.1", self.upstream))
            threading.Thread(target=self._requests, args=(client, server), daemon=True).start()
            threading.Thread(target=self._answers, args=(server, client), daemon=True).start()

    @staticmethod
    def _gone(client: socket.socket) -> bool:
        try:
            readable, _, _ = select.select([client], [], [], 0)
            return bool(readable) and client.recv(1, socket.MSG_PEEK) == b""
        except OSError:
            return True

    def _requests(self, client: socket.socket, server: socket.socket) -> None:
        try:
            while data := client.recv(65536):
                time.sleep(self.hold)
                if self._gone(client):
                    break
                server.sendall(data)
        except OSError:
            pass
        # the client is gone: a request already forwarded is given time to be processed, then the service
        # sees the end of the stream (a body cut short is not left waiting forever)
        time.sleep(self.hold)
        with suppress(OSError):
            server.shutdown(socket.SHUT_WR)

    def _answers(self, server: socket.socket, client: socket.socket) -> None:
        try:
            while data := server.recv(65536):
                time.sleep(self.hold)
                client.sendall(data)
        except OSError:
            pass
        finally:
            server.close()
            client.close()


def _journal(path: Path, sql: str) -> list[tuple]:
    if not path.exists():
        return []
    con = sqlite3.connect(path)
    try:
        return con.execute(sql).fetchall()
    except sqlite3.OperationalError:  # killed before the tables were created
        return []
    finally:
        con.close()


def _service_documents(server) -> list[dict]:
    body = api_get(server, "/documents", **{"page[size]": 100})
    assert body["meta"]["total"] == len(body["data"])  # all on one page
    return body["data"]


def test_killed_twenty_times_then_completed_uploads_each_file_once(make_sandbox, tmp_path):
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=1.0)  # a moving clock
    relay = SlowRelay(server.port, HOLD)
    folder = tmp_path / "docs"
    folder.mkdir()
    names = [f"bill-of-lading {i:02d}.pdf" for i in range(FILES)]
    for i, name in enumerate(names):
        (folder / name).write_bytes(os.urandom(1000 + i))
    journal = tmp_path / "journal.sqlite"
    env = cli_env(relay.url(server.base_url), tmp_path, OCEAN_TRACKING_WRITEBACK_JOURNAL=str(journal))
    command = [sys.executable, "-m", "pipelines", "upload-documents", str(folder)]
    moments = random.Random(SEED)
    started = time.monotonic()
    mid_batch = after_post = intents_left = 0
    try:
        for _ in range(KILLS):
            before = routes(server)
            connections = relay.connections
            process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
            # kill moments count from the first request, not from the start: a loaded machine's slower
            # start-up (imports) would otherwise eat the window, and the kills land before any batch works
            deadline = time.monotonic() + 30
            while relay.connections == connections and process.poll() is None and time.monotonic() < deadline:
                time.sleep(0.01)
            time.sleep(moments.uniform(0.0, 1.5))
            running = process.poll() is None
            process.send_signal(signal.SIGKILL)
            process.wait(30)
            after = routes(server)
            mid_batch += running and sum(after.values()) > sum(before.values())
            after_post += after.get(DOCS, 0) > before.get(DOCS, 0)
            intents_left += bool(_journal(journal, "select 1 from document_uploads where step = 'creating'"))
        final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=120)
    finally:
        relay.close()
    elapsed = time.monotonic() - started

    assert final.returncode == 0, final.stdout + final.stderr
    docs = _service_documents(server)
    per_name = Counter(d["attributes"]["file_name"] for d in docs)
    assert {n: c for n, c in per_name.items() if c > 1} == {}  # 0 duplicates
    assert set(per_name) == set(names)  # 0 lost, nothing else
    entries = _journal(journal, "select name, step, document_id from document_uploads")
    assert sorted((name, step) for name, step, _ in entries) == [(n, "created") for n in sorted(names)]
    assert {doc_id for _, _, doc_id in entries} == {d["id"] for d in docs}
    posts = routes(server)[DOCS]
    assert posts == FILES  # every POST the service processed created one document, and each was needed
    settled = Counter(o for (o,) in _journal(journal, "select outcome from audit_log where action = 'reconcile_document'"))
    print(f"\nkill loop: {KILLS} kills ({mid_batch} mid-batch, {after_post} after a POST /v2/documents of that run "
          f"reached the service, {intents_left} with an intent left open), {len(docs)} documents for {FILES} files, {posts} POST /v2/documents received, "
          f"intents settled: {settled.get('found', 0)} found, {settled.get('absent', 0)} absent (re-sent); "
          f"{elapsed:.1f} s")
    assert mid_batch >= 5  # the loop really interrupted batches at work, not only start-ups
