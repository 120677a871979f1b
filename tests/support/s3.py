"""A REAL S3-compatible server for the tests that put the lake's data in object storage: one per session.

`s3_server` (session) starts moto in server mode (`moto_server -H 127.0.0.1 -p <free port>`, the
executable beside this Python) as its own process, waits until it answers HTTP, and stops it at the end
of the session. `s3_bucket` (function) hands each test a fresh, empty bucket (a plain `PUT /<bucket>`, as
on any S3 endpoint) with the endpoint and a key pair to sign with (moto accepts any pair; DuckDB's reads
need one). `S3Bucket.keys()` lists what the bucket holds, the way a user would check it.

A missing `moto_server` FAILS the test with one line naming the package; it is never skipped.
"""

from __future__ import annotations

import itertools
import os
import secrets
import subprocess
import sys
import tempfile
import time
import xml.etree.ElementTree as ET
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import IO

import pytest
import requests

from pipelines.settings import DUCKLAKE_STORAGE_ENV
from tests.support.postgres import free_port

MOTO_SERVER = Path(sys.executable).with_name("moto_server")
START_TIMEOUT_SECONDS = 60
REGION = "us-east-1"
_S3_NS = "{http://s3.amazonaws.com/doc/2006-03-01/}"


@dataclass(frozen=True)
class S3Bucket:
    """One empty bucket on the test server, with what a client needs to reach it."""

    name: str
    endpoint_url: str  # http://127.0.0.1:PORT
    access_key_id: str
    secret_access_key: str
    region: str = REGION

    def url(self, prefix: str = "") -> str:
        """`s3://<bucket>/<prefix>`: what dlt's `bucket_url` takes."""
        return f"s3://{self.name}/{prefix}"

    def keys(self, prefix: str = "") -> list[str]:
        """Every object key in the bucket under `prefix` (S3's ListObjectsV2, all pages)."""
        found: list[str] = []
        token = None
        while True:
            params = {"list-type": "2", "prefix": prefix, **({"continuation-token": token} if token else {})}
            response = requests.get(f"{self.endpoint_url}/{self.name}", params=params, timeout=30)
            response.raise_for_status()
            root = ET.fromstring(response.content)
            found += [key.text for key in root.iter(f"{_S3_NS}Key")]
            token = root.findtext(f"{_S3_NS}NextContinuationToken")
            if not token:
                return found

    def dlt_env(self, prefix: str = "lake/") -> dict[str, str]:
        """dlt's own configuration keys that point its `ducklake` destination's data path at this bucket."""
        storage = DUCKLAKE_STORAGE_ENV.removesuffix("__BUCKET_URL")
        return {
            DUCKLAKE_STORAGE_ENV: self.url(prefix),
            f"{storage}__CREDENTIALS__AWS_ACCESS_KEY_ID": self.access_key_id,
            f"{storage}__CREDENTIALS__AWS_SECRET_ACCESS_KEY": self.secret_access_key,
            f"{storage}__CREDENTIALS__ENDPOINT_URL": self.endpoint_url,
            f"{storage}__CREDENTIALS__REGION_NAME": self.region,
        }


@dataclass
class S3Server:
    """A running moto server: its endpoint and process."""

    endpoint_url: str
    process: subprocess.Popen
    log: IO[bytes]
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def create_bucket(self, prefix: str = "test") -> S3Bucket:
        """A new empty bucket, and a fresh key pair to sign requests to it with."""
        name = f"{prefix}-{os.getpid()}-{next(self._names)}"
        response = requests.put(f"{self.endpoint_url}/{name}", timeout=30)
        response.raise_for_status()
        return S3Bucket(name, self.endpoint_url, f"AKIA{secrets.token_hex(8).upper()}", secrets.token_hex(20))


def _answers(endpoint_url: str) -> bool:
    try:
        return requests.get(endpoint_url, timeout=2).status_code < 500
    except requests.RequestException:
        return False


def start_server() -> S3Server:
    """Start moto on a free loopback port and wait until it answers; the caller stops it with `stop_server`."""
    if not MOTO_SERVER.exists():
        pytest.fail(f"{MOTO_SERVER} is missing: install the dev dependencies (uv sync --frozen, moto[server]).",
                    pytrace=False)  # fmt: skip
    for attempt in range(3):  # another process may take the free port before moto binds it
        port = free_port()
        log = tempfile.TemporaryFile()  # noqa: SIM115 (kept open with the server; moto logs every request)
        process = subprocess.Popen([str(MOTO_SERVER), "-H", "127.0.0.1", "-p", str(port)],
                                   stdout=log, stderr=subprocess.STDOUT)  # fmt: skip
        server = S3Server(f"http://127.0.0.1:{port}", process, log)
        deadline = time.monotonic() + START_TIMEOUT_SECONDS
        while process.poll() is None and time.monotonic() < deadline:
            if _answers(server.endpoint_url):
                return server
            time.sleep(0.1)
        stop_server(server)
        if attempt == 2:
            log.seek(0)
            raise RuntimeError(f"moto_server did not answer on port {port}: {log.read().decode()[-2000:]}")
    raise AssertionError("unreachable")


def stop_server(server: S3Server) -> None:
    """Stop the server's process (terminate, then kill if it lingers) and reap it."""
    if server.process.poll() is None:
        server.process.terminate()
        try:
            server.process.wait(15)
        except subprocess.TimeoutExpired:
            server.process.kill()
            server.process.wait(15)
    server.log.close()


