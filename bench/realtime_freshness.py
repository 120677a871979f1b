"""Freshness at the real clock: from a webhook's delivery to the raw row and to the mart row, under Dagster.

What a deployment runs, at the service's real pace: a sandbox of `--shipments` shipments whose clock runs at
real speed with the real budget (100 requests per 60 s), the webhook receiver journaling its signed deliveries,
and a real `dagster-daemon run` with the project's definitions (its sensors, automation and run queue as
`dagster.yaml` sets them). The world changes as the sandbox's does: about 150 changes an hour at 10k shipments,
in bursts when a vessel calls (up to 66 in one second).

1. **Build** (once; `--workdir` keeps it): a frozen sandbox with a short rate window, and `python -m pipelines
   sync` (maps and models), kept in `<workdir>/pristine`. A first sync at the real window would cost 3.2 hours.
2. **Measure**: a copy of that lake, the sandbox restarted at the real clock from the same instant, the
   receiver, the daemon started, the webhook registered; the window opens once the instance's first runs are
   done (at most `--warmup` minutes); `--minutes` of changes counted, then `--grace` minutes for the last ones
   to land.
3. **Poll**: the daemon stopped, `python -m pipelines sync --no-maps --no-models` on the lake as it was before
   the window: what an hourly poll spends to catch up with the same changes (the requests an
   hour of polling costs, at the least: an hour holds more changes than the window).

Per notification delivered in the window (the journal's `received_at`):
- **raw**: its `applied_at`, marked right after the load that committed it (an upper bound);
- **mart**: the end of the first models step (`analytics_models`) that started after its load: every
  incremental mart of that build is committed by then (a view reads the raw row at once);
- a notification not applied, or not built, by the end counts as a miss (infinite).
The stages: waiting for the sensor's tick (and for a run in progress), the run's queue and launch, the refresh
(the run worker's start to the load committed), the models. Requests are the `api_requests` tags of the
notification runs, the map runs' apart.

    python bench/realtime_freshness.py [--shipments 10000] [--minutes 20] [--grace 3] [--warmup 8] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

from daemon_run import DaemonDeployment, sandbox_env
from webhook_freshness import quantiles, requests_by_key

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.journals import NotificationJournal
from pipelines.webhooks.receiver import ReceiverThread, register_webhook
from sandbox.launcher import SandboxProcess, start_sandbox

REPO_ROOT = Path(__file__).resolve().parents[1]
API_KEY = "sbx_bench_realtime_0000000000000001"
START = "2026-11-01T00:00:00Z"
SEED = "49"
BUILD_WINDOW = 0.05
REAL_WINDOW = 60.0
MODELS_STEP = "analytics_models"
NOTIFICATIONS_JOB = "apply_webhook_notifications"
MAPS_JOB = "refresh_route_maps"
MISS = float("inf")


def sandbox_at(window: float, shipments: int, speed: float, webhook_tick: float | None = None) -> SandboxProcess:
    """The bench's sandbox: the same seeded world from the same instant, at `speed` with `window` (and its
    webhook deliveries every `webhook_tick` seconds; 0: only when `/_sandbox/webhooks/tick` is posted)."""
    tick = () if webhook_tick is None else ("--webhook-tick", str(webhook_tick))
    return start_sandbox("--shipments", str(shipments), "--seed", SEED, "--start", START, "--speed", str(speed),
                         "--rate-window", str(window), "--api-key", API_KEY, *tick, timeout=900)


def cli_sync(env: dict[str, str], *flags: str) -> None:
    """`python -m pipelines sync` as a user runs it, in a process of its own."""
    subprocess.run([sys.executable, "-m", "pipelines", "sync", "--no-progress", *flags], cwd=REPO_ROOT, env=env,
                   check=True, stdout=subprocess.DEVNULL)


def build_base(workdir: Path, shipments: int) -> None:
    """The lake at the world's start instant (maps and models), through a frozen sandbox's short window, kept
    in `<workdir>/pristine`. It is used at `<workdir>/live/data` only: the catalog holds its data path."""
    if (workdir / "pristine" / "done").exists():
        print(f"base lake: reused {workdir / 'pristine'}")
        return
    shutil.rmtree(workdir / "live", ignore_errors=True)
    shutil.rmtree(workdir / "pristine", ignore_errors=True)
    started = time.perf_counter()
    with sandbox_at(BUILD_WINDOW, shipments, speed=0) as sandbox:
        cli_sync(sandbox_env(sandbox, workdir / "live", BUILD_WINDOW))
    shutil.copytree(workdir / "live" / "data", workdir / "pristine")
    (workdir / "pristine" / "done").write_text("")
    print(f"base lake: built in {time.perf_counter() - started:.0f} s")


def restored(workdir: Path) -> Path:
    """`<workdir>/live/data` as the base lake left it."""
    shutil.rmtree(workdir / "live", ignore_errors=True)
    shutil.copytree(workdir / "pristine", workdir / "live" / "data")
    return workdir / "live" / "data"


@dataclass
class RunTimes:
    """One Dagster run's instants (epoch seconds) and what it spent."""

    job: str
    created: float
    started: float
    ended: float
    requests: int
    models_step: tuple[float, float] | None  # start, end


def run_times(deployment: DaemonDeployment, since: datetime) -> dict[str, RunTimes]:
    """The runs of the deployment's instance created from `since` on, by id."""
    import dagster as dg

    runs: dict[str, RunTimes] = {}
    with deployment.instance() as instance:
        for record in instance.get_run_records(dg.RunsFilter(created_after=since)):
            run = record.dagster_run
            steps: dict[str, float] = {}
            models = None
            for event in instance.all_logs(run.run_id, of_type={dg.DagsterEventType.STEP_START,
                                                                 dg.DagsterEventType.STEP_SUCCESS}):
                if event.step_key != MODELS_STEP:
                    continue
                if event.dagster_event.event_type == dg.DagsterEventType.STEP_START:
                    steps["start"] = event.timestamp
                else:
                    models = (steps["start"], event.timestamp)
            runs[run.run_id] = RunTimes(run.job_name, record.create_timestamp.timestamp(), record.start_time or MISS,
                                        record.end_time or MISS, int(run.tags.get("ocean_tracking/api_requests", 0)),
                                        models)
    return runs


@dataclass
class Change:
    """One delivered notification's path, in seconds from its delivery."""

    event: str
    raw: float
    mart: float
    stages: dict[str, float]


STAGES = ("sensor tick and runs ahead", "queue and launch", "refresh (worker start to load committed)", "models")


def changes_in(journal_path: Path, runs: dict[str, RunTimes], since: datetime, until: datetime) -> list[Change]:
    """The notifications delivered in [since, until), each with its seconds to the raw and the mart row."""
    with NotificationJournal(journal_path) as journal:
        delivered = journal.delivered_between(since, until)
    builds = sorted(run.models_step for run in runs.values() if run.models_step)
    changes = []
    for notification in delivered:
        received = notification.received_at.timestamp()
        run = runs.get(notification.run_id or "")
        if notification.applied_at is None or run is None:
            changes.append(Change(notification.event, MISS, MISS, dict.fromkeys(STAGES, MISS)))
            continue
        applied = notification.applied_at.timestamp()
        built = min((end for start, end in builds if start >= applied), default=MISS)
        created, started = max(run.created, received), max(run.started, received)
        changes.append(Change(notification.event, applied - received, built - received, {
            STAGES[0]: created - received, STAGES[1]: started - created, STAGES[2]: applied - started,
            STAGES[3]: built - applied}))
    return changes


def seconds(value: float) -> str:
    return "miss" if value == MISS else f"{value:.1f}"


def report(changes: list[Change], runs: dict[str, RunTimes], minutes: float, poll_requests: int) -> None:
    """Print the latencies, the stage table and the requests."""
    print(f"\n{len(changes)} notifications delivered in {minutes:g} minutes "
          f"({sum(c.raw == MISS for c in changes)} never applied, {sum(c.mart == MISS for c in changes)} never built)")
    print(f"{'seconds from delivery':28} {'p50':>7} {'p95':>7} {'max':>7}")
    for name, values in (("to the raw row", [c.raw for c in changes]), ("to the mart row", [c.mart for c in changes])):
        print(f"{name:28} " + " ".join(f"{seconds(value):>7}" for value in quantiles(values)))
    finished = [c for c in changes if c.mart != MISS]
    total = sum(c.mart for c in finished) or 1.0
    print(f"\n{'stage':42} {'p50 s':>7} {'p95 s':>7} {'share':>6}")
    for stage in STAGES:
        values = [c.stages[stage] for c in finished]
        p50, p95, _ = quantiles(values)
        print(f"{stage:42} {seconds(p50):>7} {seconds(p95):>7} {sum(values) / total:>6.0%}")
    for job in (NOTIFICATIONS_JOB, MAPS_JOB):
        chosen = [run for run in runs.values() if run.job == job]
        walls = [run.ended - run.created for run in chosen if run.ended != MISS]
        print(f"{job}: {len(chosen)} runs, median wall {statistics.median(walls) if walls else 0:.1f} s, "
              f"{sum(run.requests for run in chosen)} requests")
    others = sorted({run.job for run in runs.values()} - {NOTIFICATIONS_JOB, MAPS_JOB})
    for job in others:
        print(f"{job}: {sum(run.job == job for run in runs.values())} runs")
    spent = sum(run.requests for run in runs.values() if run.job == NOTIFICATIONS_JOB)
    hourly = spent * 60 / minutes
    print(f"notification requests: {spent} in {minutes:g} min, {hourly:.0f} an hour; an hourly poll of the same "
          f"changes: {poll_requests}; ratio {hourly / poll_requests:.1%} (goal <= 5 %)")


def settle(deployment: DaemonDeployment, timeout: float, at_least: float = 60.0) -> None:
    """Wait out a fresh instance's first runs, at most `timeout` seconds: the automation sensor materializes
    every asset it has never seen (the lake's models and files exist, the instance does not know them). A
    deployment does that once; the window opens after. Map refreshes (and the drawings after them) are not
    waited for past the timeout: they recur all day, as they do in a deployment."""
    import dagster as dg

    started = time.monotonic()
    with deployment.instance() as instance:
        while time.monotonic() - started < timeout:
            busy = instance.get_run_records(dg.RunsFilter(statuses=[
                dg.DagsterRunStatus.QUEUED, dg.DagsterRunStatus.NOT_STARTED, dg.DagsterRunStatus.STARTING,
                dg.DagsterRunStatus.STARTED]))
            if all(r.dagster_run.job_name == MAPS_JOB for r in busy) and time.monotonic() - started >= at_least:
                break
            time.sleep(2)
        runs = instance.get_run_records()
    print(f"warm-up: {time.monotonic() - started:.0f} s, {len(runs)} runs: "
          + ", ".join(f"{r.dagster_run.job_name} {r.dagster_run.status.value} "
                      f"{(r.end_time or time.time()) - r.create_timestamp.timestamp():.0f} s" for r in runs))


def measure(workdir: Path, shipments: int, minutes: float, grace: float, warmup: float) -> None:
    """Run the deployment at the real clock on the base lake and report."""
    data = restored(workdir)
    with sandbox_at(REAL_WINDOW, shipments, speed=1) as sandbox:
        env = sandbox_env(sandbox, data.parent, REAL_WINDOW)
        journal_path = data / "webhook_journal.sqlite"
        registered: dict = {}
        with ReceiverThread(journal_path, lambda: registered["secret"]) as receiver:
            settings = load_settings(api_key=API_KEY, base_url=sandbox.base_url, rate_window_seconds=REAL_WINDOW)
            with DaemonDeployment(workdir / "live" / "dagster", env) as deployment:
                with OceanTrackingClient(settings) as client:  # the service notifies changes made from now on
                    registered["secret"] = register_webhook(client, receiver.url).secret
                settle(deployment, timeout=warmup * 60)
                since = datetime.now(UTC)
                print(f"measuring {minutes:g} min from {since:%H:%M:%S} UTC, then {grace:g} min of grace")
                time.sleep(minutes * 60)
                until = datetime.now(UTC)
                time.sleep(grace * 60)
                runs = run_times(deployment, since)
            changes = changes_in(journal_path, runs, since, until)
        before = requests_by_key(sandbox, API_KEY)
        cli_sync(sandbox_env(sandbox, restored(workdir).parent, REAL_WINDOW), "--no-maps", "--no-models")
        poll_requests = requests_by_key(sandbox, API_KEY) - before
    report(changes, runs, minutes, poll_requests)


def main(argv: list[str] | None = None) -> int:
    """Build the base lake once, then measure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=10_000)
    parser.add_argument("--minutes", type=float, default=20.0, help="real minutes of changes counted")
    parser.add_argument("--grace", type=float, default=3.0, help="real minutes for the last changes to land")
    parser.add_argument("--warmup", type=float, default=8.0,
                        help="real minutes at most for a fresh instance's first runs before the window opens")
    parser.add_argument("--workdir", type=Path, help="keep the base lake here (default: a temporary folder)")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="realtime-") as tmp:
        workdir = args.workdir or Path(tmp)
        build_base(workdir, args.shipments)
        measure(workdir, args.shipments, args.minutes, args.grace, args.warmup)
    return 0


if __name__ == "__main__":
    sys.exit(main())
