"""Bulk tracking-request creation over HTTP against the real sandbox: validation, 422 mapping, parties,
the create bucket, idempotent reruns, and faults injected mid-batch."""

from __future__ import annotations

import json
import time

from pipelines.api.client import OceanTrackingClient
from pipelines.api.config import load_settings
from pipelines.api.ratelimit import BUCKET_LIMITS, SlidingWindowLimiter
from pipelines.writeback.tracking_requests import create_tracking_requests
from tests.support.sandboxes import FULL_KEY, SANDBOX_START, routes, set_faults, tracking_count

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


def test_dry_run_from_a_warehouse_table_sends_nothing(server, client, store, lake):
    with lake.writing(), lake.connect() as con:  # a batch prepared in SQL next to the synced data
        con.execute("create table batch (request_number varchar, request_type varchar, scac varchar, "
                    "ref_numbers varchar[], customer_name varchar)")
        con.execute("insert into batch values ('WBDRY001', 'bill_of_lading', 'MAEU', ['A', 'B'], 'Dry Run Ltd'), "
                    "('', 'bill_of_lading', 'MAEU', [], null)")
    from pipelines.writeback.inputs import read_rows

    with lake.connect(read_only=True) as con:  # as a batch reads it: the warehouse, read-only
        report = create_tracking_requests(read_rows("batch", con), client, store, dry_run=True)
    assert [r.status for r in report.results] == ["would_send", "invalid"]
    handled = routes(server)
    assert CREATE not in handled and "POST /v2/parties" not in handled
    assert store.rows("select count(*) from tracking_request_outcomes") == [(0,)]
    assert store.rows("select count(*) from audit_log") == [(0,)]
