"""What a sync and a targeted refresh cost whatever they load: the fixed local seconds of each.

One sandbox process (`--shipments`, frozen clock, its rate window as short as the client's) and one DuckLake:
a full sync first (not timed), then `--repeat` rounds of

- **sync, 1 shipment changed**: one shipment's `ref_numbers` PATCHed on the service, then a whole sync
  (`pipelines.sync.sync_account`, maps included, models excluded: what the ingest asset runs);
- **refresh, 1 shipment**: one webhook notification journaled (a real one the sandbox delivered, given a new
  id and a newer `created_at` each round), then `pipelines.sync.refresh_from_notifications`.

Each prints wall seconds, the limiter's wait and the local seconds (wall - wait), median / min / max of the
rounds, and the requests each spent. With the sandbox's generous budget the wait is ~0, so the local
seconds are the fixed cost plus the little each loads.

    python bench/fixed_costs.py [--shipments 1000] [--repeat 5] [--maps/--no-maps]
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

import requests
from bench_table import render

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.journals import NotificationJournal
from pipelines.sync import refresh_from_notifications, sync_account
from pipelines.warehouse import default_lake_in
from pipelines.warehouse.destinations import ducklake_target
from pipelines.webhooks.receiver import ReceiverThread, register_webhook
from sandbox.launcher import start_sandbox

KEY = "sbx_bench_fixed_costs_0000000001"
WINDOW = 0.05  # the sandbox's and the client's rate window: the budget never waits
START = "2026-11-01T00:00:00Z"


def client_for(base_url: str, workdir: Path) -> OceanTrackingClient:
    """A client of the sandbox whose limiter log lives in `workdir`."""
    settings = load_settings(api_key=KEY, base_url=base_url, rate_window_seconds=WINDOW,
                             limiter_path=workdir / "limiter.sqlite")
    return OceanTrackingClient(settings)


def spent(stats: dict) -> tuple[int, float]:
    """Requests sent (all buckets) and seconds waited for the budget, from `client.stats()`."""
    return sum(stats["requests"].values()), sum(stats["wait_seconds"].values())


def touch_shipment(base_url: str, shipment_id: str, round_number: int) -> None:
    """Change one shipment on the service: its ref numbers, as a user's write-back would."""
    answer = requests.patch(
        f"{base_url}/shipments/{shipment_id}", timeout=30, headers={"Authorization": f"Token {KEY}"},
        json={"data": {"type": "shipment", "id": shipment_id,
                       "attributes": {"ref_numbers": [f"BENCH-{round_number}"]}}})
    answer.raise_for_status()


def one_notification(base_url: str, workdir: Path) -> bytes:
    """A real notification body the sandbox delivered (the world moved six simulated hours)."""
    root = base_url.removesuffix("/v2")
    journal_path = workdir / "first_journal.sqlite"
    registered: dict = {}
    with client_for(base_url, workdir) as client, \
            ReceiverThread(journal_path, lambda: registered["secret"], heartbeat_seconds=1) as receiver:
        registered["secret"] = register_webhook(client, receiver.url).secret
        requests.post(f"{root}/_sandbox/clock", json={"advance_seconds": 6 * 3600}, timeout=30).raise_for_status()
        requests.post(f"{root}/_sandbox/webhooks/tick", timeout=120).raise_for_status()
    with NotificationJournal(journal_path) as journal:
        pending = journal.pending()
    if not pending:
        raise SystemExit("the sandbox delivered no notification: nothing to refresh")
    return json.dumps(pending[0].document).encode()


def renewed(body: bytes, round_number: int) -> bytes:
    """The notification as a newer one: its own id, created a minute later each round."""
    document = json.loads(body)
    document["data"]["id"] = f"{document['data']['id']}-bench-{round_number}"
    created = datetime.now(UTC) + timedelta(minutes=round_number)
    document["data"]["attributes"]["created_at"] = created.isoformat().replace("+00:00", "Z")
    return json.dumps(document).encode()


def summarize(name: str, rounds: list[tuple[float, float, int]]) -> list:
    """One table row: median / min / max of wall, wait and local seconds, and the median requests."""
    walls = [r[0] for r in rounds]
    local = [r[0] - r[1] for r in rounds]
    return [name, statistics.median(walls), statistics.median([r[1] for r in rounds]), statistics.median(local),
            min(local), max(local), int(statistics.median([r[2] for r in rounds]))]


def main() -> int:
    """Run the rounds and print the table."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=1000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--maps", action=argparse.BooleanOptionalAction, default=True)
    args = parser.parse_args()

    workdir = Path(tempfile.mkdtemp(prefix="bench_fixed_"))
    sandbox_args = ("--shipments", str(args.shipments), "--seed", "7", "--speed", "0", "--start", START,
                    "--rate-window", str(WINDOW), "--api-key", KEY, "--webhook-tick", "0")
    with start_sandbox(*sandbox_args) as sandbox:
        base_url = sandbox.base_url
        target = ducklake_target(default_lake_in(workdir / "data"))
        started = time.perf_counter()
        with client_for(base_url, workdir) as client:
            sync_account(client, target, include_maps=args.maps, pipelines_dir=workdir / "dlt", models=False)
        with target.store.connect(read_only=True) as con:
            shipment_ids = [row[0] for row in con.execute(
                "select id from ocean_tracking.shipments order by id limit 100").fetchall()]
        print(f"full sync of {args.shipments} shipments: {time.perf_counter() - started:.0f} s (not counted)",
              flush=True)
        notification = one_notification(base_url, workdir)

        syncs, refreshes = [], []
        for n in range(args.repeat):
            touch_shipment(base_url, shipment_ids[n % len(shipment_ids)], n)
            with client_for(base_url, workdir) as client:
                begun = time.perf_counter()
                result = sync_account(client, target, include_maps=args.maps, pipelines_dir=workdir / "dlt",
                                      models=False)
                wall = time.perf_counter() - begun
            syncs.append((wall, *reversed(spent(result.api_stats))))
            with NotificationJournal(workdir / "journal.sqlite") as journal, client_for(base_url, workdir) as client:
                journal.record(renewed(notification, n))
                begun = time.perf_counter()
                refreshed = refresh_from_notifications(client, target, journal, pipelines_dir=workdir / "dlt")
                wall = time.perf_counter() - begun
                if refreshed.failed:
                    raise SystemExit(f"the refresh failed: {refreshed.failed}")
            refreshes.append((wall, *reversed(spent(refreshed.api_stats))))
            print(f"round {n + 1}: sync {syncs[-1][0]:.2f} s, refresh {refreshes[-1][0]:.2f} s", flush=True)

    headers = ["run", "wall s", "wait s", "local s", "local min", "local max", "requests"]
    print(f"\n{args.shipments} shipments, maps {'on' if args.maps else 'off'}, {args.repeat} rounds (medians):")
    print(render(headers, [summarize("sync, 1 shipment changed", syncs),
                           summarize("refresh, 1 shipment", refreshes)]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
