"""A soak: simulated days of hourly operation on one lake, faults included, then the lake against a fresh sync.

    uv run python bench/soak.py [--days 30] [--shipments 1000] [--retention-days 7] [--window 1]
                                [--time-scale 0.2] [--workdir DIR] [--hours-per-day 24] [--kill-hour 9]
                                [--maintenance-hour 3] [--writeback-hour 12] [--burst-hours 14,15] [--hung-hour 20]

One sandbox (`python -m sandbox`, frozen clock, seed 7) whose world moves only when the soak moves its clock:
one simulated hour at a time, so the world changes between syncs as the live service's does (arrivals,
holds, ETAs, vessels at sea). Every simulated hour of every day, on ONE lake:

- a sync as the schedule runs it: `python -m pipelines sync` (the CLI's own `main`, models on, maps on) in a
  process of its own, whose peak RSS (VmHWM, with that of any child it waited for) is its figure; the 00:00
  sync's build runs every dbt test, as the first build of a day does (`OCEAN_TRACKING_EVERY_TEST_HOURS`, which
  counts real hours), the others the tests of the raw tables and marts they rebuild;
- after the 03:00 sync, the nightly maintenance (`maintain_lake`), its snapshot expiry measured by simulated
  age (see `LakeClock`);
- after the 12:00 sync, a write-back batch (`python -m pipelines patch-ref-numbers`, a few shipments' ref
  numbers from a CSV), which writes into the service and publishes its outcomes into the lake;
- an analyst beside it all: one read-only DuckDB session on the lake, in a process of its own, querying the
  marts every second from the first sync to the end, never reconnecting; its errors are counted;
- injected faults: a 5xx burst (14:00 and 15:00: the sandbox's `5xx` profile; those syncs must succeed on
  their retries), a sync SIGKILLed mid-load (09:00: killed by this process as soon as dlt's load stage holds a
  normalized package; the next sync must finish it), and one hung hour (20:00 of the middle day: every
  answer held past the client's deadline; that sync fails, the next one recovers).

Client time settings (timeouts, backoff, deadline) are multiplied by `--time-scale` (as bench/fault_survival.py)
so a hung hour costs seconds; the rate window is `--window` seconds. Per simulated day it prints the lake's
disk (data files + catalog, `ducklake/`), the catalog's size and rows, live snapshots, snapshots expired,
peak RSS of the syncs, the analyst's queries, errors and median query time, and the day's wall time. After the
last hour (the clock left where it is), a fresh full sync of the same world at the same instant into a new lake (its models built
whole by `dbt build` without dbt's tests: a reference; the soaked lake's builds ran them), and every raw
table and mart compared: rows in one and not the other (EXCEPT ALL, both ways), dlt's own columns (`_dlt_*`: load and row ids,
a history row's `_dlt_valid_from`, nested rows' parent ids) left out, history tables by their current rows
(`_dlt_valid_to is null`). Listed apart from the verdict: the marts built on the history tables (dbt manifest
lineage; the soak's lake holds every version it saw, a fresh sync only the current one), and the tables a sync
refetches by policy rather than on change (vessels, once ever; route maps, when due) with the marts built on
them. The pipeline's bookkeeping (`fetch_log`, `sync_issues`) is left out. Then the done-when verdicts.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import resource
import signal
import sqlite3
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from bisect import bisect_left
from contextlib import closing
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import requests
from bench_memory import CHILD_FLAG, Meter, report, run_child
from bench_table import render

START = datetime(2026, 11, 1, tzinfo=UTC)
MAINTENANCE_HOUR, WRITEBACK_HOUR, KILL_HOUR, HUNG_HOUR = 3, 12, 9, 20
BURST_HOURS = (14, 15)
BURST_RATE = 0.05  # of the requests of a burst hour, the share that starts a burst of 1-3 5xx answers
WRITEBACK_ROWS = 3  # shipments whose ref numbers a day's write-back batch adds to
ANALYST_EVERY = 1.0  # seconds between the analyst's queries
# The analyst's query: marts an analyst reads, and the newest load, in one statement.
ANALYST_QUERY = """
select
    (select max(load_id) from ocean_tracking._dlt_loads) as newest_load,
    (select count(*) from analytics.container_status) as containers,
    (select count(*) from analytics.demurrage_exposure) as exposure,
    (select count(*) from analytics.port_calls) as port_calls
"""
# Catalog tables whose rows the soak follows: they must not grow with the schedule.
CATALOG_TABLES = (
    "ducklake_snapshot",
    "ducklake_snapshot_changes",
    "ducklake_data_file",
    "ducklake_delete_file",
    "ducklake_table",
    "ducklake_column",
    "ducklake_files_scheduled_for_deletion",
)
TIME_SETTINGS = {
    "CONNECT_TIMEOUT": 10.0,
    "READ_TIMEOUT": 30.0,
    "BACKOFF_FACTOR": 1.0,
    "REQUEST_DEADLINE": 90.0,
}
KILLED, HUNG = "killed mid-load", "hung hour"
# The pipeline's own records of when it fetched what (and which items failed): not the service's data, and
# different in any two lakes.
BOOKKEEPING = ("fetch_log", "sync_issues")
# Raw tables a sync refetches by policy, not on every change (sources/__init__.py: a vessel is "fetched by id
# once, ever", a route map "only when due"): their rows, and the marts built on them, follow the world with
# that lag, so they are listed apart from the verdict.
FETCHED_BY_POLICY = {"vessels", "map_features"}
DISK_LIMIT, MEMORY_LIMIT = 2.0, 1.2  # last day / day 1


@dataclass
class SoakConfig:
    """What to run: the world, how long, which hours the daily events fall on, and where."""

    base_url: str
    api_key: str
    workdir: Path
    days: int = 30
    hours_per_day: int = 24
    retention_days: float = 7.0
    window: float = 1.0
    time_scale: float = 0.2
    start: datetime = START
    maintenance_hour: int = MAINTENANCE_HOUR
    writeback_hour: int | None = WRITEBACK_HOUR
    kill_hour: int | None = KILL_HOUR
    burst_hours: tuple[int, ...] = BURST_HOURS
    hung_hour: int | None = HUNG_HOUR  # on the middle day only
    grace: timedelta = timedelta(seconds=30)  # cleanup's grace, real seconds: longer than any analyst query
    quiet: bool = False
    app_url: str | None = None  # the web app's URL the deep links use; a lake carried on from keeps its build's

    @property
    def root_url(self) -> str:
        """The sandbox's root (its control endpoints live under /_sandbox)."""
        return self.base_url.removesuffix("/v2")


@dataclass
class Run:
    """One operation of the soak: what, at which simulated instant, how it ended, what it cost."""

    day: int
    what: str
    at: datetime
    ok: bool
    seconds: float
    peak_mib: float = 0.0
    injected: str | None = None  # the fault this run was meant to meet (its failure is the fault's own)
    detail: str = ""


@dataclass
class DayFigures:
    """The lake and the day's runs at the end of one simulated day."""

    day: int
    lake_bytes: int
    catalog_bytes: int
    catalog_rows: dict[str, int]
    snapshots: int
    expired: int
    peak_mib: float
    syncs: int
    failed: int
    analyst_queries: int
    analyst_errors: int
    analyst_ms: float  # the analyst's median query: every query on the lake pays the catalog's size
    seconds: float


@dataclass
class Comparison:
    """Rows in one lake and not the other, per relation: those the verdict counts, those that follow the
    fetch policy, and the row counts (soaked, fresh) of the marts built on the history tables."""

    differences: dict[str, int] = field(default_factory=dict)
    by_fetch_policy: dict[str, int] = field(default_factory=dict)
    history_derived: dict[str, tuple[int, int]] = field(default_factory=dict)


@dataclass
class SoakResult:
    """Everything the soak measured: per-day figures, every run, the analyst, and the final comparison."""

    days: list[DayFigures] = field(default_factory=list)
    runs: list[Run] = field(default_factory=list)
    analyst_errors: list[str] = field(default_factory=list)
    comparison: Comparison = field(default_factory=Comparison)
    kills_missed: int = 0
    seconds: float = 0.0

    @property
    def unexpected_failures(self) -> list[Run]:
        """Runs that failed without an injected fault to answer for it, or succeeded where one should have
        failed them (a hung hour that did not hang)."""
        return [run for run in self.runs if not run.ok and run.injected is None]

    @property
    def expired(self) -> int:
        """Snapshots expired by the maintenance runs."""
        return sum(day.expired for day in self.days)

    def verdicts(self) -> list[tuple[str, Any, str, bool]]:
        """The done-when figures: (figure, value, limit, met)."""
        first, last = self.days[0], self.days[-1]
        disk = last.lake_bytes / first.lake_bytes
        memory = last.peak_mib / first.peak_mib if first.peak_mib else float("inf")
        rows = sum(abs(count) for count in self.comparison.differences.values())
        failed = len(self.unexpected_failures)
        return [
            ("failed runs other than the injected faults' own", failed, "0", failed == 0),
            ("analyst query errors", len(self.analyst_errors), "0", not self.analyst_errors),
            ("rows different from a fresh sync", rows, "0", rows == 0),
            ("disk last day / day 1", round(disk, 2), f"<= {DISK_LIMIT:g}", disk <= DISK_LIMIT),
            ("peak RSS last day / day 1", round(memory, 2), f"<= {MEMORY_LIMIT:g}", memory <= MEMORY_LIMIT),
            ("snapshots expired during the run", self.expired, "> 0", self.expired > 0),
        ]


class LakeClock:
    """Simulated instants on the lake's clock.

    DuckLake stamps each snapshot with the real time of its commit, while the soak lives hours of simulated
    time in seconds. Each operation's simulated instant is marked with the real instant it began; a snapshot
    committed after the mark of simulated instant s (and before the next mark) is s old. Maintenance at
    simulated `now` must expire the snapshots older than `now - retention` in simulated time: those committed
    before the first mark at or after `now - retention`. `maintain_lake` measures age from the instant it is
    given, so it is given that real instant plus the retention."""

    def __init__(self) -> None:
        self.simulated: list[datetime] = []
        self.real: list[datetime] = []

    def mark(self, simulated: datetime) -> None:
        """An operation of simulated instant `simulated` starts now."""
        self.simulated.append(simulated)
        self.real.append(datetime.now(UTC))

    def now_for(self, simulated_now: datetime, retention: timedelta) -> datetime:
        """The `now` to give `maintain_lake` at `simulated_now` so it expires by simulated age."""
        first_kept = bisect_left(self.simulated, simulated_now - retention)
        cutoff = self.real[first_kept] if first_kept < len(self.real) else datetime.now(UTC)
        return cutoff + retention


# ---- processes -------------------------------------------------------------------------------------------


def cli_env(config: SoakConfig, data_dir: Path, dlt_dir: Path) -> dict[str, str]:
    """The environment of a CLI process of the soak: the sandbox's key and URL, the scaled time settings,
    the lake under `data_dir`, dlt's folders under `dlt_dir`. Nothing of the shell's warehouse settings."""
    from pipelines.settings import CLEANUP_GRACE_ENV

    prefix = "SOURCES__OCEAN_TRACKING__"
    env = {
        name: value
        for name, value in os.environ.items()
        if not name.startswith(("DESTINATION__", "OCEAN_TRACKING_", prefix))
    }
    env.update({f"{prefix}{name}": str(value * config.time_scale) for name, value in TIME_SETTINGS.items()})
    env.update({
        f"{prefix}API_KEY": config.api_key, f"{prefix}BASE_URL": config.base_url,
        f"{prefix}RATE_WINDOW_SECONDS": str(config.window), f"{prefix}LIMITER_PATH": str(dlt_dir / "limiter.sqlite"),
        "OCEAN_TRACKING_DATA_DIR": str(data_dir), "OCEAN_TRACKING_PIPELINES_DIR": str(dlt_dir),
        "DLT_DATA_DIR": str(dlt_dir / "home"), "PYTHONPATH": str(Path(__file__).resolve().parents[1]),
    })  # fmt: skip
    # the syncs' cleanup of the files let go has the maintenance's grace: a real hour spans simulated days here
    env[CLEANUP_GRACE_ENV] = str(config.grace.total_seconds() / 60)
    if config.app_url is not None:  # another URL than the one the models were built with would rebuild them all
        env[f"{prefix}APP_URL"] = config.app_url
    return env


def child_main(spec_json: str) -> None:
    """Inside a child: the CLI's `main` with the spec's arguments, in the spec's environment; reports its
    exit code and the process tree's peak RSS (its own VmHWM, and the largest child it waited for)."""
    spec = json.loads(spec_json)
    os.environ.clear()
    os.environ.update(spec["env"])
    meter = Meter()
    from pipelines.cli import main

    code = main(spec["argv"])
    children_mib = resource.getrusage(resource.RUSAGE_CHILDREN).ru_maxrss / 1024
    figures = meter.figures()
    report({**figures, "peak_mib": max(figures["peak_mib"], children_mib), "code": code})


def run_cli(argv: list[str], env: dict[str, str]) -> tuple[bool, float, str]:
    """`python -m pipelines ARGV` as a child of this script (`child_main`): ok, peak RSS MiB, and the error."""
    try:
        result = run_child(__file__, {"argv": argv, "env": env})
    except RuntimeError as error:  # the child died without reporting: its traceback's tail
        return False, 0.0, str(error).splitlines()[-1][:200]
    return result["code"] == 0, result["peak_mib"], f"exit {result['code']}" if result["code"] else ""


def killed_mid_load(argv: list[str], env: dict[str, str], dlt_dir: Path) -> tuple[bool, str]:
    """Run the CLI child and SIGKILL it as soon as dlt's load stage holds a normalized package (the load is
    under way); (killed, detail). A sync that ends before its load could be caught is not killed."""
    process = subprocess.Popen(
        [sys.executable, __file__, CHILD_FLAG, json.dumps({"argv": argv, "env": env})],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    while process.poll() is None:
        loading = next(dlt_dir.glob("*/*/load/normalized/*"), None) or next(
            dlt_dir.glob("*/load/normalized/*"), None
        )
        if loading is not None:
            process.send_signal(signal.SIGKILL)
            process.wait()
            return True, f"SIGKILL while loading package {loading.name}"
        time.sleep(0.01)
    return False, f"the sync ended (exit {process.returncode}) before its load could be caught"


class Analyst:
    """One read-only session on the lake in a process of its own (`--analyst CATALOG`), querying the marts
    every `ANALYST_EVERY` seconds until stopped; its answers are collected on a thread."""

    def __init__(self, catalog: Path, env: dict[str, str]) -> None:
        self.process = subprocess.Popen(
            [sys.executable, __file__, "--analyst", str(catalog)],
            env=env,
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.lines: list[dict[str, Any]] = []
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            self.lines.append(json.loads(line))

    def stop(self) -> None:
        """Close its stdin (it ends after its current query) and wait for it."""
        assert self.process.stdin is not None
        self.process.stdin.close()
        self.process.wait(60)
        self._reader.join(10)


def analyst_main(catalog: str) -> None:
    """Inside the analyst's process: one read-only session, a query every `ANALYST_EVERY` s, one JSON line
    each (the newest load and mart counts, or the error), until stdin closes. Never reconnects."""
    from pipelines.warehouse import WarehouseStore

    closed = threading.Event()
    threading.Thread(target=lambda: (sys.stdin.read(), closed.set()), daemon=True).start()
    with WarehouseStore(catalog=f"sqlite:///{catalog}").connect(read_only=True) as con:
        while not closed.is_set():
            started = time.monotonic()
            try:
                load, containers, exposure, calls = con.execute(ANALYST_QUERY).fetchone()
                line: dict[str, Any] = {
                    "load": load,
                    "containers": containers,
                    "exposure": exposure,
                    "port_calls": calls,
                }
            except Exception as error:  # the figure being measured: every error counts
                line = {"error": f"{type(error).__name__}: {str(error).splitlines()[0][:200]}"}
            line["seconds"] = round(time.monotonic() - started, 3)
            print(json.dumps(line), flush=True)
            closed.wait(ANALYST_EVERY)


# ---- the sandbox ------------------------------------------------------------------------------------------


def sandbox_post(config: SoakConfig, path: str, body: dict[str, Any]) -> dict[str, Any]:
    """POST a control endpoint of the sandbox (`/_sandbox/clock`, `/_sandbox/faults`)."""
    response = requests.post(f"{config.root_url}/_sandbox/{path}", json=body, timeout=30)
    response.raise_for_status()
    return response.json()


def sandbox_now(config: SoakConfig) -> datetime:
    """The sandbox's simulated instant."""
    now = requests.get(f"{config.root_url}/_sandbox/clock", timeout=30).json()["now"]
    return datetime.fromisoformat(now.replace("Z", "+00:00"))


# ---- the lake ---------------------------------------------------------------------------------------------


def catalog_figures(catalog: Path) -> tuple[int, dict[str, int]]:
    """The catalog's bytes (its file and WAL) and the rows of `CATALOG_TABLES`, read without DuckDB."""
    size = sum(path.stat().st_size for path in catalog.parent.glob(catalog.name + "*") if path.is_file())
    with closing(sqlite3.connect(f"file:{catalog}?mode=ro", uri=True)) as con:
        rows = {table: con.execute(f"select count(*) from {table}").fetchone()[0] for table in CATALOG_TABLES}
    return size, rows


def writeback_csv(store: Any, path: Path, day: int) -> None:
    """A day's patch-ref-numbers batch: `WRITEBACK_ROWS` shipments (a different few each day) get one more ref
    number, `SOAK-D<day>-<n>`."""
    with store.connect(read_only=True) as con:
        ids = [row[0] for row in con.execute(
            "select id from ocean_tracking.shipments order by id limit ? offset ?",
            [WRITEBACK_ROWS, day * WRITEBACK_ROWS]).fetchall()]  # fmt: skip
    with path.open("w", newline="") as out:
        writer = csv.writer(out)
        writer.writerow(["shipment_id", "ref_numbers"])
        writer.writerows([shipment, f"SOAK-D{day}-{n}"] for n, shipment in enumerate(ids))


def downstream_models(sources: set[str]) -> set[str]:
    """The models built on any of the raw tables `sources`, directly or through other models (the dbt
    manifest's lineage)."""
    from pipelines.warehouse.models import MANIFEST_PATH

    manifest = json.loads(MANIFEST_PATH.read_text())
    todo = [key for key, source in manifest["sources"].items() if source["name"] in sources]
    seen: set[str] = set()
    while todo:
        for child in manifest["child_map"].get(todo.pop(), []):
            if child not in seen:
                seen.add(child)
                todo.append(child)
    return {key.split(".")[-1] for key in seen if key.startswith("model.")}


def history_tables() -> set[str]:
    """The raw tables that keep every version (dlt SCD2): compared by their current rows."""
    from pipelines.source import TABLES

    return {name for name, table in TABLES.items() if table.scd2}


def compared_relations(con: Any) -> list[tuple[str, str]]:
    """Every raw table (`ocean_tracking`, dlt's own `_dlt_*` tables left out) and every mart (`analytics`,
    tables and views) of the lake attached as `LAKE_NAME`."""
    from pipelines.settings import LAKE_NAME

    return con.execute(
        "select schema_name, table_name from duckdb_tables() where database_name = ? and "
        "((schema_name = 'ocean_tracking' and not starts_with(table_name, '_dlt')) or schema_name = 'analytics') "
        "union select schema_name, view_name from duckdb_views() where database_name = ? and "
        "schema_name = 'analytics' order by all",
        [LAKE_NAME, LAKE_NAME],
    ).fetchall()


def build_reference_models(fresh: Any, app_url: str | None) -> None:
    """Every model and seed of the fresh lake, built whole, for the comparison: `dbt build` without dbt's tests
    (a reference, not a lake anyone reads; the soaked lake's builds ran them), a third less time. `app_url`:
    the soaked syncs' (None: the default a sync takes)."""
    from pipelines.api.config import DEFAULT_APP_URL
    from pipelines.warehouse.models import build_environment, dbt_args, dbt_target, dbt_vars, run_dbt

    variables = dbt_vars(fresh, app_url=app_url or DEFAULT_APP_URL)
    arguments = dbt_args("build", target=dbt_target(fresh), variables=variables)
    run_dbt([*arguments, "--exclude", "resource_type:test"], build_environment(fresh))


def compare_lakes(soaked: Any, fresh: Any) -> Comparison:
    """Every raw table and mart of `soaked` against `fresh`: rows in one and not the other (EXCEPT ALL both
    ways; -1: the relation is in one lake only or its columns differ), `_dlt_*` columns left out, history
    tables by their current rows. Apart: the pipeline's bookkeeping (left out), the tables fetched by policy
    and the marts built on them (`by_fetch_policy`), the marts built on the history (`history_derived`)."""
    import duckdb

    from pipelines.settings import LAKE_NAME

    derived = downstream_models(history_tables())
    policy = FETCHED_BY_POLICY | downstream_models(FETCHED_BY_POLICY)
    comparison = Comparison()
    with soaked.connect(read_only=True) as con:
        relations = [r for r in compared_relations(con) if r[1] not in BOOKKEEPING]
        columns = {(schema, table): [name for (name,) in con.execute(
            "select column_name from information_schema.columns where table_catalog = ? and table_schema = ? "
            "and table_name = ? order by ordinal_position", [LAKE_NAME, schema, table]).fetchall()]
            for schema, table in relations}  # fmt: skip
    with fresh.connect(read_only=True) as con:
        fresh_relations = {r for r in compared_relations(con) if r[1] not in BOOKKEEPING}
        con.execute(soaked.attach_sql(read_only=True).replace(f" AS {LAKE_NAME} (", " AS soaked ("))
        for schema, table in sorted(set(relations) | fresh_relations):
            name = f"{schema}.{table}"
            into = comparison.by_fetch_policy if table in policy else comparison.differences
            if (schema, table) not in fresh_relations or (schema, table) not in columns:
                into[name] = -1
                continue
            kept = ", ".join(f'"{c}"' for c in columns[(schema, table)] if not c.startswith("_dlt_"))
            current = " where _dlt_valid_to is null" if table in history_tables() else ""
            ours, theirs = (
                f'select {kept} from {db}."{schema}"."{table}"{current}' for db in ("soaked", "lake")
            )
            if table in derived:
                comparison.history_derived[name] = tuple(
                    con.execute(f"select count(*) from ({q})").fetchone()[0] for q in (ours, theirs)
                )
                continue
            try:
                into[name] = con.execute(
                    f"select (select count(*) from ({ours} except all {theirs})) "
                    f"+ (select count(*) from ({theirs} except all {ours}))"
                ).fetchone()[0]
            except duckdb.Error as error:  # columns of other types in one lake
                print(f"  {name}: not comparable ({str(error).splitlines()[0][:120]})", file=sys.stderr)
                into[name] = -1
    return comparison


# ---- the soak ---------------------------------------------------------------------------------------------


def run_soak(config: SoakConfig) -> SoakResult:
    """Run `config.days` simulated days on one lake (the module docstring says what a day holds), then the
    comparison with a fresh sync; returns the figures (printing progress unless `config.quiet`)."""
    from pipelines.settings import EVERY_TEST_HOURS_ENV
    from pipelines.warehouse import default_lake_in
    from pipelines.warehouse.maintenance import maintain_lake

    started = time.monotonic()
    data_dir, dlt_dir = config.workdir / "data", config.workdir / "dlt"
    env = cli_env(config, data_dir, dlt_dir)
    store = default_lake_in(data_dir)
    clock = LakeClock()
    result = SoakResult()
    analyst: Analyst | None = None
    retention = timedelta(days=config.retention_days)
    sync = ["sync", "--no-progress"]
    simulated = config.start
    sandbox_post(config, "faults", {"profile": "none", "routes": []})
    if store.exists():  # a lake to carry on from (the suite's short soak starts from a copy of a synced one)
        analyst = Analyst(store.catalog_file, env)

    def say(message: str) -> None:
        if not config.quiet:
            print(message, file=sys.stderr, flush=True)

    def record(run: Run) -> None:
        result.runs.append(run)
        say(
            f"  day {run.day + 1} {run.at:%H:%M} {run.what}: {'ok' if run.ok else 'FAILED'} in {run.seconds:.0f} s"
            f"{f', {run.peak_mib:.0f} MiB' if run.peak_mib else ''}{f' ({run.injected})' if run.injected else ''}"
            f" {run.detail}"
        )

    def hourly_sync(day: int, hour: int) -> None:
        nonlocal analyst
        at = simulated
        clock.mark(at)
        injected = None
        began = time.monotonic()
        if hour == config.kill_hour:
            killed, detail = killed_mid_load(sync, env, dlt_dir)
            result.kills_missed += not killed
            record(Run(day, "sync", at, not killed, time.monotonic() - began, injected=KILLED, detail=detail))
            return
        if hour == config.hung_hour and day == config.days // 2:
            injected = HUNG
            sandbox_post(
                config,
                "faults",
                {
                    "profile": "slow",
                    "rate": 1.0,
                    "seed": day,
                    "delay": 3 * TIME_SETTINGS["REQUEST_DEADLINE"] * config.time_scale,
                },
            )
        elif hour in config.burst_hours:
            injected = "5xx burst"
            sandbox_post(config, "faults", {"profile": "5xx", "rate": BURST_RATE, "seed": day * 24 + hour})
        # every dbt test once a simulated day (`EVERY_TEST_HOURS_ENV` counts real hours)
        ok, peak, detail = run_cli(sync, {**env, EVERY_TEST_HOURS_ENV: "0"} if hour == 0 else env)
        sandbox_post(config, "faults", {"profile": "none"})
        if (
            injected == HUNG
        ):  # its failure is the fault's; a hung hour that did not fail the sync is a finding
            ok, detail = (
                not ok,
                f"failed as injected ({detail})" if detail else "the sync succeeded through a hung hour",
            )
        record(
            Run(
                day,
                "sync",
                at,
                ok,
                time.monotonic() - began,
                peak,
                injected if injected != "5xx burst" else None,
                detail,
            )
        )
        if analyst is None and store.exists():
            analyst = Analyst(store.catalog_file, env)

    try:
        for day in range(config.days):
            day_began, analyst_seen = time.monotonic(), len(analyst.lines) if analyst else 0
            expired = 0
            for hour in range(config.hours_per_day):
                simulated = config.start + timedelta(days=day, hours=hour)
                hourly_sync(day, hour)
                if hour == config.maintenance_hour:
                    simulated += timedelta(minutes=30)
                    clock.mark(simulated)
                    began = time.monotonic()
                    try:
                        report_ = maintain_lake(
                            store,
                            retention_days=config.retention_days,
                            grace=config.grace,
                            now=clock.now_for(simulated, retention),
                        )
                        expired += report_.snapshots_expired
                        record(
                            Run(
                                day,
                                "maintenance",
                                simulated,
                                True,
                                time.monotonic() - began,
                                detail=f"{report_.snapshots_expired} snapshots expired",
                            )
                        )
                    except Exception as error:  # a failed run, counted
                        record(
                            Run(
                                day,
                                "maintenance",
                                simulated,
                                False,
                                time.monotonic() - began,
                                detail=str(error).splitlines()[0][:200],
                            )
                        )
                if hour == config.writeback_hour:
                    simulated += timedelta(minutes=30)
                    clock.mark(simulated)
                    batch = config.workdir / f"refs-day{day + 1}.csv"
                    writeback_csv(store, batch, day)
                    began = time.monotonic()
                    ok, peak, detail = run_cli(["patch-ref-numbers", str(batch)], env)
                    record(
                        Run(day, "write-back", simulated, ok, time.monotonic() - began, peak, detail=detail)
                    )
                if (day, hour) != (config.days - 1, config.hours_per_day - 1):  # the fresh sync's instant
                    sandbox_post(config, "clock", {"advance_seconds": 3600})
            result.days.append(
                day_figures(config, store, result, day, expired, analyst, analyst_seen, day_began)
            )
            say(render_days(result.days[-1:]).splitlines()[-1])
    finally:
        sandbox_post(config, "faults", {"profile": "none"})
        if analyst is not None:
            analyst.stop()
            result.analyst_errors = [line["error"] for line in analyst.lines if "error" in line]
    fresh_data, fresh_dlt = config.workdir / "fresh" / "data", config.workdir / "fresh" / "dlt"
    ok, _, detail = run_cli([*sync, "--no-models"], cli_env(config, fresh_data, fresh_dlt))
    if not ok:
        raise RuntimeError(f"the fresh sync failed: {detail}")
    build_reference_models(default_lake_in(fresh_data), config.app_url)
    result.comparison = compare_lakes(store, default_lake_in(fresh_data))
    result.seconds = time.monotonic() - started
    return result


def day_figures(
    config: SoakConfig,
    store: Any,
    result: SoakResult,
    day: int,
    expired: int,
    analyst: Analyst | None,
    analyst_seen: int,
    began: float,
) -> DayFigures:
    """The lake at the end of `day` and what the day's runs cost."""
    # imported here, not at the top: each sync's child process would import the sandbox with it
    from scale import dir_bytes

    catalog_bytes, rows = catalog_figures(store.catalog_file)
    runs = [run for run in result.runs if run.day == day]
    lines = analyst.lines[analyst_seen:] if analyst else []
    return DayFigures(
        day + 1, dir_bytes(store.catalog_file.parent), catalog_bytes, rows, rows["ducklake_snapshot"], expired,
        max((run.peak_mib for run in runs if run.what == "sync"), default=0.0),
        sum(run.what == "sync" for run in runs), sum(not run.ok and run.injected is None for run in runs),
        len(lines), sum("error" in line for line in lines),
        1000 * statistics.median([line["seconds"] for line in lines]) if lines else 0.0, time.monotonic() - began,
    )  # fmt: skip


DAY_HEADERS = (
    "day",
    "lake MB",
    "catalog MB",
    "snapshots",
    "expired",
    "data files",
    "delete files",
    "columns",
    "scheduled del",
    "peak RSS MiB",
    "syncs",
    "failed",
    "analyst q",
    "analyst err",
    "analyst ms",
    "wall s",
)


def render_days(days: list[DayFigures]) -> str:
    """One row per simulated day."""
    return render(DAY_HEADERS, [
        (d.day, d.lake_bytes / 1e6, d.catalog_bytes / 1e6, d.snapshots, d.expired, d.catalog_rows["ducklake_data_file"],
         d.catalog_rows["ducklake_delete_file"], d.catalog_rows["ducklake_column"],
         d.catalog_rows["ducklake_files_scheduled_for_deletion"], round(d.peak_mib), d.syncs, d.failed,
         d.analyst_queries, d.analyst_errors, d.analyst_ms, d.seconds)
        for d in days
    ])  # fmt: skip


def print_report(result: SoakResult, config: SoakConfig) -> None:
    """The per-day table, the runs that met a fault, the comparison and the verdicts."""
    print(
        f"\n## Soak: {config.days} simulated days x {config.hours_per_day} hourly syncs, retention "
        f"{config.retention_days:g} days, rate window {config.window:g} s, times x{config.time_scale:g}\n"
    )
    print(render_days(result.days))
    syncs = [run.seconds for run in result.runs if run.what == "sync" and run.ok]
    print(
        f"\nsync wall s: median {statistics.median(syncs):.1f}, max {max(syncs):.1f}; wall per simulated day: "
        f"median {statistics.median(d.seconds for d in result.days):.0f} s; total {result.seconds:.0f} s"
    )
    faults = [run for run in result.runs if run.injected or not run.ok]
    print("\n## Runs that met a fault (or failed)\n")
    print(render(("day", "at", "run", "fault", "ok", "s", "detail"),
                 [(r.day + 1, f"{r.at:%Y-%m-%d %H:%M}", r.what, r.injected or "-", "yes" if r.ok else "no", r.seconds,
                   r.detail) for r in faults]))  # fmt: skip
    if result.kills_missed:
        print(f"{result.kills_missed} kill(s) missed: the sync ended before its load could be caught")
    comparison = result.comparison
    print(
        "\n## Against a fresh full sync at the same instant (rows in one lake only; -1: relation differs)\n"
    )
    print(render(("relation", "rows different"), sorted(comparison.differences.items())))
    print(
        f"\nFetched by policy ({', '.join(sorted(FETCHED_BY_POLICY))} and the marts built on them; not in the verdict):"
    )
    print(render(("relation", "rows different"), sorted(comparison.by_fetch_policy.items())))
    print("\nBuilt on the history tables (not comparable: the soaked lake kept every version it saw):")
    print(render(("mart", "rows soaked", "rows fresh"),
                 [(name, *counts) for name, counts in sorted(comparison.history_derived.items())]))  # fmt: skip
    if result.analyst_errors:
        print(f"\nanalyst errors (first 3 of {len(result.analyst_errors)}): {result.analyst_errors[:3]}")
    print("\n## Done-when verdicts\n")
    print(
        render(
            ("figure", "value", "limit", "met"),
            [(name, value, limit, "yes" if met else "NO") for name, value, limit, met in result.verdicts()],
        )
    )


def main(argv: list[str] | None = None) -> int:
    """Start the sandbox, run the soak, print the figures and verdicts (exit 1 when one is not met)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--days", type=int, default=30, help="simulated days")
    parser.add_argument(
        "--hours-per-day",
        type=int,
        default=24,
        help="hourly syncs per simulated day (fewer: a shorter day, for a quick proof)",
    )
    parser.add_argument("--kill-hour", type=int, default=KILL_HOUR, help="the sync killed mid-load each day")
    parser.add_argument("--maintenance-hour", type=int, default=MAINTENANCE_HOUR, help="maintenance after it")
    parser.add_argument(
        "--writeback-hour", type=int, default=WRITEBACK_HOUR, help="the write-back batch after it"
    )
    parser.add_argument("--burst-hours", default=",".join(map(str, BURST_HOURS)), help="5xx burst hours")
    parser.add_argument("--hung-hour", type=int, default=HUNG_HOUR, help="the hung hour, on the middle day")
    parser.add_argument("--shipments", type=int, default=1000, help="shipments in the sandbox world")
    parser.add_argument(
        "--retention-days",
        type=float,
        default=7.0,
        help="snapshot retention of the nightly maintenance, simulated days (shorter than the "
        "product's 30 so that snapshots expire within the run)",
    )
    parser.add_argument("--window", type=float, default=1.0, help="sandbox and client rate window, seconds")
    parser.add_argument(
        "--time-scale", type=float, default=0.2, help="multiplies timeouts, backoff, deadline"
    )
    parser.add_argument("--seed", type=int, default=7, help="sandbox world seed")
    parser.add_argument(
        "--workdir", type=Path, default=None, help="keep the lakes here (default: a temp dir)"
    )
    parser.add_argument(CHILD_FLAG, help=argparse.SUPPRESS)
    parser.add_argument("--analyst", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.memory_child:
        child_main(args.memory_child)
        return 0
    if args.analyst:
        analyst_main(args.analyst)
        return 0
    from bench_sync import API_KEY

    from sandbox.launcher import start_sandbox

    sandbox = start_sandbox("--shipments", str(args.shipments), "--seed", str(args.seed), "--rate-window",
                            str(args.window), "--speed", "0", "--start", START.isoformat(), "--api-key", API_KEY,
                            timeout=600)  # fmt: skip
    with sandbox, tempfile.TemporaryDirectory(prefix="bench-soak-") as tmp:
        config = SoakConfig(sandbox.base_url, API_KEY, args.workdir or Path(tmp), days=args.days,
                            hours_per_day=args.hours_per_day, retention_days=args.retention_days,
                            window=args.window, time_scale=args.time_scale, kill_hour=args.kill_hour,
                            maintenance_hour=args.maintenance_hour, writeback_hour=args.writeback_hour,
                            burst_hours=tuple(int(h) for h in args.burst_hours.split(",") if h.strip()),
                            hung_hour=args.hung_hour)  # fmt: skip
        config.workdir.mkdir(parents=True, exist_ok=True)
        result = run_soak(config)
        print_report(result, config)
    return 0 if all(met for *_, met in result.verdicts()) else 1


if __name__ == "__main__":
    sys.exit(main())
