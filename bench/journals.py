"""Per-operation cost of the two journals (webhook notifications, write-back), on SQLite and PostgreSQL.

    python bench/journals.py [--ops 2000] [--repeat 5] [--backend sqlite|postgres|both] [--code-dir PATH]

Times, through each journal's public API, what the hot paths call once per event: the webhook receiver's
`NotificationJournal.record(body)` (a new notification, committed before the 2xx) and its heartbeat
(`beat`); a write-back batch's per-row calls inside `WritebackStore.batch()`: the intent
(`record_tracking_outcome(row, "pending", intent_at=...)`, an insert), the audit entry (`audit`), the outcome
(`record_tracking_outcome(row, "accepted", ...)`, an upsert over the intent) and reading one outcome back
(`tracking_outcome`); the batch's one `held_numbers` read, for 10 numbers and for all `--ops` numbers; and
the consumer's `pending()` of `--ops` rows (inside `consuming()`). Each repeat starts from empty journals (a
new SQLite file, a new PostgreSQL database), runs `--ops` calls of each (`held_numbers` of all and `pending()`:
`max(5, ops // 200)` calls) and takes wall time / calls, and this process's CPU time / calls (what the journal's
Python and driver code cost, without the waits: an fsync, a round trip, the server's own work, another
process on the core); the table is the median over `--repeat` repeats, in µs per call. Nothing is asserted.

SQLite journals are files in a temporary folder (WAL, `synchronous=FULL`, as the journals open them: every
write an fsync of that disk). PostgreSQL is a throwaway PostgreSQL 15 on loopback, started and removed here
with the tests' helper (`tests/support/postgres.py`: initdb in a temporary folder, fsync off; the journals
still ask `synchronous_commit = on`).

`--code-dir PATH` times another checkout's journals (imported from PATH; this script, its tables and the
PostgreSQL helper come from this checkout): the journals in `pipelines/journals` (SQLAlchemy Core) or, before
them, `pipelines/webhooks/journal.py` and `pipelines/writeback/store.py` (hand-written sqlite3/psycopg2 SQL),
whichever PATH has. To compare with the code before the change:

    git worktree add /tmp/journals-before be565bd
    python bench/journals.py --code-dir /tmp/journals-before
    python bench/journals.py
    git worktree remove /tmp/journals-before
"""

from __future__ import annotations

import argparse
import importlib.util
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from contextlib import ExitStack, contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from types import ModuleType
from typing import Any

from bench_table import render

HERE = Path(__file__).resolve().parent
REPO = HERE.parent
HEARTBEAT_URL = "http://127.0.0.1:8765/webhooks/ocean-tracking"
OPERATIONS = (
    "record a notification (receiver)",
    "receiver heartbeat (beat)",
    "record an intent (insert)",
    "audit entry",
    "record an outcome (upsert over the intent)",
    "read one outcome (tracking_outcome)",
    "held_numbers, 10 numbers",
    "held_numbers, all numbers",
    "pending(), all rows",
)


def load_journals(code_dir: Path | None) -> tuple[type, type, str]:
    """NotificationJournal and WritebackStore of `code_dir` (default: whatever `pipelines` this interpreter
    imports), from the new layout (`pipelines.journals`) or the old one; and where they came from."""
    if code_dir is not None:
        sys.path.insert(0, str(code_dir))
    try:
        from pipelines.journals import NotificationJournal
        from pipelines.journals.writes import WritebackStore
    except ModuleNotFoundError as error:
        if error.name not in ("pipelines.journals", "pipelines.journals.writes"):
            raise
        from pipelines.webhooks.journal import NotificationJournal  # the layout up to be565bd
        from pipelines.writeback.store import WritebackStore
    source = Path(sys.modules[NotificationJournal.__module__].__file__)
    if code_dir is not None and code_dir not in source.parents:
        raise SystemExit(f"--code-dir {code_dir}: the journals were imported from {source} instead")
    return NotificationJournal, WritebackStore, str(source)


def postgres_helper() -> ModuleType:
    """This checkout's `tests/support/postgres.py` (start_server, stop_server), by its path: with --code-dir
    `tests` could otherwise resolve to the other checkout's."""
    spec = importlib.util.spec_from_file_location("bench_postgres_helper", REPO / "tests/support/postgres.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module  # dataclasses look their module up there
    spec.loader.exec_module(module)
    return module


def notification_body(n: int, start: datetime) -> bytes:
    """One webhook_notification as the service sends it (the tests' `tests/support/notifications.py` shape)."""
    document = {
        "data": {
            "id": str(uuid.uuid4()), "type": "webhook_notification",
            "attributes": {"event": "container.transport.vessel_departed", "delivery_status": "pending",
                           "created_at": (start + timedelta(seconds=n)).strftime("%Y-%m-%dT%H:%M:%SZ")},
            "relationships": {"webhook": {"data": {"id": "8a5ffa8f", "type": "webhook"}},
                              "reference_object": {"data": {"type": "transport_event", "id": str(uuid.uuid4())}}},
        },
        "included": [],
    }  # fmt: skip
    return json.dumps(document).encode("utf-8")


def tracking_row(n: int) -> dict[str, Any]:
    """A batch row's record (`TrackingRow.as_record()`): key, index, number, type, SCAC."""
    return {"row_key": uuid.uuid4().hex, "row_index": n, "request_number": f"MEDU{n:07d}",
            "request_type": "bill_of_lading", "scac": "MSCU"}


def per_call_us(call: Callable[[int], Any], calls: int) -> tuple[float, float]:
    """Wall time and this process's CPU time of `calls` calls of `call(i)`, in µs per call."""
    started, cpu = time.perf_counter(), time.process_time()
    for i in range(calls):
        call(i)
    return (time.perf_counter() - started) / calls * 1e6, (time.process_time() - cpu) / calls * 1e6


def one_repeat(
    notification_journal: type, writeback_store: type, locations: tuple[Any, Any], ops: int
) -> dict[str, tuple[float, float]]:
    """Every operation once, `ops` calls each, on empty journals at `locations` (notifications, write-back)."""
    bulk_calls = max(5, ops // 200)
    start = datetime(2026, 11, 27, tzinfo=UTC)
    bodies = [notification_body(n, start) for n in range(ops)]
    rows = [tracking_row(n) for n in range(ops)]
    numbers = [(row["request_type"], row["request_number"]) for row in rows]
    pid, took = os.getpid(), {}
    with ExitStack() as stack:
        journal = notification_journal(locations[0])
        stack.callback(journal.close)
        took[OPERATIONS[0]] = per_call_us(lambda i: journal.record(bodies[i]), ops)
        took[OPERATIONS[1]] = per_call_us(lambda i: journal.beat(HEARTBEAT_URL, pid), ops)
        with journal.consuming():
            took[OPERATIONS[8]] = per_call_us(lambda i: journal.pending(), bulk_calls)
        store = writeback_store(locations[1])
        stack.callback(store.close)
        with store.batch():
            intent = datetime.now(UTC).isoformat()

            def record_intent(i: int) -> None:
                store.record_tracking_outcome(rows[i], "pending", intent_at=intent)

            def audit(i: int) -> None:
                target = f"tracking_request:bill_of_lading:{rows[i]['request_number']}"
                store.audit("create_tracking_request", target, "accepted", http_status=201)

            def record_outcome(i: int) -> None:
                store.record_tracking_outcome(rows[i], "accepted", tracking_request_id=str(i), http_status=201,
                                              errors=[], intent_at=intent)

            def held_ten(i: int) -> None:
                first = i % (ops - 9)
                store.held_numbers(numbers[first:first + 10])

            took[OPERATIONS[2]] = per_call_us(record_intent, ops)
            took[OPERATIONS[3]] = per_call_us(audit, ops)
            took[OPERATIONS[4]] = per_call_us(record_outcome, ops)
            took[OPERATIONS[5]] = per_call_us(lambda i: store.tracking_outcome(rows[i]["row_key"]), ops)
            took[OPERATIONS[6]] = per_call_us(held_ten, ops)
            took[OPERATIONS[7]] = per_call_us(lambda i: store.held_numbers(numbers), bulk_calls)
    return took


@contextmanager
def sqlite_locations() -> Iterator[Callable[[], tuple[Path, Path]]]:
    """A fresh pair of journal files per call, in one temporary folder removed at the end."""
    with tempfile.TemporaryDirectory(prefix="bench-journals-") as folder:
        counter = iter(range(1_000_000))

        def fresh() -> tuple[Path, Path]:
            n = next(counter)
            return Path(folder, f"webhooks_{n}.sqlite"), Path(folder, f"writeback_{n}.sqlite")

        yield fresh


@contextmanager
def postgres_locations() -> Iterator[Callable[[], tuple[str, str]]]:
    """A throwaway server; a fresh database per call, both journals in it (their own schemas, as deployed)."""
    helper = postgres_helper()
    server = helper.start_server()
    try:
        counter = iter(range(1_000_000))

        def fresh() -> tuple[str, str]:
            name = f"bench_journals_{next(counter)}"
            server.execute(f"create database {name}")
            return server.dsn(name), server.dsn(name)

        yield fresh
    finally:
        helper.stop_server(server.root)


def code_label(code_dir: Path | None, source: str) -> str:
    """The checkout timed: its commit (and whether its tree differs from it), and the journals' module file."""
    folder = code_dir or REPO
    described = subprocess.run(["git", "-C", str(folder), "describe", "--always", "--dirty"],
                               capture_output=True, text=True).stdout.strip()
    return f"{folder} at {described or '?'} ({source})"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.partition("\n")[0])
    parser.add_argument("--ops", type=int, default=2000, help="calls per operation and repeat (default 2000)")
    parser.add_argument("--repeat", type=int, default=5, help="repeats, each on empty journals (default 5)")
    parser.add_argument("--backend", choices=("sqlite", "postgres", "both"), default="both")
    parser.add_argument("--code-dir", type=Path, help="time the journals of another checkout (e.g. a git worktree)")
    args = parser.parse_args()
    if args.ops < 10:
        parser.error("--ops must be at least 10")
    code_dir = args.code_dir.resolve() if args.code_dir else None
    notification_journal, writeback_store, source = load_journals(code_dir)
    backends = ["sqlite", "postgres"] if args.backend == "both" else [args.backend]
    print(f"journals of {code_label(code_dir, source)}")
    print(f"{args.ops} calls per operation ({max(5, args.ops // 200)} for held_numbers of all and pending()), "
          f"{args.repeat} repeats on empty journals, medians of µs per call (wall; CPU of this process)", flush=True)
    medians: dict[str, dict[str, float]] = {}
    for backend in backends:
        with (sqlite_locations() if backend == "sqlite" else postgres_locations()) as fresh:
            runs = []
            for k in range(args.repeat):
                runs.append(one_repeat(notification_journal, writeback_store, fresh(), args.ops))
                walls = ", ".join(f"{runs[-1][op][0]:.0f}" for op in OPERATIONS)
                print(f"{backend} repeat {k + 1} (wall µs): {walls}", flush=True)
        for kind, index in (("", 0), (" CPU", 1)):
            medians[backend + kind] = {op: statistics.median(run[op][index] for run in runs) for op in OPERATIONS}
    print()
    labels = {OPERATIONS[7]: f"held_numbers, all {args.ops:,} numbers", OPERATIONS[8]: f"pending(), {args.ops:,} rows"}
    table = [[labels.get(op, op), *(round(medians[column][op]) for column in medians)] for op in OPERATIONS]
    print(render(["operation", *(f"{column} µs" for column in medians)], table))

if __name__ == "__main__":
    main()
