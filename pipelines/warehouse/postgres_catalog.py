"""The lake's PostgreSQL catalog, for the lake across hosts: its connection string, its identity, whether
it exists yet, and the one writer lock every host takes on it.

A local lock file serializes writers on one machine only. With the catalog in PostgreSQL, several hosts
write the same lake, so the writer lock is a PostgreSQL *session advisory lock* on the catalog's database,
keyed by a stable hash of the catalog's identity (host, port, database, metadata schema: never the
password), held on a connection of its own for the whole block. PostgreSQL releases it when that
connection ends, so a killed writer, or a host that dies, never leaves the lake locked. Under it the
catalog is created once (three hosts initialising a fresh catalog at once otherwise fail on
`pg_namespace_nspname_index`) and merges commit one at a time (otherwise `Transaction conflict`).

psycopg2 is imported only here and only when a PostgreSQL catalog is used (`psycopg2-binary`, which
`dlt[postgres]` brings).
"""

from __future__ import annotations

import hashlib
import logging
import os
import socket
from collections.abc import Iterator
from contextlib import closing, contextmanager, suppress
from typing import Any
from urllib.parse import quote, urlencode

from pipelines.errors import ConfigurationError, redact
from pipelines.warehouse.locks import Held, program_name, wait_for_lock

logger = logging.getLogger(__name__)

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


def connect(catalog: str, application_name: str | None = None) -> Any:
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
    with closing(connect(catalog)) as con, con.cursor() as cursor:
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
    con = connect(catalog, application_name=me)
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
