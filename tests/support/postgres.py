"""A REAL PostgreSQL 15 server with PostGIS for the tests that load into Postgres: one per test session.

`postgres_server` (session) runs `initdb` in a temporary folder, starts the server on a free port of
127.0.0.1 (password authentication over TCP, as dlt's credentials expect, with a password made for the
session; loopback only; fsync off: throwaway data), and builds a template database
with the `postgis` extension; at the end of the session it stops the server (`pg_ctl stop -m fast`) and
removes the folder. `postgres_database` (function) hands each test a fresh database cloned from that
template, so PostGIS is there, and drops it afterwards.

`initdb` refuses to run as root: as root the server's commands run as the `postgres` user (`runuser`),
which owns the folder. Missing binaries FAIL the test with one line naming the apt packages; they are
never skipped (`scripts/test` installs them on CI). `OCEAN_TRACKING_PG_BIN` points at another
PostgreSQL's `bin` folder.
"""

from __future__ import annotations

import contextlib
import itertools
import os
import secrets
import shutil
import socket
import subprocess
import tempfile
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import psycopg2
import pytest

PG_BIN = Path(os.environ.get("OCEAN_TRACKING_PG_BIN", "/usr/lib/postgresql/15/bin"))
POSTGIS_CONTROL = Path("/usr/share/postgresql/15/extension/postgis.control")
APT_PACKAGES = "postgresql-15 postgresql-15-postgis-3"
SUPERUSER = "postgres"
TEMPLATE = "template_postgis"
START_TIMEOUT_SECONDS = 60
# The system's temporary folder, read when the suite starts: a test's own (`TMPDIR`, set per test) sits in
# folders only root may enter, and the server runs as the `postgres` user.
SERVER_PARENT = tempfile.gettempdir()
# Throwaway data: no durability, and a small footprint on a 2-core CI machine.
SERVER_OPTIONS = {
    "listen_addresses": "'127.0.0.1'",
    "fsync": "off",
    "synchronous_commit": "off",
    "full_page_writes": "off",
    "max_connections": "50",
    "shared_buffers": "64MB",
}


@dataclass(frozen=True)
class PostgresDatabase:
    """One empty database on the test server (PostGIS installed): its name and a DSN for dlt or psycopg2."""

    name: str
    dsn: str

    def connect(self):
        """A new psycopg2 connection to the database (the caller closes it)."""
        return psycopg2.connect(self.dsn)

    def query(self, sql: str, params: tuple | None = None) -> list[tuple]:
        """Run one statement in its own connection, committed, and return its rows (for assertions and setup)."""
        with contextlib.closing(self.connect()) as con, con.cursor() as cursor:
            cursor.execute(sql, params)
            rows = cursor.fetchall() if cursor.description else []
            con.commit()
            return rows


@dataclass
class PostgresServer:
    """A running server: where it listens and the folder it lives in."""

    host: str
    port: int
    root: Path
    password: str
    _names: Iterator[int] = field(default_factory=lambda: itertools.count(1))

    def dsn(self, database: str = "postgres") -> str:
        """A libpq URL of `database` as the superuser, password included (what dlt's credentials take)."""
        return f"postgresql://{SUPERUSER}:{self.password}@{self.host}:{self.port}/{database}"

    def execute(self, sql: str, database: str = "postgres") -> None:
        """Run statements outside a transaction (CREATE/DROP DATABASE need that) as the superuser."""
        con = psycopg2.connect(self.dsn(database))
        try:
            con.autocommit = True
            with con.cursor() as cursor:
                cursor.execute(sql)
        finally:
            con.close()

    def create_database(self, prefix: str = "test") -> PostgresDatabase:
        """A new empty database, PostGIS installed (a copy of the session's template)."""
        name = f"{prefix}_{os.getpid()}_{next(self._names)}"
        self.execute(f'create database "{name}" template {TEMPLATE}')
        return PostgresDatabase(name, self.dsn(name))

    def drop_database(self, name: str) -> None:
        """Drop a database, closing whatever sessions a test left open on it."""
        self.execute(f'drop database if exists "{name}" with (force)')


def missing_binaries() -> list[str]:
    """What of PostgreSQL 15 and PostGIS 3 this machine lacks (paths), empty when all is there."""
    needed = [PG_BIN / "initdb", PG_BIN / "pg_ctl", PG_BIN / "postgres", POSTGIS_CONTROL]
    return [str(path) for path in needed if not path.exists()]


def _as_server_user(command: list[str]) -> list[str]:
    """`command` as the `postgres` user when we are root (initdb and postgres refuse root), else as is."""
    return ["runuser", "-u", SUPERUSER, "--", *command] if os.geteuid() == 0 else command


def _run(command: list[str], root: Path, timeout: float = START_TIMEOUT_SECONDS) -> None:
    result = subprocess.run(_as_server_user(command), cwd=root, capture_output=True, text=True, timeout=timeout)
    if result.returncode != 0:
        log = root / "server.log"
        tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
        raise RuntimeError(f"{' '.join(command)} failed ({result.returncode}): {result.stderr.strip()}\n{tail}")


def free_port() -> int:
    """A TCP port of 127.0.0.1 free right now (the server retries when another process takes it first)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return probe.getsockname()[1]


def start_server() -> PostgresServer:
    """initdb a temporary folder, start a server on a free loopback port and wait until it accepts
    connections, then build the PostGIS template database. The caller stops it with `stop_server`."""
    if missing := missing_binaries():
        pytest.fail(
            f"PostgreSQL 15 with PostGIS is needed ({', '.join(missing)} missing): "
            f"apt-get install -y {APT_PACKAGES} (bash scripts/test does it when run as root)",
            pytrace=False,
        )
    root = Path(tempfile.mkdtemp(prefix="ocean-tracking-pg-", dir=SERVER_PARENT))
    if os.geteuid() == 0:
        shutil.chown(root, SUPERUSER, SUPERUSER)
    data, password = root / "data", secrets.token_hex(12)
    password_file = root / "password"
    password_file.write_text(password)
    if os.geteuid() == 0:
        shutil.chown(password_file, SUPERUSER, SUPERUSER)
    try:
        _run([str(PG_BIN / "initdb"), "-D", str(data), "-U", SUPERUSER, f"--pwfile={password_file}",
              "--auth-host=scram-sha-256", "--auth-local=peer", "-E", "UTF8", "--locale=C", "--no-sync"], root)  # fmt: skip
        password_file.unlink()
        for attempt in range(3):  # another process may take the free port before the server binds it
            port = free_port()
            options = " ".join(f"-c {name}={value}" for name, value in
                               {**SERVER_OPTIONS, "port": str(port), "unix_socket_directories": f"'{root}'"}.items())  # fmt: skip
            try:
                _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-l", str(root / "server.log"), "-o", options,
                      "-w", "-t", str(START_TIMEOUT_SECONDS), "start"], root)  # fmt: skip
                break
            except RuntimeError:
                if attempt == 2:
                    raise
        server = PostgresServer("127.0.0.1", port, root, password)
        server.execute(f"create database {TEMPLATE}")
        server.execute("create extension postgis", TEMPLATE)
        server.execute(f"alter database {TEMPLATE} with is_template true")
        return server
    except BaseException:
        stop_server(root)
        raise


def stop_server(root: Path) -> None:
    """Stop the server living in `root` (fast: open sessions are closed) and remove the folder."""
    data = root / "data"
    try:
        if (data / "postmaster.pid").exists():
            _run([str(PG_BIN / "pg_ctl"), "-D", str(data), "-m", "fast", "-w", "stop"], root)
    finally:
        shutil.rmtree(root, ignore_errors=True)


