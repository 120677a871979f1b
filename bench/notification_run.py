"""One notification run's steps, on the lake `realtime_freshness.py` builds: where its seconds go.

`realtime_freshness.py` measures the webhook path at the real clock (20 minutes and more a variant); this one
takes the same base lake (built once into `--workdir`, or reused) and runs `apply_webhook_notifications` in this
process, as a run worker runs it, `--rounds` times: before each, a frozen sandbox of the same world moves its
clock `--advance` seconds and delivers what changed to a real receiver, so each run applies one batch of real
notifications. Per round it prints the batch, the plan (`Models: ...`), each step's seconds, the dbt nodes' sum
and the slowest, and the models step's seconds outside its nodes (dbt's start, the plan, the record and the
rebuilt models' metadata). A first round after the models changed (a new release) rebuilds every model: read
the later rounds.

    python bench/notification_run.py [--shipments 10000] [--rounds 3] [--advance 600] [--workdir DIR]
"""

from __future__ import annotations

import argparse
import os
import sys
import tempfile
import time
from pathlib import Path

import requests
from daemon_run import sandbox_env
from realtime_freshness import API_KEY, BUILD_WINDOW, MODELS_STEP, build_base, restored, sandbox_at

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.journals import NotificationJournal
from pipelines.webhooks.receiver import ReceiverThread, register_webhook


def run_steps(instance, run_id: str) -> tuple[dict[str, float], str]:
    """Each step's seconds (start to success) of a run, and the models step's `Models: ...` line."""
    import dagster as dg

    started: dict[str, float] = {}
    steps: dict[str, float] = {}
    plan = ""
    for record in instance.all_logs(run_id):
        event = record.dagster_event
        if record.user_message.startswith("Models: "):
            plan = record.user_message
        if event is None:
            continue
        if event.event_type == dg.DagsterEventType.STEP_START:
            started[record.step_key] = record.timestamp
        elif event.event_type in (dg.DagsterEventType.STEP_SUCCESS, dg.DagsterEventType.STEP_FAILURE):
            steps[record.step_key] = record.timestamp - started[record.step_key]
    return steps, plan


def dbt_nodes(result) -> list[tuple[float, str]]:
    """The seconds of each dbt node the run's models step executed (its materializations' and checks' metadata)."""
    nodes = [(event.materialization.metadata["execution_seconds"].value, event.asset_key.path[-1])
             for event in result.get_asset_materialization_events()
             if "execution_seconds" in event.materialization.metadata]
    nodes += [(evaluation.metadata["execution_seconds"].value, f"test {evaluation.check_name}")
              for evaluation in result.get_asset_check_evaluations() if "execution_seconds" in evaluation.metadata]
    return sorted(nodes, reverse=True)


def measure(workdir: Path, shipments: int, rounds: int, advance: float) -> None:
    """Apply `rounds` batches of the world's notifications through the Dagster job, in this process."""
    data = restored(workdir)
    os.environ["DAGSTER_HOME"] = str(data.parent / "dagster")
    (data.parent / "dagster").mkdir(exist_ok=True)
    (data.parent / "dagster" / "dagster.yaml").write_text("telemetry:\n  enabled: false\n")
    import dagster as dg

    from assets.ingest import ocean_tracking_assets
    from assets.models import model_assets
    from assets.resources import OceanTrackingApi, Warehouse
    from assets.webhooks import apply_notifications_job, webhook_feed_is_live
    from pipelines.settings import webhook_journal_path
    from pipelines.warehouse import default_lake_in

    store = default_lake_in(data)
    with sandbox_at(BUILD_WINDOW, shipments, speed=0, webhook_tick=0) as sandbox:
        os.environ.update(sandbox_env(sandbox, data.parent, BUILD_WINDOW))  # the lake, the journal, the key
        root = sandbox.base_url.rsplit("/v2", 1)[0]
        resources = {
            "ocean_tracking_api": OceanTrackingApi(api_key=API_KEY, base_url=sandbox.base_url,
                                                   rate_window_seconds=BUILD_WINDOW),
            "warehouse": Warehouse(destination="ducklake", catalog=store.catalog, data_path=store.data_path),
        }
        registered: dict = {}
        with dg.DagsterInstance.get() as instance, \
                ReceiverThread(webhook_journal_path(), lambda: registered["secret"]) as receiver:
            settings = load_settings(api_key=API_KEY, base_url=sandbox.base_url, rate_window_seconds=BUILD_WINDOW)
            with OceanTrackingClient(settings) as client:
                registered["secret"] = register_webhook(client, receiver.url).secret
            print(f"{'round':>5} {'batch':>5} {'ingest s':>9} {'models s':>9} {'dbt nodes':>9} {'node s':>7} "
                  f"{'outside s':>9}  plan; slowest nodes")
            for number in range(rounds):
                requests.post(f"{root}/_sandbox/clock", json={"advance_seconds": advance}, timeout=60).raise_for_status()
                requests.post(f"{root}/_sandbox/webhooks/tick", timeout=300).raise_for_status()
                with NotificationJournal() as journal:
                    batch = journal.counts()["pending"]
                started = time.perf_counter()
                result = dg.materialize(
                    [ocean_tracking_assets, *model_assets, webhook_feed_is_live], resources=resources,
                    instance=instance, selection=apply_notifications_job.selection,
                    run_config={"ops": {"ocean_tracking_ingest": {"config": {"mode": "notifications"}}}})
                wall = time.perf_counter() - started
                steps, plan = run_steps(instance, result.run_id)
                nodes = dbt_nodes(result)
                in_nodes = sum(seconds for seconds, _ in nodes)
                models = steps.get(MODELS_STEP, 0.0)
                slowest = ", ".join(f"{name} {seconds:.2f}" for seconds, name in nodes[:4])
                print(f"{number:>5} {batch:>5} {steps.get('ocean_tracking_ingest', 0.0):>9.1f} {models:>9.1f} "
                      f"{len(nodes):>9} {in_nodes:>7.1f} {models - in_nodes:>9.1f}  {plan[8:60]}; {slowest}"
                      f"{'' if result.success else ' (FAILED)'} (run {wall:.1f} s)")


def main(argv: list[str] | None = None) -> int:
    """Build the base lake once (or reuse `--workdir`'s), then measure."""
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--shipments", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--advance", type=float, default=600.0, help="simulated seconds the world moves a round")
    parser.add_argument("--workdir", type=Path, help="keep (or reuse) the base lake here")
    args = parser.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="notification-run-") as tmp:
        workdir = args.workdir or Path(tmp)
        build_base(workdir, args.shipments)
        measure(workdir, args.shipments, args.rounds, args.advance)
    return 0


if __name__ == "__main__":
    sys.exit(main())
