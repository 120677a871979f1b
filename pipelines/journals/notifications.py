"""The webhook notification journal, one row per notification the service sent: its own SQLite file (WAL), or,
when `OCEAN_TRACKING_WEBHOOK_JOURNAL` is a PostgreSQL URL, its own schema of that database, so the receiver's pod
and every run's pod share it (`pipelines.journals`: the same statements and semantics on both).

The receiver records a delivery (committed: SQLite `synchronous=FULL`, PostgreSQL `synchronous_commit = on`)
before it answers 2xx, so a notification the service counts as delivered is never lost, even if the process
dies right after answering. The notification's `data.id` is the idempotency key (unique; `on conflict do
nothing`): a retried delivery is recognised and left alone. A consumer then takes the `pending` rows in the
order the service created them, applies them, and marks them `applied` (or `failed`, to be retried later). `applied_versions` remembers, per object, the newest notification applied to it, so an
older notification arriving late never overwrites newer state. The receiver's heartbeat lets a monitor tell
that it is down.

One consumer at a time (`consuming()`), on any host: a lock held from taking the pending rows until they are
marked (a lock file beside a SQLite journal, a session advisory lock on PostgreSQL, both released when the
holder dies). Not row locks (`FOR UPDATE SKIP LOCKED`): a refresh holds its rows for a whole load, minutes,
which row locks would need one open transaction for; and two consumers applying disjoint rows at once could
still load an object's older notification after another consumer loaded its newer one (each read
`applied_versions` before the other recorded), so no-regression needs one consumer anyway.

A named account has a journal of its own: its own file (`settings.webhook_journal_path(account)`), or its own
schema in the database (`ocean_tracking_webhooks_<account>`), as it has its own subscription, secret and receiver.

The journal is not the analysts' warehouse: the receiver never waits on a sync's write lock. Nothing stored is
a secret: bodies are what the service signed, never the signature or any header.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Iterator, Mapping
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import orjson

from pipelines.errors import InputError
from pipelines.journals import journal_exists, open_backend
from pipelines.settings import WEBHOOK_JOURNAL_ENV, Account, webhook_journal_location

NOTIFICATION_TYPE = "webhook_notification"
PENDING, APPLIED, FAILED = "pending", "applied", "failed"
STATUSES = (PENDING, APPLIED, FAILED)
MAX_ERROR_CHARS = 2000
_CHUNK = 500  # keys per `in (...)` query, well under SQLite's limit on bound parameters

_DDL = (
    # `seq` is the arrival order: the tie-breaker between notifications created in the same instant
    """create table if not exists notifications (
        seq integer primary key autoincrement, id text not null unique, event text not null,
        created_at text not null, received_at text not null, reference_type text, reference_id text,
        body text not null, status text not null default 'pending', error text, applied_at text,
        run_id text)""",
    "create index if not exists notifications_by_status on notifications (status, created_at, seq)",
    "create table if not exists applied_versions (object_key text primary key, created_at text not null)",
    """create table if not exists heartbeat (
        only_row integer primary key check (only_row = 1), beat_at text not null, url text not null,
        pid integer not null)""",
)
_COLUMNS = "id, event, created_at, received_at, reference_type, reference_id, body, status, error"
POSTGRES_SCHEMA = "ocean_tracking_webhooks"  # a named account's: ocean_tracking_webhooks_<account>
WHAT = "webhook journal"


def postgres_schema(account: Account | None = None) -> str:
    """The PostgreSQL schema of an account's journal (the one account's, or a named account's own)."""
    return (account or Account()).suffixed(POSTGRES_SCHEMA)


@dataclass(frozen=True)
class Notification:
    """One journaled notification: its id (the idempotency key), event name, when the service created it
    and when it arrived (UTC), the object it is about, the whole parsed document, and where it stands."""

    id: str
    event: str
    created_at: datetime
    received_at: datetime
    reference_type: str | None
    reference_id: str | None
    document: dict[str, Any]
    status: str
    error: str | None


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
    Safe to share between threads (the receiver calls it from a thread pool: one connection, one lock) and
    between processes and hosts (the database's locks; a held write lock is waited for, up to the lock
    timeout). `errors` are the driver's errors that mean the journal cannot be written right now."""

    def __init__(self, location: str | Path | None = None, *, account: Account | None = None,
                 timeout: float | None = None) -> None:
        location = location if location is not None else webhook_journal_location(account)
        self._lock = threading.Lock()
        self._db = open_backend(location, _DDL, what=WHAT, setting=WEBHOOK_JOURNAL_ENV, timeout=timeout,
                                postgres_schema=postgres_schema(account),
                                if_lost="notifications it held would have to be re-fetched from the API")
        self.path: Path | None = self._db.path
        self.errors: tuple[type[BaseException], ...] = self._db.errors

    @staticmethod
    def exists(location: str | Path | None = None, *, account: Account | None = None) -> bool:
        """Whether the journal at `location` (default: the configured one) was created, by a receiver or
        anything else, creating nothing: without one no webhooks are in use here, so a sensor or check has
        nothing to read."""
        location = location if location is not None else webhook_journal_location(account)
        return journal_exists(location, _DDL, what=WHAT, setting=WEBHOOK_JOURNAL_ENV,
                              postgres_schema=postgres_schema(account))

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
        values = [data["id"], data["attributes"]["event"], _stamp(_created_at(document, received)),
                  _stamp(received), reference_type, reference_id, body.decode("utf-8")]
        with self._lock:
            cursor = self._db.execute(
                "insert into notifications (id, event, created_at, received_at, reference_type, reference_id, "
                "body) values (?, ?, ?, ?, ?, ?, ?) on conflict (id) do nothing",
                values,
            )
        return cursor.rowcount == 1

    def pending(self, limit: int | None = None) -> list[Notification]:
        """The notifications still to apply, in the order the service created them (then arrival order)."""
        return self._select("where status = ?", [PENDING], limit)

    def failed(self, limit: int = 100) -> list[Notification]:
        """The notifications whose application failed (oldest first), with their errors."""
        return self._select("where status = ?", [FAILED], limit)

    def _select(self, where: str, params: list[Any], limit: int | None) -> list[Notification]:
        query = f"select {_COLUMNS} from notifications {where} order by created_at, seq"
        if limit is not None:
            query += " limit ?"
            params = [*params, int(limit)]
        with self._lock:
            rows = self._db.execute(query, params).fetchall()
        return [
            Notification(id=ident, event=event, created_at=_instant(created), received_at=_instant(received),
                         reference_type=ref_type, reference_id=ref_id, document=_json(body), status=status,
                         error=error)
            for ident, event, created, received, ref_type, ref_id, body, status, error in rows
        ]

    def mark_applied(self, ids: Iterable[str], run_id: str | None = None) -> None:
        """Mark notifications applied (by the run `run_id`, when given), all in one transaction."""
        idents = sorted(set(ids))  # one order for every writer's row locks
        if not idents:
            return
        stamp = _now()
        with self._lock, self._db.transaction():
            self._db.executemany(
                "update notifications set status = ?, applied_at = ?, run_id = ?, error = null where id = ?",
                [(APPLIED, stamp, run_id, ident) for ident in idents],
            )

    def mark_failed(self, id: str, error: str) -> None:
        """Mark one notification failed with the error's text (cut to 2000 characters)."""
        with self._lock:
            self._db.execute(
                "update notifications set status = ?, error = ? where id = ?", [FAILED, error[:MAX_ERROR_CHARS], id]
            )

    def retry_failed(self) -> int:
        """Put every failed notification back to pending (its error cleared); how many."""
        with self._lock:
            cursor = self._db.execute(
                "update notifications set status = ?, error = null where status = ?", [PENDING, FAILED]
            )
        return cursor.rowcount

    def counts(self) -> dict[str, int]:
        """Notifications per status (pending, applied and failed always present)."""
        with self._lock:
            rows = self._db.execute("select status, count(*) from notifications group by status").fetchall()
        return {**dict.fromkeys(STATUSES, 0), **dict(rows)}

    def newest_received_at(self) -> datetime | None:
        """When the latest notification arrived, or None before the first."""
        return self._newest("received_at")

    def newest_created_at(self) -> datetime | None:
        """The service's creation time of its newest notification journaled, or None before the first."""
        return self._newest("created_at")

    def _newest(self, column: str) -> datetime | None:
        with self._lock:
            (value,) = self._db.execute(f"select max({column}) from notifications").fetchone()
        return _instant(value) if value is not None else None

    # ---- no-regression versions -------------------------------------------------------------------

    def applied_versions(self, keys: Iterable[str]) -> dict[str, datetime]:
        """For each object key that has one, the `created_at` of the newest notification applied to it."""
        wanted = list(dict.fromkeys(keys))
        found: dict[str, datetime] = {}
        with self._lock:
            for start in range(0, len(wanted), _CHUNK):
                chunk = wanted[start:start + _CHUNK]
                marks = ", ".join("?" for _ in chunk)
                rows = self._db.execute(
                    f"select object_key, created_at from applied_versions where object_key in ({marks})", chunk
                ).fetchall()
                found.update((key, _instant(created)) for key, created in rows)
        return found

    def record_applied_versions(self, versions: Mapping[str, datetime]) -> None:
        """Remember the newest applied version per object key; an older one never replaces a newer one."""
        if not versions:
            return
        rows = sorted((key, _stamp(moment)) for key, moment in versions.items())  # one order for row locks
        with self._lock, self._db.transaction():
            self._db.executemany(
                "insert into applied_versions (object_key, created_at) values (?, ?) on conflict (object_key) "
                "do update set created_at = excluded.created_at where excluded.created_at > applied_versions.created_at",
                rows,
            )

    # ---- the receiver's heartbeat -----------------------------------------------------------------

    def beat(self, url: str, pid: int) -> None:
        """Say the receiver at `url` (process `pid`) is alive now; a monitor reads it with `last_beat`."""
        with self._lock:
            self._db.execute(
                "insert into heartbeat (only_row, beat_at, url, pid) values (1, ?, ?, ?) on conflict (only_row) "
                "do update set beat_at = excluded.beat_at, url = excluded.url, pid = excluded.pid",
                [_now(), url, pid],
            )

    def last_beat(self) -> tuple[datetime, str] | None:
        """When a receiver last said it was alive, and its URL; None if none ever ran on this journal."""
        with self._lock:
            row = self._db.execute("select beat_at, url from heartbeat").fetchone()
        return (_instant(row[0]), row[1]) if row else None
