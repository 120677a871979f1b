# longer than 500 lines because the room holds two modules: the journals' database, on both backends, and the
# notification journal (which nothing but its receiver and consumers use) share this one.
"""The pipeline's journals, small stores of their own and never the analysts' warehouse, so what a journal
records never waits on a sync's write lock: the webhook notification journal (here) and the write-back
journal (`pipelines.journals.writes`).

A journal lives where its setting says: a SQLite file (the default, one host), or, when the setting is a
PostgreSQL URL (`postgresql://user:password@host:port/database`), its own schema of that database, which every
host shares (on Kubernetes each run is its own pod and the webhook receiver another). Its tables and statements
are SQLAlchemy Core, compiled for either database; `JournalDatabase` holds what differs between the two:

- **Autocommit** outside a transaction (`connect()`): a statement is committed, durably, when it returns
  (SQLite WAL with `synchronous=FULL`; PostgreSQL `synchronous_commit = on` whatever the server's default):
  the receiver's 2xx and a write-back intent rely on it. In WAL, readers never block the writer.
- **Write transactions** (`transaction()`) take SQLite's write lock at once (`begin immediate`, SQLAlchemy's
  `begin` event recipe), so a read-then-write never deadlocks; on PostgreSQL they are plain transactions.
- **`exclusive(purpose)`**: one holder at a time across processes and hosts, for work longer than a
  transaction (the consumer of notifications, a write-back batch): a lock file beside a SQLite journal, a
  session advisory lock on PostgreSQL, both released when the holder dies and naming it to whoever waits.
  Every wait is bounded by the lock timeout (a held SQLite write lock, a PostgreSQL row's `lock_timeout`); a
  PostgreSQL session stalled inside a transaction ends after 60 s.
- **Created once, however many processes start at once**: a new SQLite file is made WAL and given its tables
  under the lock file `<journal>.create.lock` (a second process switching it to WAL would fail at once). On
  PostgreSQL (where concurrent `CREATE ... IF NOT EXISTS` fails on a catalog index) the DDL runs under a session
  advisory lock keyed by the journal (never the password), only when `to_regclass` misses a table or index (a
  role without CREATE uses the tables made for it), in a transaction begun once the lock is held.
- A dropped connection is replaced at the next call (the one that met it fails: the receiver answers 503).
- **Errors**: `errors` mean "cannot be used right now" (the receiver's 503). Opening is refused in one line: a
  file that is not a journal says what to do; a server names host, port, database and the setting, never the
  password. No error shows a statement's parameters (an upload URL is one).

The notification journal holds one row per notification the service sent, committed before the receiver
answers 2xx, keyed by its `data.id` (a retried delivery is left alone). A consumer applies the `pending` rows in
the order the service created them and marks them `applied` (when its load committed) or `failed`;
`applied_versions` keeps per object the newest applied, so an older one arriving late never overwrites newer state. One consumer at a time (`consuming()`, on any host), from taking the pending
rows until they are marked; not row locks (`FOR UPDATE SKIP LOCKED`): a refresh holds its rows for a whole
load, and two consumers of disjoint rows could still load an object's older notification after another loaded
its newer one. A named account has its own journal (its file `settings.webhook_journal_path(account)`, or the
schema `ocean_tracking_webhooks_<account>`). Nothing stored is a secret: bodies are what the service signed,
never the signature or a header.
"""

from __future__ import annotations

import logging
import re
import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import AbstractContextManager, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson
from sqlalchemy import CheckConstraint, Column, Identity, Index, MetaData, Table, event
from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.engine import URL, Connection, Engine, create_engine, make_url
from sqlalchemy.exc import ArgumentError, DBAPIError
from sqlalchemy.schema import CreateIndex, CreateSchema, CreateTable
from sqlalchemy.sql import bindparam, func, select, update
from sqlalchemy.types import BigInteger, Integer, Text

from pipelines.api.ratelimit import LimiterUrl
from pipelines.errors import ConfigurationError, InputError, redact
from pipelines.settings import WEBHOOK_JOURNAL_ENV, Account, lock_timeout_seconds, webhook_journal_location
from pipelines.warehouse import connections
from pipelines.warehouse.connections import exclusive_file_lock

logger = logging.getLogger(__name__)

SERVER_SCHEMES = ("postgresql://", "postgres://")
URL_FORM = "postgresql://user:password@host:port/database"
SCHEMA_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")
CONNECT_TIMEOUT_SECONDS = 10
IDLE_IN_TRANSACTION_SECONDS = 60
BATCH_ROWS = 200  # rows of parameters per PostgreSQL round trip when one statement runs for many rows
DDL_PURPOSE = "journal schema"  # the advisory lock the creation of a journal's schema and tables takes
CREATION_PURPOSE = "create"  # the lock file a SQLite journal is created (made WAL) under, one process at a time
# An identity column on PostgreSQL; SQLite's rowid alias must be spelled INTEGER for AUTOINCREMENT to apply.
ROW_ID = BigInteger().with_variant(Integer, "sqlite")


def is_server_location(location: str | Path | None) -> bool:
    """True when a journal's location is a PostgreSQL URL (a string: a Path is always a SQLite file)."""
    return isinstance(location, str) and location.strip().lower().startswith(SERVER_SCHEMES)


def server_url(location: str, setting: str) -> LimiterUrl:
    """A journal's PostgreSQL URL, held so that its repr and str never show the password (the rate limiter's
    `LimiterUrl`: `where` is `host:port/database`); a malformed one is one line naming `setting`."""
    try:
        return LimiterUrl(location.strip())
    except ConfigurationError:
        raise _not_a_url(setting) from None


def _not_a_url(setting: str) -> ConfigurationError:
    return ConfigurationError(f"{setting} is not a usable PostgreSQL URL: use {URL_FORM}.")


def describe(location: str | Path, setting: str) -> str:
    """A journal's location for a message: the file's path, or `postgresql://host:port/database` (never the
    password), without opening anything."""
    if is_server_location(location):
        return f"postgresql://{server_url(str(location), setting).where}"
    return str(location)


def _durable(dbapi_connection: Any, _record: Any) -> None:
    """Every SQLite connection: WAL, and `synchronous=FULL` so a write that returned is on disk even if the
    process dies at once (the pragmas are SQLite's own; `connect` event, as SQLAlchemy documents)."""
    dbapi_connection.execute("pragma journal_mode = wal")
    dbapi_connection.execute("pragma synchronous = full")


def _begin_immediate(connection: Connection) -> None:
    """SQLAlchemy's recipe for SQLite transactions (the `begin` event emits BEGIN), as `begin immediate`."""
    connection.exec_driver_sql("begin immediate")


def _postgres_engine(url: LimiterUrl, schema: str, *, what: str, setting: str, timeout: float) -> Engine:
    """An engine on the journal's PostgreSQL (psycopg2, imported only now), in autocommit, its sessions set up
    by libpq's `options` (see the module docstring): `schema` first on their `search_path`, so the journal's
    tables are found by their bare names, by Core statements and the `text()` of a check alike."""
    try:
        target = make_url(url.reveal())
    except ArgumentError:
        raise _not_a_url(setting) from None
    # a password given as a parameter goes where SQLAlchemy's reprs mask it
    target = target.difference_update_query(["password"]).set(
        drivername="postgresql+psycopg2", password=target.password or target.query.get("password"))
    session = (f"-c search_path={schema} -c synchronous_commit=on -c lock_timeout={max(1, round(timeout * 1000))}ms "
               f"-c idle_in_transaction_session_timeout={IDLE_IN_TRANSACTION_SECONDS}s")
    options = {"application_name": f"ocean-tracking {what}"[:63],
               "options": " ".join(filter(None, [target.query.get("options"), session]))}
    if "connect_timeout" not in target.query:
        options["connect_timeout"] = CONNECT_TIMEOUT_SECONDS
    try:
        engine = create_engine(target, isolation_level="AUTOCOMMIT", skip_autocommit_rollback=True,
                               hide_parameters=True, connect_args=options, executemany_mode="values_plus_batch",
                               executemany_batch_page_size=BATCH_ROWS)
    except ImportError as error:
        if not (error.name or "").startswith("psycopg2"):
            raise
        raise ConfigurationError("A PostgreSQL journal needs psycopg2: install the postgres extra "
                                 "(uv sync --frozen --extra postgres).") from None
    return engine


class JournalDatabase:
    """One journal's tables (`metadata`) where its location says: a SQLite file, or the schema
    `postgres_schema` of a PostgreSQL database (see the module docstring). `what` names the journal and
    `setting` its environment variable, for one-line errors; `timeout` bounds waits for locks."""

    errors: tuple[type[BaseException], ...] = (DBAPIError,)

    def __init__(self, location: str | Path, metadata: MetaData, *, what: str, setting: str, postgres_schema: str,
                 timeout: float | None = None) -> None:
        self.metadata, self.what, self.setting = metadata, what, setting
        timeout = lock_timeout_seconds() if timeout is None else timeout
        self.url: LimiterUrl | None = None
        if not is_server_location(location):
            self.path: Path | None = Path(location)
            self.schema: str | None = None
            self.engine = create_engine(URL.create("sqlite", database=str(self.path)), isolation_level="AUTOCOMMIT",
                                        skip_autocommit_rollback=True, hide_parameters=True,
                                        connect_args={"timeout": timeout, "check_same_thread": False})
            event.listen(self.engine, "connect", _durable)
            self._writing = self.engine.execution_options(isolation_level="SERIALIZABLE")
            event.listen(self._writing, "begin", _begin_immediate)
            self.insert = sqlite.insert  # the dialect's own INSERT: `on_conflict_do_*` are dialect constructs
            return
        if not SCHEMA_NAME.fullmatch(postgres_schema):
            raise ValueError(f"{postgres_schema!r} is not a schema name a journal can have")
        self.path, self.schema, self.url = None, postgres_schema, server_url(str(location), setting)
        self.engine = _postgres_engine(self.url, postgres_schema, what=what, setting=setting, timeout=timeout)
        self._writing = self.engine.execution_options(isolation_level="READ COMMITTED")
        self.insert = postgresql.insert

    def __repr__(self) -> str:
        return f"JournalDatabase({self.describe()})"

    def describe(self) -> str:
        """The journal's place for messages: the file, or `postgresql://host:port/database (schema ...)`, no password."""
        return str(self.path) if self.url is None else f"postgresql://{self.url.where} (schema {self.schema})"

    def connect(self) -> Connection:
        """A connection in autocommit: each statement is committed when it returns."""
        return self.engine.connect()

    def transaction(self) -> AbstractContextManager[Connection]:
        """One write transaction for the block: committed at its end, rolled back on any exception."""
        return self._writing.begin()

    def exclusive(self, purpose: str, what: str, *, timeout: float | None = None) -> AbstractContextManager[None]:
        """Hold the journal's `purpose` lock for the block, across processes and hosts, waiting (bounded,
        naming the holder) while another holds it: a lock file `<journal>.<purpose>.lock` beside a SQLite
        journal, a session advisory lock keyed by the journal and `purpose` on PostgreSQL."""
        if self.url is None:
            return exclusive_file_lock(self.path.with_name(f"{self.path.name}.{purpose}.lock"), what, timeout=timeout)
        return connections.advisory_lock(self.url.reveal(), self.schema, what, timeout=timeout,
                                              purpose=f"journal {purpose}")

    def create(self, if_lost: str) -> None:
        """Create what is missing of the journal (schema, tables, indexes), once (see the module docstring).
        `if_lost` says what starting a new journal would cost, for the error on a file that is not one."""
        tables = self.metadata.sorted_tables
        ddl = [*(CreateTable(table, if_not_exists=True) for table in tables),
               *(CreateIndex(index, if_not_exists=True) for table in tables for index in table.indexes)]
        with self._one_line(if_lost):
            if self.url is None:
                self.path.parent.mkdir(parents=True, exist_ok=True)
                with self.exclusive(CREATION_PURPOSE, f"the creation lock of the {self.what} {self.path}"), \
                        self.transaction() as connection:
                    for statement in ddl:
                        connection.execute(statement)
                return
            key = connections.advisory_key(connections.catalog_identity(self.url.reveal(), self.schema),
                                                DDL_PURPOSE)
            with self.connect() as probe:
                if not self._missing(probe):
                    return
                probe.execute(select(func.pg_advisory_lock(key)))
                try:
                    self._create_missing(ddl)
                finally:
                    if not probe.invalidated:
                        probe.execute(select(func.pg_advisory_unlock(key)))

    def _create_missing(self, ddl: list[Any]) -> None:
        """The DDL, in a transaction begun under the creation lock, if something is still missing. Only an
        index missing (a journal made before it was added) and no right to add it: a warning, the journal
        works without it and its owner adds it when it next opens the journal."""
        missing = list(self.metadata.tables)
        try:
            with self.transaction() as connection:
                if missing := self._missing(connection):
                    connection.execute(CreateSchema(self.schema, if_not_exists=True))
                    for statement in ddl:
                        connection.execute(statement)
        except DBAPIError as error:
            if set(missing) & set(self.metadata.tables):
                raise
            logger.warning("The %s has no index %s and this role cannot add it (%s): its owner adds it when it "
                           "next opens the journal.", self.describe(), ", ".join(missing), self._reason(error))

    def _missing(self, connection: Connection) -> list[str]:
        """The journal's tables and indexes not in its PostgreSQL schema (yet), in one query."""
        names = [*self.metadata.tables, *(index.name for table in self.metadata.sorted_tables for index in table.indexes)]
        found = connection.execute(select(*(func.to_regclass(f"{self.schema}.{name}") for name in names))).one()
        return [name for name, oid in zip(names, found, strict=True) if oid is None]

    def exists(self) -> bool:
        """Whether the journal was created (by a receiver, a batch, ...), creating nothing: the SQLite file
        exists, or every table is in the PostgreSQL schema."""
        if self.url is None:
            return self.path.exists()
        with self._one_line(""), self.connect() as connection:
            return not set(self._missing(connection)) & set(self.metadata.tables)

    def _reason(self, error: DBAPIError) -> str:
        """The driver's first line about `error`, any password scrubbed."""
        line = next((line.strip() for line in str(error.orig).splitlines() if line.strip()), type(error.orig).__name__)
        return redact(line, self.engine.url.password if self.url is not None else None)

    @contextmanager
    def _one_line(self, if_lost: str) -> Iterator[None]:
        """The driver's errors while opening, as one ConfigurationError saying what to do."""
        try:
            yield
        except DBAPIError as error:
            self.close()
            if self.url is None:
                raise ConfigurationError(
                    f"{self.path} is not a readable {self.what} ({self._reason(error)}). Restore it from a backup, "
                    f"or move it away to start a new journal ({if_lost})."
                ) from None
            raise ConfigurationError(
                f"Cannot use the {self.what} in PostgreSQL at {self.url.where} ({self._reason(error)}). Start the "
                f"server, or fix {self.setting} ({URL_FORM})."
            ) from None

    def close(self) -> None:
        """Close the journal's connections (idempotent)."""
        self.engine.dispose()


# ---- the notification journal ----------------------------------------------------------------------

NOTIFICATION_TYPE = "webhook_notification"
PENDING, APPLIED, FAILED = "pending", "applied", "failed"
STATUSES = (PENDING, APPLIED, FAILED)
MAX_ERROR_CHARS = 2000
CHUNK = 500  # keys per `in (...)` query, well under SQLite's limit on bound parameters
POSTGRES_SCHEMA = "ocean_tracking_webhooks"  # a named account's: ocean_tracking_webhooks_<account>
WHAT = "webhook journal"

NOTIFICATION_TABLES = MetaData()
notifications = Table(
    "notifications", NOTIFICATION_TABLES,
    Column("seq", ROW_ID, Identity(), primary_key=True),  # arrival order: the tie-breaker of one instant's
    Column("id", Text, nullable=False, unique=True), Column("event", Text, nullable=False),
    Column("created_at", Text, nullable=False), Column("received_at", Text, nullable=False),
    Column("reference_type", Text), Column("reference_id", Text), Column("body", Text, nullable=False),
    Column("status", Text, nullable=False, server_default=PENDING), Column("error", Text),
    Column("applied_at", Text), Column("run_id", Text),
    Index("notifications_by_status", "status", "created_at", "seq"),
    Index("notifications_by_applied_at", "applied_at"),
    sqlite_autoincrement=True,
)  # fmt: skip
applied_versions = Table("applied_versions", NOTIFICATION_TABLES, Column("object_key", Text, primary_key=True),
                         Column("created_at", Text, nullable=False))
heartbeat = Table(
    "heartbeat", NOTIFICATION_TABLES,
    Column("only_row", BigInteger, CheckConstraint("only_row = 1"), primary_key=True, autoincrement=False),
    Column("beat_at", Text, nullable=False), Column("url", Text, nullable=False), Column("pid", BigInteger, nullable=False),
)  # fmt: skip
_LISTED = select(notifications.c["id", "event", "created_at", "received_at", "reference_type", "reference_id", "body",
                                  "status", "error", "applied_at", "run_id"]).order_by(notifications.c.created_at,
                                                                                       notifications.c.seq)
# built once: the receiver, the consumer and the sensors run these again and again
_MARK = update(notifications).where(notifications.c.id == bindparam("ident"))  # SET: the columns given
_COUNTS = select(notifications.c.status, func.count()).group_by(notifications.c.status)
_VERSIONS = select(applied_versions).where(applied_versions.c.object_key.in_(bindparam("keys", expanding=True)))
_LAST_BEAT = select(heartbeat.c.beat_at, heartbeat.c.url)


def postgres_schema(account: Account | None = None) -> str:
    """The PostgreSQL schema of an account's journal (the one account's, or a named account's own)."""
    return (account or Account()).suffixed(POSTGRES_SCHEMA)


@dataclass(frozen=True)
class Notification:
    """One journaled notification: its id (the idempotency key), event, when the service created it and when it
    arrived (UTC), its object, the parsed document, its status, and when (by which run) its load committed."""

    id: str
    event: str
    created_at: datetime
    received_at: datetime
    reference_type: str | None
    reference_id: str | None
    document: dict[str, Any]
    status: str
    error: str | None
    applied_at: datetime | None = None
    run_id: str | None = None


def _stamp(moment: datetime) -> str:
    """A UTC instant as fixed-width text, so SQLite orders and compares the stored values correctly."""
    if moment.tzinfo is None:
        raise ValueError("a journal time must be timezone-aware")
    return moment.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%S.%fZ")


def _instant(text: str) -> datetime:
    return datetime.fromisoformat(text).astimezone(UTC)


def _now() -> str:
    return _stamp(datetime.now(UTC))


def _json(text: bytes | str) -> Any:
    """Parse a notification body with orjson: strict JSON in UTF-8, nested at most 1024 levels, refused with a
    ValueError past that without recursing on the Python stack. Python's `json` recurses once a level, so a
    signed body nested 100,000 deep raised RecursionError (a 500) instead of being refused; the journal reads
    back with the same parser so what it accepted it can always read."""
    return orjson.loads(text)


def parse_notification(body: bytes) -> dict[str, Any]:
    """The JSON:API document of a webhook notification, checked for what the journal needs (`data.id`,
    `data.type`, `data.attributes.event`); InputError with a one-line reason otherwise."""
    try:
        document = _json(body)
    except orjson.JSONDecodeError as error:
        reason = str(error).partition("\n")[0]
        raise InputError(f"the body is not UTF-8 JSON nested at most 1024 deep ({reason}), so it is not a "
                         "webhook notification") from None
    data = document.get("data") if isinstance(document, dict) else None
    if not isinstance(data, dict):
        raise InputError("the body has no `data` object, so it is not a webhook notification")
    if not isinstance(data.get("id"), str) or not data["id"]:
        raise InputError("data.id is missing: a webhook notification needs its id")
    if data.get("type") != NOTIFICATION_TYPE:
        raise InputError(f"data.type is not {NOTIFICATION_TYPE!r}")
    attributes = data.get("attributes")
    if not isinstance(attributes, dict) or not isinstance(attributes.get("event"), str) or not attributes["event"]:
        raise InputError("data.attributes.event is missing: a webhook notification names its event")
    created = attributes.get("created_at")
    if created is not None:
        try:
            parsed = datetime.fromisoformat(created) if isinstance(created, str) else None
        except ValueError:
            parsed = None
        if parsed is None:
            raise InputError("data.attributes.created_at is not an ISO 8601 timestamp")
    return document


def _created_at(document: dict[str, Any], received: datetime) -> datetime:
    """When the service created the notification (a time without zone is UTC); when absent, its arrival."""
    created = document["data"]["attributes"].get("created_at")
    if created is None:
        return received
    moment = datetime.fromisoformat(created)
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


def _reference(document: dict[str, Any]) -> tuple[str | None, str | None]:
    relationships = document["data"].get("relationships")
    reference = relationships.get("reference_object") if isinstance(relationships, dict) else None
    target = reference.get("data") if isinstance(reference, dict) else None
    if not isinstance(target, dict):
        return None, None
    kind, ident = target.get("type"), target.get("id")
    return (kind if isinstance(kind, str) else None), (ident if isinstance(ident, str) else None)


class NotificationJournal:
    """Reads and writes the notification journal; every write is committed before it returns.

    `location` is a SQLite file or a PostgreSQL URL (default: `settings.webhook_journal_location(account)`);
    `account` picks a named account's own schema in a PostgreSQL database (its own file is its location).
    Safe to share between threads (the receiver calls it from a thread pool: one lock, one connection at a
    time) and between processes and hosts (the database's locks; a held write lock is waited for, up to the
    lock timeout). `errors` are the errors that mean the journal cannot be written right now."""

    def __init__(self, location: str | Path | None = None, *, account: Account | None = None,
                 timeout: float | None = None) -> None:
        location = location if location is not None else webhook_journal_location(account)
        self._lock = threading.Lock()
        self._db = JournalDatabase(location, NOTIFICATION_TABLES, what=WHAT, setting=WEBHOOK_JOURNAL_ENV,
                                   postgres_schema=postgres_schema(account), timeout=timeout)
        self._db.create(if_lost="notifications it held would have to be re-fetched from the API")
        self.path: Path | None = self._db.path
        self.errors: tuple[type[BaseException], ...] = self._db.errors
        insert = self._db.insert
        self._record = insert(notifications).on_conflict_do_nothing(index_elements=[notifications.c.id])
        newer = insert(applied_versions)
        self._newer = newer.on_conflict_do_update(
            index_elements=[applied_versions.c.object_key], set_={"created_at": newer.excluded.created_at},
            where=newer.excluded.created_at > applied_versions.c.created_at)
        beat = insert(heartbeat)
        self._beat = beat.on_conflict_do_update(index_elements=[heartbeat.c.only_row],
                                                set_={c: beat.excluded[c] for c in ("beat_at", "url", "pid")})

    @staticmethod
    def exists(location: str | Path | None = None, *, account: Account | None = None) -> bool:
        """Whether the journal at `location` (default: the configured one) was created, by a receiver or
        anything else, creating nothing: without one no webhooks are in use here, so a sensor or check has
        nothing to read."""
        location = location if location is not None else webhook_journal_location(account)
        database = JournalDatabase(location, NOTIFICATION_TABLES, what=WHAT, setting=WEBHOOK_JOURNAL_ENV,
                                   postgres_schema=postgres_schema(account))
        try:
            return database.exists()
        finally:
            database.close()

    def __enter__(self) -> NotificationJournal:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        return f"NotificationJournal({self._db.describe()!r})"

    def close(self) -> None:
        """Close the journal (idempotent)."""
        with self._lock:
            self._db.close()

    @contextmanager
    def consuming(self, timeout: float | None = None) -> Iterator[None]:
        """Be the journal's one consumer for the block, on any host: take `pending()`, apply, mark, inside it.
        Waits (up to `timeout`, default the lock timeout, naming the holder) while another consumer is in its
        block; a consumer that dies releases it."""
        what = f"the consumer lock of the webhook journal {self._db.describe()}"
        with self._db.exclusive("consumer", what, timeout=timeout):
            yield

    # ---- notifications ----------------------------------------------------------------------------

    def record(self, body: bytes, received_at: datetime | None = None) -> bool:
        """Journal one delivery as `pending` (committed before this returns); False, changing nothing, when
        its id was recorded before (a retried delivery). InputError when the body is not a notification."""
        document = parse_notification(body)
        received = received_at if received_at is not None else datetime.now(UTC)
        data = document["data"]
        reference_type, reference_id = _reference(document)
        values = {"id": data["id"], "event": data["attributes"]["event"],
                  "created_at": _stamp(_created_at(document, received)), "received_at": _stamp(received),
                  "reference_type": reference_type, "reference_id": reference_id, "body": body.decode("utf-8")}
        with self._lock, self._db.connect() as connection:
            return connection.execute(self._record, values).rowcount == 1

    def pending(self, limit: int | None = None) -> list[Notification]:
        """The notifications still to apply, in the order the service created them (then arrival order)."""
        return self._listed(notifications.c.status == PENDING, limit=limit)

    def failed(self, limit: int = 100) -> list[Notification]:
        """The notifications whose application failed (oldest first), with their errors."""
        return self._listed(notifications.c.status == FAILED, limit=limit)

    def applied_since(self, since: datetime) -> list[Notification]:
        """The notifications applied at or after `since` (oldest created first): the feed's lag behind the service."""
        return self._listed(notifications.c.applied_at >= _stamp(since))

    def delivered_between(self, since: datetime, until: datetime) -> list[Notification]:
        """The notifications that arrived in [since, until), whatever their status (a measurement's window)."""
        return self._listed(notifications.c.received_at >= _stamp(since), notifications.c.received_at < _stamp(until))

    def _listed(self, *where: Any, limit: int | None = None) -> list[Notification]:
        with self._lock, self._db.connect() as connection:
            rows = connection.execute(_LISTED.where(*where).limit(limit)).all()
        return [
            Notification(id=ident, event=event, created_at=_instant(created), received_at=_instant(received),
                         reference_type=ref_type, reference_id=ref_id, document=_json(body), status=state,
                         error=error, applied_at=_instant(applied) if applied else None, run_id=run_id)
            for ident, event, created, received, ref_type, ref_id, body, state, error, applied, run_id in rows
        ]

    def mark_applied(self, ids: Iterable[str], run_id: str | None = None) -> None:
        """Mark notifications applied (by the run `run_id`, when given), all in one transaction."""
        idents = sorted(set(ids))  # one order for every writer's row locks
        if not idents:
            return
        marked = {"status": APPLIED, "applied_at": _now(), "run_id": run_id, "error": None}
        with self._lock, self._db.transaction() as connection:
            connection.execute(_MARK, [{"ident": ident, **marked} for ident in idents])

    def mark_failed(self, id: str, error: str) -> None:
        """Mark one notification failed with the error's text (cut to 2000 characters)."""
        with self._lock, self._db.connect() as connection:
            connection.execute(_MARK, {"ident": id, "status": FAILED, "error": error[:MAX_ERROR_CHARS]})

    def retry_failed(self) -> int:
        """Put every failed notification back to pending (its error cleared); how many."""
        with self._lock, self._db.connect() as connection:
            return connection.execute(update(notifications).where(notifications.c.status == FAILED).values(
                status=PENDING, error=None)).rowcount

    def counts(self) -> dict[str, int]:
        """Notifications per status (pending, applied and failed always present)."""
        with self._lock, self._db.connect() as connection:
            rows = connection.execute(_COUNTS)
            return {**dict.fromkeys(STATUSES, 0), **dict(rows.all())}

    def newest_received_at(self) -> datetime | None:
        """When the latest notification arrived, or None before the first."""
        return self._newest(notifications.c.received_at)

    def newest_created_at(self) -> datetime | None:
        """The service's creation time of its newest notification journaled, or None before the first."""
        return self._newest(notifications.c.created_at)

    def _newest(self, column: Column[str]) -> datetime | None:
        with self._lock, self._db.connect() as connection:
            value = connection.scalar(select(func.max(column)))
        return _instant(value) if value is not None else None

    # ---- no-regression versions -------------------------------------------------------------------

    def applied_versions(self, keys: Iterable[str]) -> dict[str, datetime]:
        """For each object key that has one, the `created_at` of the newest notification applied to it."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, datetime] = {}
        with self._lock, self._db.connect() as connection:
            for start in range(0, len(wanted), CHUNK):
                rows = connection.execute(_VERSIONS, {"keys": wanted[start:start + CHUNK]})
                found.update((key, _instant(created)) for key, created in rows)
        return found

    def record_applied_versions(self, versions: Mapping[str, datetime]) -> None:
        """Remember the newest applied version per object key; an older one never replaces a newer one."""
        if not versions:
            return
        rows = [{"object_key": key, "created_at": stamp}  # one order for every writer's row locks
                for key, stamp in sorted((key, _stamp(moment)) for key, moment in versions.items())]
        with self._lock, self._db.transaction() as connection:
            connection.execute(self._newer, rows)

    # ---- the receiver's heartbeat -----------------------------------------------------------------

    def beat(self, url: str, pid: int) -> None:
        """Say the receiver at `url` (process `pid`) is alive now; a monitor reads it with `last_beat`."""
        with self._lock, self._db.connect() as connection:
            connection.execute(self._beat, {"only_row": 1, "beat_at": _now(), "url": url, "pid": pid})

    def last_beat(self) -> tuple[datetime, str] | None:
        """When a receiver last said it was alive, and its URL; None if none ever ran on this journal."""
        with self._lock, self._db.connect() as connection:
            row = connection.execute(_LAST_BEAT).first()
        return (_instant(row[0]), row[1]) if row else None
