"""Several accounts synced in parallel on one host: does the deployment spend N budgets at once, each account
within its own, with each account's sync taking about as long as alone?

One sandbox serves four independent accounts (its `--account-key` groups, each its own seeded shipments and
its own budget of 100 requests per rate window; the window is shortened so the run is short, and the clients
use the same window). For N = 1, 2, 4, N `python -m pipelines sync --account aK` processes start at once into
one fresh DuckLake (OCEAN_TRACKING_ACCOUNTS names them, each with its own key), the limiter being the host's
SQLite file. Printed per N: each account's requests, wall time and rate, the 429s the sandbox answered (0
means no account ever went over its budget: the sandbox enforces it), and the sum of the accounts' rates
against N x the per-account budget (the accounts differ in size, so they do not all finish together). Maps are included, so the syncs are bound by the budget, not by the two cores.

    python bench/accounts_parallel.py [--shipments 300] [--window 10] [--counts 1,2,4]
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import requests

from pipelines.settings import ACCOUNTS_ENV, Account
from sandbox.launcher import SandboxProcess, start_sandbox

KEYS = {f"a{n}": f"sbx_bench_accounts_{n}_{'0' * 20}" for n in range(1, 5)}
REPO = Path(__file__).resolve().parents[1]


def stats(sandbox: SandboxProcess) -> dict:
    """The sandbox's counters (requests and 429s per account)."""
    return requests.get(f"{sandbox.base_url.removesuffix('/v2')}/_sandbox/stats", timeout=10).json()


def by_account(counters: dict) -> dict[str, int]:
    """Requests (or 429s) per account, every bucket summed."""
    return {account: sum(buckets.values()) for account, buckets in counters.items()}


def run_round(sandbox: SandboxProcess, names: list[str], window: float, folder: Path,
              limiter: Path) -> list[tuple[str, float]]:
    """Sync `names` at once, each in its own process, into a fresh lake in `folder`; (name, wall seconds) per
    account. `limiter` is the host's limiter file, the same every round: a round starting right after another
    must know what the previous one spent of each key's window, as the service does."""
    env = {**os.environ, ACCOUNTS_ENV: ",".join(names), "SOURCES__OCEAN_TRACKING__BASE_URL": sandbox.base_url,
           "SOURCES__OCEAN_TRACKING__RATE_WINDOW_SECONDS": str(window),
           "SOURCES__OCEAN_TRACKING__LIMITER_PATH": str(limiter),
           "OCEAN_TRACKING_DATA_DIR": str(folder / "data"), "OCEAN_TRACKING_PIPELINES_DIR": str(folder / "dlt"),
           "PYTHONPATH": str(REPO)}
    env.pop("SOURCES__OCEAN_TRACKING__API_KEY", None)
    for name in names:
        env[Account(name).api_key_env] = KEYS[name]
    started = time.perf_counter()
    logs = {name: folder / f"{name}.stderr" for name in names}  # a file: a pipe could fill while we poll
    processes = {name: subprocess.Popen([sys.executable, "-m", "pipelines", "sync", "--account", name, "--no-models",
                                         "--no-progress"], env=env, stdout=subprocess.DEVNULL,
                                        stderr=logs[name].open("w"))
                 for name in names}  # fmt: skip
    walls: dict[str, float] = {}
    while len(walls) < len(processes):  # each account's own end, not when a slower one before it ended
        for name, process in processes.items():
            if name not in walls and process.poll() is not None:
                walls[name] = time.perf_counter() - started
                if process.returncode:
                    err = logs[name].read_text().strip()
                    raise SystemExit(f"sync of {name} failed: {err.splitlines()[-1] if err else '?'}")
        time.sleep(0.05)
    return list(walls.items())


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=300, help="shipments of the primary account (the others vary)")
    parser.add_argument("--window", type=float, default=10.0, help="the rate window in real seconds (service: 60)")
    parser.add_argument("--counts", default="1,2,4")
    args = parser.parse_args()
    counts = [int(n) for n in args.counts.split(",")]
    groups = [arg for name in KEYS for arg in ("--account-key", KEYS[name])]
    sandbox = start_sandbox("--shipments", str(args.shipments), "--seed", "7", "--speed", "0",
                            "--start", "2026-11-01T00:00:00Z", "--rate-window", str(args.window), *groups, timeout=300)
    sandbox_names = {keys[0]: account for account, keys in sandbox.accounts.items()}
    budget = 100 / args.window
    print(f"budget: 100 requests per {args.window:g} s per account ({budget:.1f}/s); {args.shipments} shipments "
          "in the primary account, the others seeded to other sizes")
    print(f"{'N':>2} {'account':>8} {'requests':>9} {'wall s':>7} {'req/s':>6} {'429s':>5}")
    with sandbox, tempfile.TemporaryDirectory(prefix="accounts-bench-limiter-") as host:
        for n in counts:
            names = list(KEYS)[:n]
            before = stats(sandbox)
            with tempfile.TemporaryDirectory(prefix="accounts-bench-") as tmp:
                walls = dict(run_round(sandbox, names, args.window, Path(tmp), Path(host) / "limiter.sqlite"))
            after = stats(sandbox)
            spent = {a: r - by_account(before["requests_by_account"]).get(a, 0)
                     for a, r in by_account(after["requests_by_account"]).items()}  # fmt: skip
            limited = by_account(after["rate_limited_by_account"])
            total, rate_sum = 0, 0.0
            for name in names:
                account = sandbox_names[KEYS[name]]
                requests_n = spent.get(account, 0)
                total += requests_n
                rate_sum += requests_n / walls[name]
                print(f"{n:>2} {name:>8} {requests_n:>9} {walls[name]:>7.1f} {requests_n / walls[name]:>6.1f} "
                      f"{limited.get(account, 0):>5}")
            slowest = max(walls.values())
            print(f"{n:>2} {'all':>8} {total:>9} {slowest:>7.1f} {rate_sum:>6.1f}   "
                  f"(sum of the accounts' rates) = {rate_sum / budget:.2f} x the per-account budget; median wall "
                  f"per account {statistics.median(walls.values()):.1f} s")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
