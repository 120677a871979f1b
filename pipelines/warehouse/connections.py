"""What our connections to the warehouse need beyond `duckdb.connect`: waiting for what another process
holds, DuckDB's extensions installed offline, and the lake's PostgreSQL catalog (the lake across hosts).

**Waiting, not failing** (`wait_for_lock`, one helper for every lock). Three things can be held: a plain
DuckDB file (one writing process, and no reader from another process while it writes), the DuckLake writer
lock (every step that writes the lake takes it, so two writers never race a commit; readers never take it),
and the SQLite files (journal, limiter, lake catalog: their own busy timeouts). A run that finds one held
waits (bounded by `OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS`), says once what it waits for and who holds it, and
gives up with one line saying what to do.

**Extensions, offline.** `INSTALL <name>` downloads from DuckDB's extension repository, which production
hosts behind firewalls and CI cannot reach, and DuckDB autoloads (and by default auto-installs) `ducklake`
and `sqlite_scanner` the moment anything attaches a lake, dlt's loader included. The `duckdb-extension-*`
wheels ship DuckDB's own signed binaries, so we install those into DuckDB's extension directory (`INSTALL
'<path>'` copies a local file, no network) and turn auto-install off: a missing binary is then a clear
error, never a download that hangs. The DuckDB command line finds the same binaries, so the analysts' CLI
works offline. Several processes starting at once on a fresh machine would otherwise race (one copies a
binary while another finds it half-written), so the check-and-install holds `exclusive_file_lock` in the
extension directory. The directory is per home folder (`~/.duckdb/extensions`), and a new machine or a
Kubernetes pod starts with an empty one; dlt's own connections (the loader, the state restore, the questions
`pipelines.source.bookkeeping.query_loaded` asks) autoload `ducklake`, `postgres_scanner` and `httpfs` from it and never install,
so `ducklake_target` calls `ensure_bundled_extensions` before dlt connects.

**The PostgreSQL catalog.** A local lock file serializes writers on one machine only. With the catalog in
PostgreSQL, several hosts write the same lake, so the writer lock is a PostgreSQL *session advisory lock* on
the catalog's database, keyed by a stable hash of the catalog's identity (host, port, database, metadata
schema: never the password), held on a connection of its own for the whole block. PostgreSQL releases it
when that connection ends, so a killed writer, or a host that dies, never leaves the lake locked. Under it
the catalog is created once (three hosts initialising a fresh catalog at once otherwise fail on
`pg_namespace_nspname_index`) and merges commit one at a time (otherwise `Transaction conflict`). psycopg2
is imported only when a PostgreSQL catalog is used (`psycopg2-binary`, which `dlt[postgres]` brings).
"""

from __future__ import annotations

import fcntl
import hashlib
import logging
import os
import re
import socket
import sys
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import closing, contextmanager, suppress
from datetime import UTC, datetime
from functools import cache
from pathlib import Path
from typing import Any, TypeVar
from urllib.parse import quote, urlencode

import duckdb

from pipelines.errors import ConfigurationError, PipelineError, redact
from pipelines.settings import LOCK_TIMEOUT_ENV, lock_timeout_seconds, own_spill_directory

logger = logging.getLogger(__name__)

_HOLDER = re.compile(r"Conflicting lock is held in (?P<program>.+?) \(PID (?P<pid>\d+)\)")
POLL_SECONDS = 0.25
T = TypeVar("T")


class WarehouseLockedError(PipelineError):
    """What the run needs stayed held by another process for longer than the lock timeout."""


class Held(Exception):
    """Raised by an attempt passed to `wait_for_lock` when the thing is held; carries the holder."""

    def __init__(self, holder: str) -> None:
        super().__init__(holder)
        self.holder = holder


def wait_for_lock(
    attempt: Callable[[], T],
    what: str | Path,
    *,
    timeout: float | None = None,
    remedy: str = "close that session (an analyst's DuckDB, another run)",
) -> T:
    """Call `attempt` until it stops raising `Held`, for up to `timeout` seconds (default: the configured
    lock timeout); log once what is held and by whom; past the timeout raise one line naming both and
    the `remedy`."""
    timeout = lock_timeout_seconds() if timeout is None else timeout
    deadline = time.monotonic() + timeout
    announced = False
    while True:
        try:
            return attempt()
        except Held as held:
            if time.monotonic() >= deadline:
                raise WarehouseLockedError(
                    f"{what} is still held by {held.holder} after {timeout:g}s: {remedy} and run again, "
                    f"or wait longer with {LOCK_TIMEOUT_ENV}."
                ) from None
            if not announced:
                bound = "until it is released" if timeout == float("inf") else f"up to {timeout:g}s"
                logger.warning("Waiting for %s: held by %s (%s).", what, held.holder, bound)
                announced = True
            time.sleep(POLL_SECONDS)


def lock_holder(message: str) -> str:
    """`process 1234 (/usr/bin/python3)` from DuckDB's lock error, or `another process`."""
    match = _HOLDER.search(message)
    return f"process {match['pid']} ({match['program']})" if match else "another process"


def locked_error(error: BaseException, path: str | Path) -> WarehouseLockedError | None:
    """The one-line error for a DuckDB lock conflict anywhere in `error`'s chain of causes, else None.

    dlt reports a held file as a connection failure ("check your credentials or internet connection"),
    which sends the user the wrong way; this names the file, the holder and the remedy instead."""
    seen: set[int] = set()
    cause: BaseException | None = error
    while cause is not None and id(cause) not in seen:
        seen.add(id(cause))
        text = str(cause)
        if "Conflicting lock" in text or (isinstance(cause, duckdb.IOException) and "lock" in text.lower()):
            return WarehouseLockedError(
                f"{path} is locked by {lock_holder(text)}: close that session (an analyst's DuckDB, another "
                "run) and run again."
            )
        cause = cause.__cause__ or cause.__context__
    return None


def connect_waiting(
    path: str | Path, *, read_only: bool = False, timeout: float | None = None, config: dict | None = None
) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect(path)`, waiting up to `timeout` seconds (default: the configured lock timeout)
    while another process holds the file."""

    def attempt() -> duckdb.DuckDBPyConnection:
        try:
            return duckdb.connect(str(path), read_only=read_only, config=config or {})
        except duckdb.IOException as error:
            if "lock" not in str(error).lower():
                raise
            raise Held(lock_holder(str(error))) from None

    return wait_for_lock(attempt, path, timeout=timeout)


def program_name() -> str:
    """What this process runs, as a user would name it: `pipelines` for `python -m pipelines`, `dagster`
    for the daemon's run worker, else the script's file name."""
    spec = getattr(sys.modules.get("__main__"), "__spec__", None)
    if spec is not None and spec.name:
        return spec.name.removesuffix(".__main__")
    return Path(sys.argv[0]).name or "python"


@contextmanager
def exclusive_file_lock(path: str | Path, what: str, *, timeout: float | None = None) -> Iterator[None]:
    """Hold an exclusive lock on `path` (created if missing) for the block, waiting while another process
    holds it. The holder writes its process id, program and start time into the file, so whoever waits
    can name it. `fcntl.flock`, not the `filelock` package: that one cannot say who holds the lock. The
    kernel releases the lock when the holder dies, so a killed run never leaves it held."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDWR | os.O_CREAT, 0o644)

    def attempt() -> None:
        try:
            fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            holder = Path(path).read_text(errors="replace").strip() or "another process"
            raise Held(holder) from None

    try:
        wait_for_lock(attempt, what, timeout=timeout, remedy="let that run finish (or stop it)")
        os.ftruncate(fd, 0)
        started = datetime.now(UTC).strftime("%Y-%m-%d %H:%M:%SZ")
        os.write(fd, f"process {os.getpid()} ({program_name()}, since {started})".encode())
        try:
            yield
        finally:
            os.ftruncate(fd, 0)
            fcntl.flock(fd, fcntl.LOCK_UN)
    finally:
        os.close(fd)


# What every connection we or dlt open is configured with: never fetch an extension from the network.
OFFLINE_CONFIG = {"autoinstall_known_extensions": False}


def in_memory_config() -> dict[str, object]:
    """`OFFLINE_CONFIG` for an in-memory database, spilling into a folder of its own (`settings.own_spill_directory`:
    DuckDB's default, `.tmp` in the working directory, crashes two databases that spill into it at once)."""
    return {**OFFLINE_CONFIG, "temp_directory": own_spill_directory()}


# extension name -> the Python package (wheel) that ships its binary
BUNDLED = {
    "spatial": "duckdb_extension_spatial",
    "ducklake": "duckdb_extension_ducklake",
    "sqlite_scanner": "duckdb_extension_sqlite_scanner",
    # the lake across hosts: a PostgreSQL catalog, and its data in S3-compatible object storage
    "postgres_scanner": "duckdb_extension_postgres_scanner",
    "httpfs": "duckdb_extension_httpfs",
}
INSTALL_LOCK_NAME = ".ocean-tracking-install.lock"
_installing = threading.Lock()
_installed_in: set[Path] = set()  # extension directories this process found complete


@cache
def bundled_extension_path(name: str) -> Path:
    """Path of the extension's binary in its wheel, for the installed DuckDB version."""
    package = __import__(BUNDLED[name])
    package_dir = Path(package.__path__[0])
    wanted = package_dir / "extensions" / f"v{duckdb.__version__}" / f"{name}.duckdb_extension"
    if wanted.exists():
        return wanted
    found = sorted(package_dir.glob(f"extensions/*/{name}.duckdb_extension"))
    if not found:
        wheel = BUNDLED[name].replace("_", "-")
        raise RuntimeError(
            f"{wheel} is installed without a {name} binary; reinstall it with the version matching "
            f"duckdb {duckdb.__version__} (uv sync --frozen)."
        )
    return found[-1]


def extension_directory(con: duckdb.DuckDBPyConnection) -> Path:
    """The folder DuckDB installs extensions under for this connection: the `extension_directory` setting,
    else `<home_directory or $HOME>/.duckdb/extensions` (DuckDB's own default)."""
    configured, home = con.execute(
        "select current_setting('extension_directory'), current_setting('home_directory')"
    ).fetchone()
    if configured:
        return Path(configured)
    return Path(home or Path.home()) / ".duckdb" / "extensions"


def install_bundled_extensions(con: duckdb.DuckDBPyConnection) -> None:
    """Put the bundled binaries in DuckDB's extension directory unless they are there; once a process and
    directory, holding the directory's install lock (another process installing meanwhile is waited for).
    After this, `ATTACH 'ducklake:...'` (ours or dlt's, on any catalog and storage) and `LOAD spatial` work
    offline."""
    directory = extension_directory(con)
    with _installing:
        if directory in _installed_in:
            return
        try:
            directory.mkdir(parents=True, exist_ok=True)
        except OSError as error:
            raise ConfigurationError(
                f"DuckDB keeps its extensions in {directory}, which cannot be created ({error.strerror}): "
                "run with HOME set to a folder this user can write."
            ) from None
        lock = directory / INSTALL_LOCK_NAME
        with exclusive_file_lock(lock, f"the DuckDB extension install lock {lock}"):
            rows = con.execute("select extension_name from duckdb_extensions() where installed").fetchall()
            present = {name for (name,) in rows}
            for name in BUNDLED:
                if name not in present:
                    con.execute(f"force install '{bundled_extension_path(name)}'")
        _installed_in.add(directory)


def ensure_bundled_extensions() -> None:
    """Install the bundled binaries where every DuckDB connection of this process looks for them (see
    `install_bundled_extensions`), before connections that cannot install them (dlt's) are opened."""
    with duckdb.connect(config=OFFLINE_CONFIG) as con:
        install_bundled_extensions(con)


def load_spatial(con: duckdb.DuckDBPyConnection) -> None:
    """Make ST_* functions (lengths, distances, validity) and the GEOMETRY type available here."""
    con.execute(f"load '{bundled_extension_path('spatial')}'")


def offline_connection(database: str = ":memory:", *, read_only: bool = False) -> duckdb.DuckDBPyConnection:
    """`duckdb.connect` with auto-install off, the bundled extensions installed and spatial loaded."""
    config = in_memory_config() if database == ":memory:" else OFFLINE_CONFIG  # a file spills beside itself
    con = duckdb.connect(database, read_only=read_only, config=config)
    try:
        install_bundled_extensions(con)
        load_spatial(con)
    except Exception:
        con.close()
        raise
    return con


SERVER_DRIVERS = ("postgres", "postgresql")
CONNECT_TIMEOUT_SECONDS = 10
# PostgreSQL keeps the first 63 bytes of application_name (NAMEDATALEN - 1).
APPLICATION_NAME_BYTES = 63
_HOLDER_SQL = """
select a.application_name, a.pid, coalesce(a.client_hostname, host(a.client_addr), 'local socket'),
       to_char(a.backend_start at time zone 'UTC', 'YYYY-MM-DD HH24:MI:SS"Z"')
from pg_locks l join pg_stat_activity a on a.pid = l.pid
where l.locktype = 'advisory' and l.granted and l.database = (select oid from pg_database where datname = current_database())
  and l.classid = %s and l.objid = %s and l.objsubid = 1
"""


def _psycopg2() -> Any:
    try:
        import psycopg2
    except ImportError:
        raise ConfigurationError(
            "A PostgreSQL lake catalog needs psycopg2: install the postgres extra (uv sync --frozen --extra postgres)."
        ) from None
    return psycopg2


def is_postgres_catalog(catalog: str | None) -> bool:
    """True when `catalog` (dlt's `catalog` key) names a PostgreSQL catalog (`postgres://`, `postgresql://`,
    or `postgres:` followed by libpq's key=value words)."""
    return bool(catalog) and catalog.split(":", 1)[0].lower() in SERVER_DRIVERS


def libpq_dsn(catalog: str) -> str:
    """The catalog as a libpq connection string (a `postgres[ql]://` URL as is, `postgres:k=v ...` without
    its prefix): what psycopg2 and DuckDB's postgres scanner both accept."""
    if "://" in catalog:
        return catalog
    return catalog.split(":", 1)[1].strip()


def catalog_parts(catalog: str) -> dict[str, str]:
    """libpq's reading of the catalog's connection string (host, port, dbname, user, password, ...)."""
    psycopg2 = _psycopg2()
    try:
        return psycopg2.extensions.parse_dsn(libpq_dsn(catalog))
    except psycopg2.ProgrammingError:
        raise ConfigurationError(
            "The lake's catalog is not a valid PostgreSQL connection string: use "
            "postgresql://USER:PASSWORD@HOST:PORT/DATABASE (DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG)."
        ) from None


def as_url(catalog: str) -> str:
    """The catalog as a `postgresql://` URL, the form dlt's `ConnectionStringCredentials` parses (libpq's
    key=value words are turned into one; a URL is kept as it is)."""
    if "://" in catalog:
        return catalog
    parts = dict(catalog_parts(catalog))
    user, password = quote(parts.pop("user", ""), safe=""), quote(parts.pop("password", ""), safe="")
    login = f"{user}:{password}@" if password else (f"{user}@" if user else "")
    host, port, dbname = parts.pop("host", "localhost"), parts.pop("port", ""), parts.pop("dbname", "")
    query = f"?{urlencode(parts)}" if parts else ""
    return f"postgresql://{login}{host}{':' + port if port else ''}/{quote(dbname, safe='')}{query}"


def catalog_password(catalog: str) -> str | None:
    """The password in the catalog's connection string, if any (to keep it out of messages)."""
    return catalog_parts(catalog).get("password") or None


def catalog_identity(catalog: str, metadata_schema: str) -> str:
    """A non-secret, stable name of the lake in this catalog: `postgres://host:port/dbname#schema` (the
    same lake whatever user or password a host connects with)."""
    parts = catalog_parts(catalog)
    host = parts.get("host") or parts.get("hostaddr") or "localhost"
    return f"postgres://{host}:{parts.get('port') or 5432}/{parts.get('dbname') or parts.get('user') or ''}#{metadata_schema}"


def advisory_key(identity: str, purpose: str = "writer") -> int:
    """An advisory lock's key: a signed 64-bit hash of what it guards (`purpose`: the lake's `writer` lock,
    or one dataset's `sync`) and the catalog's identity, the same on every host."""
    return int.from_bytes(hashlib.sha256(f"ocean-tracking {purpose}|{identity}".encode()).digest()[:8], "big", signed=True)


def catalog_connection(catalog: str, application_name: str | None = None) -> Any:
    """A psycopg2 connection (autocommit) to the catalog's database; an unreachable server or a refused
    login is one line naming the host, port and database, never the password."""
    psycopg2 = _psycopg2()
    parts = catalog_parts(catalog)
    options: dict[str, Any] = {"connect_timeout": parts.get("connect_timeout") or CONNECT_TIMEOUT_SECONDS}
    if application_name:
        options["application_name"] = application_name.encode()[:APPLICATION_NAME_BYTES].decode(errors="ignore")
    try:
        con = psycopg2.connect(libpq_dsn(catalog), **options)
    except psycopg2.Error as error:
        reason = redact(str(error).strip().splitlines()[0] if str(error).strip() else type(error).__name__,
                        parts.get("password"))  # fmt: skip
        where = f"{parts.get('host') or 'localhost'}:{parts.get('port') or 5432}/{parts.get('dbname') or ''}"
        raise ConfigurationError(
            f"Cannot connect to the lake's PostgreSQL catalog at {where}: {reason}. Check "
            "DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG and that the server is reachable."
        ) from None
    con.autocommit = True
    return con


def catalog_exists(catalog: str, metadata_schema: str) -> bool:
    """True once a writer has created the lake's catalog tables in `metadata_schema`."""
    with closing(catalog_connection(catalog)) as con, con.cursor() as cursor:
        cursor.execute("select to_regclass(format('%%I.ducklake_metadata', %s::text)) is not null", (metadata_schema,))
        return bool(cursor.fetchone()[0])


def _holder(cursor: Any, key: int) -> str:
    """Who holds the advisory lock `key`: the holder's own description (its application_name: process,
    program, host) and its PostgreSQL backend, or `another session` when it cannot be seen."""
    cursor.execute(_HOLDER_SQL, ((key >> 32) & 0xFFFFFFFF, key & 0xFFFFFFFF))
    row = cursor.fetchone()
    if row is None:
        return "another session"
    name, pid, client, since = row
    return f"{name or 'a session'} (PostgreSQL backend {pid} from {client}, since {since})"


@contextmanager
def advisory_lock(catalog: str, metadata_schema: str, what: str, *, timeout: float | None = None,
                  purpose: str = "writer") -> Iterator[None]:
    """Hold a session advisory lock on the catalog's database for the block: the lake's writer lock, or with
    `purpose` `sync|<dataset>` one dataset's sync lock. Waits (bounded by `timeout`, default the lock timeout,
    naming the holder) while another process on any host holds it."""
    key = advisory_key(catalog_identity(catalog, metadata_schema), purpose)
    me = f"process {os.getpid()} ({program_name()}) on {socket.gethostname()}"
    con = catalog_connection(catalog, application_name=me)
    try:
        with con.cursor() as cursor:

            def attempt() -> None:
                cursor.execute("select pg_try_advisory_lock(%s)", (key,))
                if not cursor.fetchone()[0]:
                    raise Held(_holder(cursor, key))

            wait_for_lock(attempt, what, timeout=timeout, remedy="let that run finish (or stop it)")
            try:
                yield
            finally:
                with suppress(_psycopg2().Error):
                    cursor.execute("select pg_advisory_unlock(%s)", (key,))
    finally:
        con.close()  # ends the session: PostgreSQL releases the lock even if the unlock above failed
