"""Our webhook receiver in the tests: delivering to it as the service does, and waiting for one to come up."""

from __future__ import annotations

import subprocess
import time
from dataclasses import dataclass
from pathlib import Path

import requests

from pipelines.settings import WEBHOOK_PATH, WEBHOOK_SIGNATURE_HEADER
from pipelines.webhooks import signature

SECRET = "whsec_test_4f1d2c3b5a6e7f8091a2b3c4"  # the webhook secret the receivers under test verify with


@dataclass
class Receiver:
    """A running receiver of ours (thread or process) and its journal, posted to as the service posts."""

    url: str
    journal: Path | str

    def post(self, raw: bytes, sign: str | None = SECRET, **headers: str) -> requests.Response:
        """Deliver `raw`, signed with `sign` (unsigned when None) in the service's header."""
        if sign is not None:
            headers[WEBHOOK_SIGNATURE_HEADER] = signature(raw, sign)
        return requests.post(self.url + WEBHOOK_PATH, data=raw,
                             headers={"Content-Type": "application/json", **headers}, timeout=10)


def wait_until_up(process: subprocess.Popen, url: str) -> None:
    """Wait (up to a minute) until the receiver process at `url` answers its health check."""
    deadline = time.monotonic() + 60
    while True:
        assert process.poll() is None, process.stdout.read().decode()
        try:
            if requests.get(url + "/healthz", timeout=1).status_code == 200:
                return
        except requests.ConnectionError:
            pass
        assert time.monotonic() < deadline, "the receiver did not come up"
        time.sleep(0.05)
