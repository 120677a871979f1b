"""Run the sandbox in a background thread (tests, scripts, the CLI): bind (port 0 = free port), wait
until it accepts connections, expose base_url/app_url, stop cleanly."""

from __future__ import annotations

import socket
import threading
import time
from typing import Any

import uvicorn

from .app import create_app
from .config import Settings


class SandboxServer:
    """A uvicorn server on its own thread. Use as a context manager or call start()/stop()."""

    def __init__(self, settings: Settings, world: Any = None, clock: Any = None) -> None:
        settings.ensure_key()
        self.settings = settings
        self.app = create_app(settings, world, clock)
        self._sock: socket.socket | None = None
        self._server: uvicorn.Server | None = None
        self._thread: threading.Thread | None = None
        self.port = settings.port

    @property
    def root_url(self) -> str:
        """http://host:port (no path)."""
        return f"http://{self.settings.host}:{self.port}"

    @property
    def base_url(self) -> str:
        """The API base address, ending in /v2."""
        return f"{self.root_url}/v2"

    @property
    def app_url(self) -> str:
        """The web app address (deep links live under it)."""
        return f"{self.root_url}/app"

    @property
    def state(self) -> Any:
        """The in-process SandboxState (world, clock, limiter, faults, stats)."""
        return self.app.state.sandbox

    def start(self, timeout: float = 30.0) -> SandboxServer:
        """Bind, start serving on a daemon thread and block until the server is ready."""
        self._sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        self._sock.bind((self.settings.host, self.settings.port))
        self.port = self._sock.getsockname()[1]
        config = uvicorn.Config(self.app, log_level="warning", access_log=self.settings.access_log,
                                timeout_graceful_shutdown=1, lifespan="off",
                                date_header=False)  # the app sets Date from the simulated clock
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, kwargs={"sockets": [self._sock]},
                                        name="sandbox-server", daemon=True)
        self._thread.start()
        deadline = time.monotonic() + timeout
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                raise RuntimeError("sandbox server failed to start")
            time.sleep(0.01)
        return self

    def wait(self) -> None:
        """Block until the server thread ends."""
        if self._thread:
            while self._thread.is_alive():
                self._thread.join(0.5)

    def stop(self) -> None:
        """Ask uvicorn to exit and wait for the thread."""
        hub = getattr(self.app.state.sandbox, "webhooks", None)
        if hub is not None:
            hub.stop()
        if self._server:
            self._server.should_exit = True
        if self._thread:
            self._thread.join(10)
        if self._sock:
            self._sock.close()

    def __enter__(self) -> SandboxServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()
