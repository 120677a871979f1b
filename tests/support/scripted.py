"""A tiny scripted HTTP server on loopback: a unit-level double for the client's protocol handling.

Tests queue responses per (method, path); anything unscripted gets the service's HTML 404 page. Every
request is recorded (method, path with query, headers, body) so tests can assert what went over the wire.
"""

from __future__ import annotations

import json
import threading
from collections import defaultdict, deque
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

FIXTURES = Path(__file__).resolve().parents[1] / "pipelines" / "fixtures"
HTML_404 = b"<!DOCTYPE html>\n<html>\n<head>\n  <title>The page you were looking for doesn't exist (404)</title>"


def load_fixture(name: str) -> Any:
    return json.loads((FIXTURES / name).read_text())


@dataclass
class Reply:
    status: int = 200
    body: Any = None  # dict/list → JSON:API JSON; bytes → as is
    headers: dict[str, str] = field(default_factory=dict)
    truncate: bool = False  # announce the full length, send half, close
    drop: bool = False  # close the connection without answering

    def payload(self) -> bytes:
        if isinstance(self.body, bytes):
            return self.body
        return b"" if self.body is None else json.dumps(self.body).encode()


@dataclass
class Seen:
    method: str
    path: str
    headers: dict[str, str]
    body: bytes


class ScriptedServer:
    def __init__(self) -> None:
        self.scripts: dict[tuple[str, str], deque[Reply]] = defaultdict(deque)
        self.requests: list[Seen] = []
        self.lock = threading.Lock()
        server = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _handle(self) -> None:
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                with server.lock:
                    server.requests.append(Seen(self.command, self.path, dict(self.headers), body))
                    queue = server.scripts.get((self.command, self.path)) or server.scripts.get(
                        (self.command, urlsplit(self.path).path)
                    )
                    reply = queue.popleft() if queue else Reply(404, HTML_404, {"Content-Type": "text/html"})
                if reply.drop:
                    self.close_connection = True
                    self.connection.close()
                    return
                payload = reply.payload()
                self.send_response(reply.status)
                headers = {"Content-Type": "application/vnd.api+json", **reply.headers}
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.send_header("Connection", "close")
                self.end_headers()
                self.wfile.write(payload[: len(payload) // 2] if reply.truncate else payload)
                self.wfile.flush()
                self.close_connection = True

            do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.httpd.daemon_threads = True
        self.port = self.httpd.server_address[1]
        self.origin = f"http://127.0.0.1:{self.port}"
        self.base_url = f"{self.origin}/v2"
        self.thread = threading.Thread(target=self.httpd.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        self.thread.start()

    def script(self, method: str, path: str, *replies: Reply) -> None:
        """Queue replies for METHOD /v2<path> (path may carry a query string to match exactly)."""
        with self.lock:
            self.scripts[(method, "/v2" + path)].extend(replies)

    def seen(self, method: str | None = None) -> list[Seen]:
        with self.lock:
            return [r for r in self.requests if method is None or r.method == method]

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()


TEST_KEY = "t49-test-key-9f8e7d6c5b4a3210"
