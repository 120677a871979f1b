"""Bulk tracking-request creation over HTTP against the real sandbox: validation, 422 mapping, parties,
the create bucket, idempotent reruns, and faults injected mid-batch."""

from __future__ import annotations

import csv
import json
import random
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import requests

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.api.ratelimit import BUCKET_LIMITS, SlidingWindowLimiter
from pipelines.writeback.tracking_requests import create_tracking_requests
from tests.support.sandboxes import (
    FULL_KEY,
    GENEROUS_LIMITS,
    SANDBOX_START,
    routes,
    set_faults,
    tracking_count,
)
from tests.support.syncs import cli_env

CREATE = "POST /v2/tracking_requests"
UNKNOWN_PARTY = "00000000-0000-4000-8000-000000000000"


def bl(number: str, **extra) -> dict:
    return {"request_number": number, "request_type": "bill_of_lading", "scac": "MAEU", **extra}


def outcomes(store) -> dict[int, tuple]:
    rows = store.rows("select row_index, status, tracking_request_id, errors from tracking_request_outcomes")
    return {r[0]: (r[1], r[2], json.loads(r[3])) for r in rows}


def test_batch_validates_locally_maps_422_creates_parties_and_reruns_without_duplicates(server, client, store):
    rows = [
        bl("WBTEST0001", ref_numbers="PO-1;PO-2", shipment_tags="urgent", customer_name="Brand New Imports"),
        {"request_number": "MAEU900000001", "request_type": "bill_of_lading", "scac": ""},  # auto-detect
        {"request_number": "MSCU1234566", "request_type": "container", "scac": "MSCU",
         "customer_name": "brand new imports"},
        {"request_number": "MSCU1234565", "request_type": "container", "scac": "MSCU"},  # bad check digit
        {"request_number": "", "request_type": "bill_of_lading", "scac": "MAEU"},
        {"request_number": "WBTEST0002", "request_type": "waybill", "scac": "MAEU"},
        bl("WBTEST0003", scac="ZZZZ"),
        bl("WBTEST0004", scac="WDSB"),  # known line, no bill-of-lading tracking (live list)
        bl("wbtest 0001", ref_numbers="PO-1;PO-2"),  # duplicate of row 1 (the number as the service reads it)
        bl("WBTEST0005", customer_id=UNKNOWN_PARTY),  # only the service can tell: 422
    ]
    before = routes(server)
    report = create_tracking_requests(rows, client, store)
    assert report.counts == {"accepted": 3, "invalid": 6, "rejected": 1}
    assert [r.row_index for r in report.results] == list(range(1, 11))
    assert report.results[8].errors[0]["detail"] == "duplicate of row 1 in this batch"
    stored = outcomes(store)  # the duplicate row is reported, never recorded: row 1 stays the number's record
    assert {i: stored[i][0] for i in stored} == {1: "accepted", 2: "accepted", 3: "accepted", 4: "invalid",
                                                 5: "invalid", 6: "invalid", 7: "invalid", 8: "invalid",
                                                 10: "rejected"}
    assert stored[4][2][0]["code"] == "check_digit"
    assert stored[10][2] == [{"pointer": "/data/relationships/customer", "column": "customer",
                             "detail": f"Customer '{UNKNOWN_PARTY}' was not found", "code": "not_found"}]
    after = routes(server)
    assert after[CREATE] - before.get(CREATE, 0) == 4  # 3 accepted + the 422; invalid rows cost nothing
    assert after["POST /v2/parties"] == 1  # one new party for both spellings of the name
    assert after["GET /v2/shipping_lines"] == 2  # fetched once (two pages)
    created = client.get(f"/tracking_requests/{stored[1][1]}")["data"]
    assert created["relationships"]["customer"]["data"]["id"]
    assert store.rows("select count(*) from audit_log where action = 'create_party'") == [(1,)]

    rerun = create_tracking_requests(rows, client, store)
    assert rerun.counts == {"skipped": 3, "invalid": 6, "rejected": 1}
    assert routes(server)[CREATE] == after[CREATE] + 1  # only the rejected row is sent again
    for number in ("WBTEST0001", "MAEU900000001", "MSCU1234566"):
        assert tracking_count(server, number) == 1


@pytest.mark.slow
def test_faults_mid_batch_then_rerun_completes_exactly_once(server, client, store):
    """5xx (nothing written), connection reset after the service wrote (answer lost) and a 429 storm
    (honoured) on different rows of one batch: the batch reconciles the two unknown outcomes before it ends
    (the reset one was created, the 5xx one was not), and the rerun sends only the one never created."""
    numbers = [f"WBFAULT{i:03d}" for i in range(6)]
    fault_for = {numbers[1]: "5xx", numbers[2]: "reset", numbers[4]: "429"}
    real_post = client.post

    def post_with_faults(path, json_body, **kwargs):
        number = json_body.get("data", {}).get("attributes", {}).get("request_number")
        set_faults(server, fault_for.get(number, "none"))
        try:
            return real_post(path, json_body, **kwargs)
        finally:
            set_faults(server, "none")

    client.post = post_with_faults
    report = create_tracking_requests([bl(n) for n in numbers], client, store)
    statuses = {r.request_number: r.status for r in report.results}
    assert statuses == {numbers[0]: "accepted", numbers[1]: "failed", numbers[2]: "accepted",
                        numbers[3]: "accepted", numbers[4]: "accepted", numbers[5]: "accepted"}
    assert client.stats()["responses_429"] >= 1  # the 429 was received and retried after Retry-After
    assert [tracking_count(server, n) for n in numbers] == [1, 0, 1, 1, 1, 1]
    first = routes(server)[CREATE]
    assert first == 5  # the 5xx never reached the service; the reset one did, once

    client.post = real_post
    rerun = create_tracking_requests([bl(n) for n in numbers], client, store)
    statuses = {r.request_number: r.status for r in rerun.results}
    assert statuses == {numbers[0]: "skipped", numbers[1]: "accepted", numbers[2]: "skipped",
                        numbers[3]: "skipped", numbers[4]: "skipped", numbers[5]: "skipped"}
    assert routes(server)[CREATE] == first + 1  # only the 5xx row is POSTed again; the reset one is found
    assert [tracking_count(server, n) for n in numbers] == [1] * 6
    reconciled = store.rows("select target, outcome from audit_log "
                            "where action = 'reconcile_tracking_request' order by target")
    assert reconciled == [(f"tracking_request:bill_of_lading:{numbers[1]}", "absent"),
                          (f"tracking_request:bill_of_lading:{numbers[2]}", "found")]


@pytest.mark.slow
def test_stays_inside_the_create_bucket(make_sandbox, tmp_path, store):
    """A create bucket of 4 per 1 s window: 10 rows go through the client's limiter with zero 429s."""
    limits = {"default": 100_000, "tracking_requests_create": 4, "infer_number": 100_000, "refresh": 100_000}
    server = make_sandbox(limits=limits, rate_window=1.0, start=SANDBOX_START, speed=0.0)
    settings = load_settings(api_key=FULL_KEY, base_url=server.base_url, rate_window_seconds=1.0,
                             limiter_path=tmp_path / "limiter.sqlite")
    limiter = SlidingWindowLimiter(settings.api_key.fingerprint, path=settings.limiter_path, window_seconds=1.0,
                                   limits={**BUCKET_LIMITS, "create_tracking_request": 4})
    started = time.monotonic()
    with OceanTrackingClient(settings, limiter=limiter) as client:
        report = create_tracking_requests([bl(f"WBRATE{i:03d}") for i in range(10)], client, store)
        stats = client.stats()
    assert report.counts == {"accepted": 10}
    assert stats["responses_429"] == 0 and stats["wait_seconds"]["create_tracking_request"] > 1.0
    assert time.monotonic() - started >= 2.0  # 10 creates at 4 per window need at least two refills
    import requests

    assert requests.get(f"{server.root_url}/_sandbox/stats", timeout=10).json()["rate_limited_total"] == 0


@pytest.mark.slow
def test_dry_run_from_a_warehouse_table_sends_nothing(server, client, store, lake):
    with lake.writing(), lake.connect() as con:  # a batch prepared in SQL next to the synced data
        con.execute("create table batch (request_number varchar, request_type varchar, scac varchar, "
                    "ref_numbers varchar[], customer_name varchar)")
        con.execute("insert into batch values ('WBDRY001', 'bill_of_lading', 'MAEU', ['A', 'B'], 'Dry Run Ltd'), "
                    "('', 'bill_of_lading', 'MAEU', [], null)")
    from pipelines.writeback import read_rows

    with lake.connect(read_only=True) as con:  # as a batch reads it: the warehouse, read-only
        report = create_tracking_requests(read_rows("batch", con), client, store, dry_run=True)
    assert [r.status for r in report.results] == ["would_send", "invalid"]
    handled = routes(server)
    assert CREATE not in handled and "POST /v2/parties" not in handled
    assert store.rows("select count(*) from tracking_request_outcomes") == [(0,)]
    assert store.rows("select count(*) from audit_log") == [(0,)]


# ---- exactly once across kills ---------------------------------------------------------------------------
# Exactly once across crashes: `create-tracking-requests` SIGKILLed at seeded random moments, 20 times over
# one 50-row batch, then run to completion: every row is on the service once (or rejected with its 422), none
# twice, none lost.


ROWS = 50


KILLS = 20


SEED = 12


def _batch(path: Path) -> list[str]:
    numbers = [f"WBKILL{i:04d}" for i in range(ROWS)]
    with path.open("w", newline="") as handle:
        writer = csv.writer(handle)
        writer.writerow(["request_number", "request_type", "scac", "customer_id"])
        for i, number in enumerate(numbers):
            # every tenth row names a party the service does not know: a 422 the service decides
            writer.writerow([number, "bill_of_lading", "MAEU", UNKNOWN_PARTY if i % 10 == 9 else ""])
    return numbers


@pytest.mark.slow  # beside other tests: kill moments count from the first request the service sees
def test_killed_twenty_times_then_completed_creates_each_row_once(make_sandbox, tmp_path):
    # 40 ms of latency on every request, so a kill lands anywhere in the batch, not only at start-up
    server = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0)
    requests.post(f"{server.root_url}/_sandbox/faults",
                  json={"profile": "slow", "rate": 1.0, "seed": 0, "delay": 0.04}, timeout=10).raise_for_status()
    numbers = _batch(tmp_path / "batch.csv")
    env = cli_env(server.base_url, tmp_path, OCEAN_TRACKING_WRITEBACK_JOURNAL=str(tmp_path / "journal.sqlite"))
    command = [sys.executable, "-m", "pipelines", "create-tracking-requests", str(tmp_path / "batch.csv")]
    moments = random.Random(SEED)
    killed_mid_batch = 0
    for _ in range(KILLS):
        before = routes(server).get(CREATE, 0)
        served = sum(routes(server).values())
        process = subprocess.Popen(command, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        # kill moments count from the first request the service sees, not from the start: a loaded
        # machine's slower start-up would otherwise eat the window, and the kills land before any batch works
        deadline = time.monotonic() + 30
        while sum(routes(server).values()) == served and process.poll() is None and time.monotonic() < deadline:
            time.sleep(0.02)
        time.sleep(moments.uniform(0.0, 2.5))
        process.send_signal(signal.SIGKILL)
        process.wait(30)
        killed_mid_batch += routes(server).get(CREATE, 0) > before

    final = subprocess.run(command, env=env, capture_output=True, text=True, timeout=300)

    assert final.returncode == 1, final.stdout + final.stderr  # 1: the rejected rows are reported
    created = {number: tracking_count(server, number) for number in numbers}
    rejected = {numbers[i] for i in range(ROWS) if i % 10 == 9}
    assert {n for n, count in created.items() if count > 1} == set()  # 0 duplicates
    assert {n for n, count in created.items() if count == 0} == rejected  # 0 lost; the 422s never created
    assert "unknown" not in final.stdout
    posts = routes(server).get(CREATE, 0)
    print(f"\nkill loop: {KILLS} kills ({killed_mid_batch} after some POST reached the service), "
          f"{sum(created.values())} tracking requests for {ROWS - len(rejected)} creatable rows, "
          f"{posts} POSTs received (422 rows are re-sent by each run that reaches them)")
    assert killed_mid_batch >= 5  # the loop really interrupted batches, not only start-ups
