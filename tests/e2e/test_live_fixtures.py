"""The extraction against responses served from the CAPTURED LIVE FIXTURES (anonymised real responses of
the real service, see `tests/support/fixture_server.py`): live-only attributes, string coordinates, the
ignored nested include, absolute pagination links on the live host, the missing routing entitlement and
the HTML 404 must all come through a full sync, and the key must leave no trace."""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from pipelines.source.resources import SHIPMENT_INCLUDES
from tests.support.fixture_server import (
    Fixtures,
    LiveFixtureServer,
    parties_document,
    shipments_document,
    shipping_lines_document,
    tracking_requests_document,
    transport_events_document,
)
from tests.support.syncs import SyncResult, sync_once

# Shaped like a real key (not one of the sandbox keys, so no other server would accept it).
LIVE_KEY = "t49_live_fixture_key_7c1e9a3f5b2d4e6a"
# what the source asks `/shipments` to include, so the expected counts follow the server's answer to it
SOURCE_INCLUDE = [path.split(".") for path in SHIPMENT_INCLUDES]


@dataclass
class LiveSync:
    """One sync's outcome: the warehouse, the server (and what it saw), every log record, the workdir."""

    result: SyncResult
    server: LiveFixtureServer
    records: list[logging.LogRecord]
    workdir: Path

    @property
    def log_text(self) -> str:
        """Every record as text: message, exception text and raw args (in case a formatter would show them)."""
        return "\n".join(
            f"{r.name} {r.levelname} {r.getMessage()} {r.exc_text or ''} {r.args!r}" for r in self.records
        )


@pytest.fixture(scope="module")
def fixtures() -> Fixtures:
    fx = Fixtures()
    if not fx.root.is_dir():
        pytest.skip(f"live fixtures not found at {fx.root}")
    return fx


@pytest.fixture(scope="module")
def live_sync(fixtures, tmp_path_factory) -> Iterator[LiveSync]:
    """One sync against the fixture server; the logs of the whole run are captured at DEBUG."""
    workdir = tmp_path_factory.mktemp("live")
    records: list[logging.LogRecord] = []

    class Keep(logging.Handler):
        def emit(self, record: logging.LogRecord) -> None:
            records.append(record)

    handler = Keep(level=logging.DEBUG)
    root = logging.getLogger()
    old_level = root.level
    root.addHandler(handler)
    root.setLevel(logging.DEBUG)
    try:
        with pytest.MonkeyPatch.context() as env, LiveFixtureServer(LIVE_KEY, fixtures) as server:
            env.setenv("RUNTIME__DLTHUB_TELEMETRY", "false")  # no network
            # the captured 500 of /custom_fields answers every attempt: retry it fast, not for the live deadline
            env.setenv("SOURCES__OCEAN_TRACKING__BACKOFF_FACTOR", "0.02")
            result = sync_once(server, workdir, key=LIVE_KEY)
    finally:
        root.removeHandler(handler)
        root.setLevel(old_level)
    yield LiveSync(result, server, records, workdir)


def _ids(rows, type_: str) -> set[str]:
    return {row["id"] for row in rows if row["type"] == type_}


def _expected_counts(fx: Fixtures) -> dict[str, int]:
    """Row counts computed from the fixture files as the server serves them (distinct ids per type)."""
    shipments = shipments_document(fx, SOURCE_INCLUDE)
    page = shipments["data"] + shipments.get("included", [])
    events = transport_events_document(fx, [])["data"]
    # by-id bodies carry their own (anonymised) id whatever id was asked; they can only add these
    by_id_port = fx.raw("sdk/ports.get.json")["data"]["id"]
    by_id_terminal = fx.raw("sdk/terminals.get.json")["data"]["id"]
    return {
        "shipments": len(_ids(page, "shipment")),
        "containers": len(_ids(page, "container")),
        "transport_events": len(_ids(page, "transport_event") | _ids(events, "transport_event")),
        "tracking_requests": len(_ids(tracking_requests_document(fx, None)["data"], "tracking_request")),
        "parties": len(_ids(parties_document(fx)["data"], "party")),
        "shipping_lines": len(_ids(shipping_lines_document(fx, 1)["data"], "shipping_line")),
        "custom_field_definitions": len(_ids(
            fx.cli_payload("cli/custom-field-definitions.list.json")["data"], "custom_field_definition"
        )),
        "ports": len(_ids(page, "port") | {by_id_port}),
        "terminals": len(_ids(page, "terminal") | {by_id_terminal}),
    }


def _columns(result: SyncResult, table: str) -> dict[str, str]:
    return dict(result.query(
        "select column_name, data_type from information_schema.columns "
        f"where table_schema = 'ocean_tracking' and table_name = '{table}'"
    ))


def _tables(result: SyncResult) -> set[str]:
    return {row[0] for row in result.query(
        "select table_name from information_schema.tables where table_schema = 'ocean_tracking'"
    )}


def test_fixture_server_answers_like_the_live_service(fixtures):
    """The server itself: auth required, vnd.api+json, 403 map, HTML 404, include respected."""
    import requests

    with LiveFixtureServer(LIVE_KEY, fixtures) as server:
        auth = {"Authorization": f"Token {LIVE_KEY}"}
        assert requests.get(f"{server.base_url}/parties", timeout=10).status_code == 401
        assert requests.get(f"{server.base_url}/parties", headers={"Authorization": "Token nope"},
                            timeout=10).status_code == 401
        ok = requests.get(f"{server.base_url}/parties", headers=auth, timeout=10)
        assert ok.status_code == 200 and ok.headers["Content-Type"] == "application/vnd.api+json"
        assert "next" not in ok.json()["links"]
        bare = requests.get(f"{server.base_url}/shipments", headers=auth, timeout=10).json()
        assert "included" not in bare
        full = requests.get(f"{server.base_url}/shipments", params={"include": "containers,pod_terminal"},
                            headers=auth, timeout=10).json()
        assert {item["type"] for item in full["included"]} == {"container", "terminal"}
        assert full["links"].get("next") is None
        denied = requests.get(f"{server.base_url}/containers/x/map_geojson", headers=auth, timeout=10)
        assert denied.status_code == 403 and "not enabled" in denied.json()["errors"][0]["detail"]
        missing = requests.get(f"{server.base_url}/containers/x/route", headers=auth, timeout=10)
        assert missing.status_code == 404 and missing.headers["Content-Type"].startswith("text/html")
        assert "<!DOCTYPE html>" in missing.text


@pytest.mark.slow
def test_sync_completes_with_the_fixtures_row_counts(live_sync, fixtures):
    result, server = live_sync.result, live_sync.server

    expected = _expected_counts(fixtures)
    assert all(count > 0 for count in expected.values()), expected
    actual = {table: result.scalar(f"select count(*) from {table}") for table in expected}
    assert actual == expected
    for table in expected:
        assert result.scalar(f"select count(*) - count(distinct id) from {table}") == 0, table
    # the source asked for the includes; the nested events include reached nothing (as live), so the
    # events came from the per-container endpoint, and no request hit an unknown route
    shipment_requests = [r for r in server.requests_seen if r.path == "/v2/shipments"]
    assert len(shipment_requests) == 1
    assert "containers.transport_events" in shipment_requests[0].query["include"][0]
    assert server.paths("/v2/containers/") and all(
        p.endswith(("/transport_events", "/map_geojson")) for p in server.paths("/v2/containers/")
    )
    assert [r for r in server.requests_seen if r.status in (401, 404)] == []
    # vessels named only by the per-container events are fetched by id (every id answers one vessel)
    assert any(r.path.startswith("/v2/vessels/") for r in server.requests_seen)
    assert result.scalar("select count(*) from vessels") == 1
    # shipping lines followed the captured next link on api.terminal49.com, rebased onto the server
    assert [r.query.get("page[number]") for r in server.requests_seen if r.path == "/v2/shipping_lines"] == [
        None, ["2"],
    ]


@pytest.mark.slow
def test_the_failing_custom_fields_list_is_a_sync_issue_not_a_failed_sync(live_sync):
    """The live `GET /custom_fields` answered 500 (captured): the sync loads everything else, lists the
    failure in sync_issues like a failed map, and the definitions still land typed."""
    result, server = live_sync.result, live_sync.server
    assert [r.status for r in server.requests_seen if r.path == "/v2/custom_fields"][-1] == 500
    issues = result.query("select resource, item_id, http_status from sync_issues")
    assert ("custom_fields", "/custom_fields", 500) in issues
    assert result.scalar("select count(*) from custom_fields") == 0
    assert _columns(result, "custom_field_definitions")["data_type"] == "VARCHAR"
    assert result.scalar("select count(*) from custom_field_definitions where entity_type = 'Shipment'") >= 3


@pytest.mark.slow
def test_live_only_attributes_land_as_columns(live_sync):
    result = live_sync.result

    expected = {
        "shipments": {"pol_original_etd_at", "destination_original_eta_at"},
        "containers": {"pol_full_in_at", "ssl_lfd"},
        "transport_events": {"invalidated_at", "value"},
        "tracking_requests": {"shipment_tags"},
    }
    for table, names in expected.items():
        columns = _columns(result, table)
        assert names <= set(columns), (table, sorted(names - set(columns)))
        assert not [c for c in columns if c.startswith("attributes__")], table
    # the ids repeated inside live port/terminal attributes do not shadow the resource id
    assert result.scalar("select count(*) from ports where id not like 'port-%'") == 0
    # nowhere an un-flattened attributes object
    every = result.query("select table_name, column_name from information_schema.columns "
                         "where table_schema = 'ocean_tracking'")
    assert [row for row in every if row[1].startswith("attributes")] == []
    # live string coordinates land as numbers
    ports = _columns(result, "ports")
    assert ports["latitude"] == "DOUBLE" and ports["longitude"] == "DOUBLE"
    assert result.scalar("select count(*) from ports where latitude is null or longitude is null") == 0
    # typed: the timestamps the live service sends are timestamps, not text
    assert _columns(result, "containers")["pol_full_in_at"].startswith("TIMESTAMP")
    assert _columns(result, "shipments")["pol_original_etd_at"].startswith("TIMESTAMP")


@pytest.mark.slow
def test_maps_are_skipped_with_one_warning(live_sync):
    result, server = live_sync.result, live_sync.server

    assert "map_features" not in _tables(result)
    assert "map_features_geo" not in _tables(result)
    warnings = [r for r in live_sync.records if "Routing Data entitlement" in r.getMessage()]
    assert len(warnings) == 1, [r.getMessage() for r in warnings]
    assert warnings[0].levelno == logging.WARNING
    # the live error's own words reach the operator
    assert "Routing data feature is not enabled for this account" in warnings[0].getMessage()
    # one refused attempt was enough to turn maps off for the run
    assert len(server.paths("/v2/containers/")) - len([p for p in server.paths("/v2/containers/")
                                                       if p.endswith("/transport_events")]) == 1


def test_the_key_leaves_no_trace(live_sync):
    result, workdir, log_text = live_sync.result, live_sync.workdir, live_sync.log_text

    needle = LIVE_KEY.encode("utf-8")
    # every file of the lake: the catalog (with its WAL) and the data files
    store = result.store
    folders = (store.catalog_file.parent, Path(store.data_path))
    lake_files = {path for folder in folders for path in folder.rglob("*") if path.is_file()}
    assert store.catalog_file in lake_files and any(p.suffix == ".parquet" for p in lake_files), lake_files
    assert [str(path) for path in sorted(lake_files) if needle in path.read_bytes()] == []
    pipeline_files = [p for p in (workdir / "dlt").rglob("*") if p.is_file()]
    assert pipeline_files, "the dlt pipeline dir is empty: nothing was checked"
    leaking = [str(p) for p in workdir.rglob("*") if p.is_file() and needle in p.read_bytes()]
    assert leaking == []
    assert log_text, "no log was captured: nothing was checked"
    assert LIVE_KEY not in log_text
