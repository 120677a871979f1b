"""What users change in their account between syncs reaches the warehouse: custom field values edited or
deleted in the real sandbox over HTTP, and shipments that leave the account."""

from __future__ import annotations

import subprocess
import sys

import pytest
import requests

from tests.support.sandboxes import FULL_KEY, advance_clock, routes
from tests.support.syncs import cli_env, sync_once

HEADERS = {"Authorization": f"Token {FULL_KEY}", "Content-Type": "application/vnd.api+json"}


def _listed(server, path: str) -> list[dict]:
    rows, url, params = [], f"{server.base_url}{path}", {"page[size]": 100}
    while url:
        document = requests.get(url, params=params, headers=HEADERS, timeout=10).json()
        rows += document["data"]
        url, params = (document.get("links") or {}).get("next"), None
    return rows


def _custom_field_requests(server, before: dict[str, int]) -> int:
    """Requests to the two custom-field lists the sandbox handled since `before` (its route counts)."""
    return sum(count - before.get(route, 0) for route, count in routes(server).items()
               if route in ("GET /v2/custom_fields", "GET /v2/custom_field_definitions"))  # fmt: skip


def test_custom_fields_follow_edits_and_deletions_on_their_cadence(synced, own_sandbox, synced_copy):
    listed = _listed(own_sandbox, "/custom_fields")
    assert synced.scalar("select count(*) from custom_fields") == len(listed) > 2
    assert synced.scalar("select count(*) from custom_field_definitions") == len(
        _listed(own_sandbox, "/custom_field_definitions"))
    # the polymorphic entity keeps its type; the definition resolves
    assert {row[0] for row in synced.query("select distinct entity_type from custom_fields")} >= {"shipment", "container"}
    assert synced.scalar("select count(*) from custom_fields where definition_id not in "
                         "(select id from custom_field_definitions)") == 0

    text_field = next(row for row in listed if isinstance(row["attributes"]["value"], str))
    deleted = next(row for row in listed if row["id"] != text_field["id"])
    patched = requests.patch(
        f"{own_sandbox.base_url}/custom_fields/{text_field['id']}", headers=HEADERS, timeout=10,
        json={"data": {"type": "custom_field", "attributes": {"value": "PO-EDITED-1"}}},
    )
    assert patched.status_code == 200, patched.text
    assert requests.delete(f"{own_sandbox.base_url}/custom_fields/{deleted['id']}", headers=HEADERS,
                           timeout=10).status_code in (200, 204)
    before = routes(own_sandbox)

    # within the cadence (a day by default, on the service's clock) since the shared sync listed them: no
    # request, and every row kept as it was. Maps off: the clock's move makes maps due, beside the point here.
    advance_clock(own_sandbox, 23 * 3600)
    second = sync_once(own_sandbox, synced_copy.workdir, include_maps=False)
    assert _custom_field_requests(own_sandbox, before) == 0
    assert second.scalar("select count(*) from custom_fields") == len(listed)
    assert second.scalar(f"select count(*) from custom_fields where id = '{deleted['id']}'") == 1
    assert second.scalar(f"select value from custom_fields where id = '{text_field['id']}'") != '"PO-EDITED-1"'

    # past it: both lists are read again, the edit lands and the deletion goes
    advance_clock(own_sandbox, 3600)
    third = sync_once(own_sandbox, synced_copy.workdir, include_maps=False)
    assert _custom_field_requests(own_sandbox, before) == 2
    assert third.scalar("select count(*) from custom_fields") == len(listed) - 1
    assert third.scalar(f"select count(*) from custom_fields where id = '{deleted['id']}'") == 0
    assert third.scalar(f"select value from custom_fields where id = '{text_field['id']}'") == '"PO-EDITED-1"'
    # only the edited value was loaded again; unchanged ones were not rewritten
    newest = third.scalar("select max(load_id) from _dlt_loads")
    assert third.scalar(f"select count(*) from custom_fields where _dlt_load_id = '{newest}'") == 1


def test_the_cli_lists_custom_fields_now_when_asked_whatever_the_cadence(own_sandbox, synced_copy):
    value = next(row for row in _listed(own_sandbox, "/custom_fields") if isinstance(row["attributes"]["value"], str))
    requests.patch(f"{own_sandbox.base_url}/custom_fields/{value['id']}", headers=HEADERS, timeout=10,
                   json={"data": {"type": "custom_field", "attributes": {"value": "PO-EDITED-2"}}}).raise_for_status()
    before = routes(own_sandbox)
    # the clock has not moved since the shared sync listed them: only the option makes them due
    command = [sys.executable, "-m", "pipelines", "sync", "--no-progress", "--no-models", "--no-maps",
               "--list-custom-fields"]  # fmt: skip
    done = subprocess.run(command, env=cli_env(own_sandbox.base_url, synced_copy.workdir), capture_output=True,
                          text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert _custom_field_requests(own_sandbox, before) == 2
    assert synced_copy.scalar(f"select value from custom_fields where id = '{value['id']}'") == '"PO-EDITED-2"'


@pytest.mark.slow
def test_shipments_that_leave_the_account_are_flagged_and_come_back(make_sandbox, tmp_path):
    """The same account, first with 60 shipments, then served by a sandbox of the same seed holding 50 of
    them (the world is generated shipment by shipment, so the smaller one is a prefix): the ten missing
    ones are flagged, kept in `shipments`; served the 60 again, they drop out of `departed_shipments`."""
    from tests.support.sandboxes import GENEROUS_LIMITS, SANDBOX_START

    full = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0, shipments=60)
    first = sync_once(full, tmp_path)
    held = {row[0] for row in first.query("select id from shipments")}
    full.stop()

    fewer = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0, shipments=50)
    still_listed = {row["id"] for row in _listed(fewer, "/shipments")}
    assert still_listed < held, "the smaller world should be a prefix of the larger one"
    second = sync_once(fewer, tmp_path)
    departed = dict(second.query("select shipment_id, left_account_at from departed_shipments"))
    assert set(departed) == held - still_listed
    assert all(stamp is not None for stamp in departed.values())
    assert {row[0] for row in second.query("select id from shipments")} == held  # kept, not deleted
    fewer.stop()

    back = make_sandbox(limits=GENEROUS_LIMITS, start=SANDBOX_START, speed=0.0, shipments=60)
    third = sync_once(back, tmp_path)
    assert third.scalar("select count(*) from departed_shipments") == 0
