"""A scheduled run's wall time against the CLI sync's, on the same sandbox data.

A scheduled run is not `execute_in_process`: the daemon queues it, the instance's run launcher starts a
run worker process that loads the code location, and the job's executor runs the steps. This script
starts a real `dagster-daemon run` on a throwaway instance made from the project's `dagster.yaml`,
launches `full_sync` through the instance (queue, launcher, executor: what a schedule tick does), and
times it from the run's creation to its end; then it times `python -m pipelines sync` (raw tables and
models, as a user runs it) into a fresh warehouse on the same sandbox. Both start from an empty warehouse.

    python bench/daemon_run.py [--shipments 200] [--repeat 3]

`DaemonDeployment` is also what the test of a daemon-launched run uses (tests/assets/test_daemon_run.py).
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from types import TracebackType

REPO_ROOT = Path(__file__).resolve().parents[1]
BIN = Path(sys.executable).parent
FINISHED = ("SUCCESS", "FAILURE", "CANCELED")


class DaemonDeployment:
    """A Dagster instance in `home` (the project's dagster.yaml, its `.dagster/` paths moved under `home`)
    with a real `dagster-daemon run` process serving the project's code location. Every `dagster` command
    runs at the project root without `-m`, as a deployment runs them: the code location is the one
    pyproject.toml's `[tool.dg.project]` names (`ocean_tracking`), the same for the daemon and the commands.

    `env` is the environment of the daemon, hence of its code server and of every run worker."""

    def __init__(self, home: Path, env: dict[str, str]):
        self.home = home
        self.env = {**env, "DAGSTER_HOME": str(home)}
        self.log_path = home / "daemon.log"
        self.process: subprocess.Popen | None = None

    def __enter__(self) -> DaemonDeployment:
        self.home.mkdir(parents=True, exist_ok=True)
        config = (REPO_ROOT / "dagster.yaml").read_text()
        (self.home / "dagster.yaml").write_text(re.sub(r"base_dir: \.dagster", f"base_dir: {self.home}/.dagster", config))
        with self.instance():
            pass  # creates the instance's SQLite storage before the daemon starts: two processes creating it at once can stamp its schema version twice
        with self.log_path.open("w") as log:
            self.process = subprocess.Popen(
                [str(BIN / "dagster-daemon"), "run"],
                cwd=REPO_ROOT, env=self.env, stdout=log, stderr=subprocess.STDOUT, start_new_session=True,
            )
        try:
            self.wait_until_ready()
        except BaseException:
            self.__exit__(None, None, None)
            raise
        return self

    def __exit__(self, kind: type[BaseException] | None, error: BaseException | None, tb: TracebackType | None) -> None:
        if self.process is not None and self.process.poll() is None:
            os.killpg(self.process.pid, signal.SIGTERM)
            try:
                self.process.wait(timeout=30)
            except subprocess.TimeoutExpired:
                os.killpg(self.process.pid, signal.SIGKILL)
                self.process.wait()

    def wait_until_ready(self, timeout: float = 120.0) -> None:
        """Block until the daemon's run queue reports a heartbeat: it has loaded the code location and
        dequeues runs (a deployment's daemon runs all along; its start-up is no run's cost)."""
        deadline = time.monotonic() + timeout
        with self.instance() as instance:
            while time.monotonic() < deadline:
                if "QUEUED_RUN_COORDINATOR" in instance.get_daemon_heartbeats():
                    return
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"the daemon exited ({self.process.returncode}); see {self.log_path}")
                time.sleep(0.25)
        raise TimeoutError(f"the daemon did not start within {timeout:.0f}s; see {self.log_path}")

    def instance(self):
        """The deployment's instance, opened from its DAGSTER_HOME."""
        import dagster as dg

        return dg.DagsterInstance.from_config(str(self.home))

    def launch(self, job: str) -> str:
        """Submit a run of `job` through the instance (its queue and run launcher) and return its id."""
        before = self.run_ids(job)
        launched = subprocess.run(
            [str(BIN / "dagster"), "job", "launch", "-j", job],
            cwd=REPO_ROOT, env=self.env, capture_output=True, text=True,
        )
        if launched.returncode != 0:
            errors = [line for line in launched.stderr.splitlines() if "Error" in line]
            raise RuntimeError(f"dagster job launch {job} failed: {errors[-1] if errors else launched.stderr[-500:]}")
        new = self.run_ids(job) - before
        if len(new) != 1:
            raise RuntimeError(f"expected one new run of {job}, found {len(new)}")
        return new.pop()

    def wait(self, run_id: str, timeout: float = 900.0):
        """Wait until the run ends and return its record (status, create and end timestamps)."""
        deadline = time.monotonic() + timeout
        with self.instance() as instance:
            while time.monotonic() < deadline:
                record = instance.get_run_record_by_id(run_id)
                if record is not None and record.dagster_run.status.value in FINISHED:
                    return record
                if self.process is not None and self.process.poll() is not None:
                    raise RuntimeError(f"the daemon exited ({self.process.returncode}); see {self.log_path}")
                time.sleep(0.25)
        raise TimeoutError(f"run {run_id} did not finish within {timeout:.0f}s; see {self.log_path}")

    def run_ids(self, job: str) -> set[str]:
        """The ids of every run of `job` in the instance."""
        import dagster as dg

        with self.instance() as instance:
            return {run.run_id for run in instance.get_runs(filters=dg.RunsFilter(job_name=job))}


def sandbox_env(sandbox, workdir: Path, rate_window: float) -> dict[str, str]:
    """The environment pointing the pipeline at `sandbox` and at a fresh data folder in `workdir`."""
    from pipelines.settings import API_KEY_ENV, APP_URL_ENV, BASE_URL_ENV, DATA_DIR_ENV, RATE_WINDOW_ENV

    return {
        **os.environ,
        API_KEY_ENV: sandbox.api_key,
        BASE_URL_ENV: sandbox.base_url,
        APP_URL_ENV: sandbox.app_url,
        RATE_WINDOW_ENV: str(rate_window),
        DATA_DIR_ENV: str(workdir / "data"),
    }


def cli_sync_seconds(env: dict[str, str]) -> float:
    """Wall seconds of `python -m pipelines sync` (raw tables and models; process start included)."""
    started = time.perf_counter()
    subprocess.run(
        [sys.executable, "-m", "pipelines", "sync", "--no-progress"],
        cwd=REPO_ROOT, env=env, check=True, capture_output=True,
    )
    return time.perf_counter() - started


def step_seconds(instance, record) -> dict[str, float]:
    """Where a run's wall time went: queue and launch (creation to the run worker's start), each step
    (start to end), and what is left (the worker loading the code location, between steps, exit)."""
    import dagster as dg

    events = instance.all_logs(
        record.dagster_run.run_id,
        of_type={dg.DagsterEventType.STEP_START, dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE},
    )
    started: dict[str, float] = {}
    seconds: dict[str, float] = {"queue + launch": record.start_time - record.create_timestamp.timestamp()}
    for event in events:
        if event.dagster_event.event_type == dg.DagsterEventType.STEP_START:
            started[event.step_key] = event.timestamp
        else:
            seconds[event.step_key] = event.timestamp - started[event.step_key]
    seconds["other (worker start, between steps)"] = record.end_time - record.start_time - sum(
        value for key, value in seconds.items() if key != "queue + launch"
    )
    return seconds


def daemon_run_seconds(env: dict[str, str], home: Path) -> tuple[float, dict[str, float]]:
    """Wall seconds of a daemon-launched `full_sync`, from the run's creation to its end, and their
    breakdown (`step_seconds`)."""
    with DaemonDeployment(home, env) as deployment:
        record = deployment.wait(deployment.launch("full_sync"))
        if record.dagster_run.status.value != "SUCCESS":
            raise RuntimeError(f"the run ended {record.dagster_run.status.value}; see {deployment.log_path}")
        with deployment.instance() as instance:
            breakdown = step_seconds(instance, record)
    return record.end_time - record.create_timestamp.timestamp(), breakdown


def main(argv: list[str] | None = None) -> None:
    """Print the median wall of each path and their ratio (goal: daemon / CLI <= 1.5)."""
    from bench_table import render

    from sandbox.launcher import start_sandbox

    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=200)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--rate-window", type=float, default=3.0, help="the sandbox's rate window (real: 60)")
    args = parser.parse_args(argv)
    walls: dict[str, list[float]] = {"CLI sync": [], "daemon full_sync": []}
    steps: dict[str, list[float]] = {}
    with tempfile.TemporaryDirectory(prefix="daemon-bench-") as tmp:
        sandbox_args = ("--shipments", str(args.shipments), "--seed", "7", "--rate-window", str(args.rate_window))
        with start_sandbox(*sandbox_args) as sandbox:
            for attempt in range(args.repeat):
                base = Path(tmp) / str(attempt)
                walls["CLI sync"].append(cli_sync_seconds(sandbox_env(sandbox, base / "cli", args.rate_window)))
                env = sandbox_env(sandbox, base / "daemon", args.rate_window)
                wall, breakdown = daemon_run_seconds(env, base / "daemon" / "home")
                walls["daemon full_sync"].append(wall)
                for step, seconds in breakdown.items():
                    steps.setdefault(step, []).append(seconds)
    medians = {name: statistics.median(values) for name, values in walls.items()}
    print(f"{args.shipments} shipments, sandbox rate window {args.rate_window:g}s, {args.repeat} runs each, fresh warehouse each")
    print(render(["path", "median s", "runs"], [[n, medians[n], " ".join(f"{v:.1f}" for v in walls[n])] for n in walls]))
    print(f"daemon / CLI = {medians['daemon full_sync'] / medians['CLI sync']:.2f} (goal <= 1.5)")
    print("\nWhere the daemon run's time went (medians):")
    print(render(["step", "median s"], [[step, statistics.median(values)] for step, values in steps.items()]))


if __name__ == "__main__":
    main()
