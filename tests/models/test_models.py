"""The dbt models (sql/), built by their Dagster assets over a warehouse synced from the REAL sandbox, and
by the CLI's runner (`build_models`) on the DuckLake and on a DuckDB file."""

from __future__ import annotations

import csv
import itertools
import math
import tempfile
from datetime import UTC, date
from pathlib import Path
from urllib.parse import parse_qs, urlsplit
from zoneinfo import ZoneInfo

import dagster as dg
import duckdb
import pytest
import requests
import shapely
import sqlglot
from sqlglot.errors import ErrorLevel

import assets.models
from assets.models import ManifestMissingError, analytics_models
from assets.resources import OCEAN_TRACKING_POOL
from pipelines.errors import ModelBuildError
from pipelines.warehouse import default_lake_in, duckdb_store
from pipelines.warehouse.models import (
    BUILD_RECORD_TABLE,
    MODELS_DIR,
    build_environment,
    build_models,
    dbt_args,
    dbt_vars,
    project_models,
    run_dbt,
    saved_parse_path,
    seed_names,
)
from tests.support.dagster import (
    APP_URL,
    BuiltWarehouse,
    LakeReader,
    materialize_models,
    reference_terminals_csv,
)
from tests.support.lakes import copy_lake, lake_in
from tests.support.sandboxes import FULL_KEY

EARTH_RADIUS_KM = 6371.0088  # mean radius (IUGG)
SINGLE_KEYS = {"stg_containers", "stg_shipments", "stg_terminals", "stg_vessels", "stg_transport_events",
               "container_status", "containers_at_sea"}  # fmt: skip


def _key(name: str) -> dg.AssetKey:
    return dg.AssetKey(["analytics", name])


def _header(sql: str) -> str:
    """The leading `--` comment block of a model file (what the model is, its grain, its `Key:`)."""
    lines = []
    for line in sql.splitlines():
        if not line.strip().startswith("--"):
            break
        lines.append(line.strip()[2:].strip())
    return "\n".join(lines).strip()


# ---- the dbt assets ----------------------------------------------------------------------------------


def test_one_asset_per_model_file_with_header_as_description():
    files = sorted(MODELS_DIR.rglob("*.sql"))
    specs = {spec.key: spec for spec in analytics_models.specs}
    assert set(specs) == {_key(path.stem) for path in files} | {_key(seed) for seed in seed_names()}
    for seed in seed_names():
        assert specs[_key(seed)].group_name == "analytics_staging"
    for path in files:
        spec = specs[_key(path.stem)]
        assert spec.description == _header(path.read_text())  # the schema yml keeps the header
        assert spec.group_name == ("analytics_staging" if spec.key.path[-1].startswith("stg_") else "analytics")
    assert analytics_models.op.pool == OCEAN_TRACKING_POOL


def test_deps_come_from_refs_and_sources():
    deps = {key: set(analytics_models.asset_deps[key]) for key in analytics_models.keys}
    assert deps[_key("container_status")] == {
        _key("stg_containers"),
        _key("stg_shipments"),
        _key("stg_terminals"),
        _key("stg_container_holds"),
        _key("stg_container_fees"),
    }
    assert deps[_key("container_free_time")] == {_key("container_status")}
    assert deps[_key("voyage_legs")] == {_key("port_calls"), _key("stg_map_features"), _key("stg_vessels")}
    # sources map to the ingest assets; a dlt child table to the resource that loads it
    assert deps[_key("stg_map_features")] == {dg.AssetKey(["ocean_tracking", "map_features"])}
    assert deps[_key("stg_container_holds")] == {dg.AssetKey(["ocean_tracking", "containers"])}


def test_every_model_key_is_tested_unique_and_not_null():
    checks: dict[str, set[str]] = {}
    for check_key in analytics_models.check_keys:
        checks.setdefault(check_key.asset_key.path[-1], set()).add(check_key.name)
    for model in project_models():
        names = checks[model.name]
        key_line = next(line for line in _header(model.path.read_text()).splitlines() if line.startswith("Key:"))
        columns = [column.strip() for column in key_line.removeprefix("Key:").split(",")]
        assert {f"not_null_{model.name}_{column}" for column in columns} <= names, model.name
        if len(columns) == 1:
            assert f"unique_{model.name}_{columns[0]}" in names
        else:
            assert any(name.startswith(f"unique_key_{model.name}_") for name in names), model.name


def test_a_missing_manifest_fails_the_definitions_with_the_command_to_run(monkeypatch, tmp_path):
    monkeypatch.setattr(assets.models, "MANIFEST_PATH", tmp_path / "manifest.json")
    with pytest.raises(ManifestMissingError) as raised:
        assets.models.load_manifest()
    assert "run `dbt parse --project-dir sql --profiles-dir sql`" in str(raised.value)
    assert "\n" not in str(raised.value)


@pytest.mark.slow
def test_every_model_materializes_with_row_count_and_preview(built: BuiltWarehouse):
    for model in project_models():
        metadata = built.materializations[_key(model.name).to_user_string()]
        rows = built.query(f"select count(*) from {model.schema()}.{model.name}")[0][0]
        assert metadata["dagster/row_count"] == rows
        preview = metadata["preview"]
        assert preview.splitlines()[0].startswith("| ")
        assert len(preview.splitlines()) == 2 + min(rows, 5)
    for name in ("container_status", "port_calls", "voyage_legs", "deep_links"):
        assert built.query(f"select count(*) from analytics.{name}")[0][0] > 0, name
    for name in ("stg_shipments", "stg_containers"):
        assert built.query(f"select count(*) from _analytics_staging.{name}")[0][0] > 0, name


def test_all_dbt_tests_pass_as_asset_checks(built: BuiltWarehouse):
    evaluations = built.check_evaluations
    names = {(e["asset"].split("/")[-1], e["check"]) for e in evaluations}
    assert len(names) == len(analytics_models.check_keys)
    # the old checks' meaning, as dbt tests: one row per container, staging rows = raw rows, marts not empty
    assert ("container_status", "same_row_count_container_status_ref_stg_containers_") in names
    assert ("stg_containers", "same_row_count_stg_containers_source_ocean_tracking_containers_") in names
    assert ("voyage_legs", "not_empty_when_voyage_legs_ref_port_calls_") in names
    failed = [(e["asset"], e["check"], e["metadata"]) for e in evaluations if not e["passed"]]
    assert not failed


# ---- container_status --------------------------------------------------------------------------------


def _ready_by_rule(warehouse: LakeReader) -> dict[str, bool]:
    """The readiness rule recomputed from the raw rows: available_for_pickup and no hold with status 'hold'."""
    containers = warehouse.query("select id, _dlt_id, available_for_pickup from ocean_tracking.containers")
    blocked: set[str] = set()
    if warehouse.table_exists("ocean_tracking", "containers__holds_at_pod_terminal"):
        holds = warehouse.query(
            "select _dlt_parent_id, status from ocean_tracking.containers__holds_at_pod_terminal"
        )
        blocked = {parent for parent, status in holds if status == "hold"}
    return {id_: available is True and dlt_id not in blocked for id_, dlt_id, available in containers}


def test_container_status_has_one_row_per_container(built: BuiltWarehouse):
    raw_ids = [row[0] for row in built.query("select id from ocean_tracking.containers")]
    status_ids = [row[0] for row in built.query("select container_id from analytics.container_status")]
    assert len(status_ids) == len(set(status_ids)) == len(raw_ids)
    assert set(status_ids) == set(raw_ids)


@pytest.mark.slow
def test_ready_for_pickup_follows_the_rule(built: BuiltWarehouse):
    expected = _ready_by_rule(built)
    actual = dict(built.query("select container_id, ready_for_pickup from analytics.container_status"))
    assert actual == expected
    assert any(expected.values())
    assert not all(expected.values())


@pytest.mark.slow
def test_holds_block_pickup_and_pending_holds_do_not(built: BuiltWarehouse, tmp_path):
    """Give two available containers holds the way dlt stores them (replacing whatever holds the world
    gave them) and rebuild: a `hold` blocks pickup, a `pending` one does not. On a copy of the lake."""
    data_dir = tmp_path / "data"
    copy_lake(built.data_dir, data_dir)
    available = built.query(
        "select _dlt_id from ocean_tracking.containers where available_for_pickup order by id limit 2"
    )
    assert len(available) == 2
    (held,), (pending,) = available
    store = lake_in(data_dir)
    with store.writing(), store.connect() as con:
        # dlt creates the child table only once some container had a hold: create it the way dlt would
        con.execute(
            "create table if not exists ocean_tracking.containers__holds_at_pod_terminal (name varchar,"
            " status varchar, description varchar, _dlt_root_id varchar, _dlt_parent_id varchar,"
            " _dlt_list_idx bigint, _dlt_id varchar)"
        )
        con.execute(
            "delete from ocean_tracking.containers__holds_at_pod_terminal where _dlt_parent_id in (?, ?)",
            [held, pending],
        )
        con.execute(
            """
            insert into ocean_tracking.containers__holds_at_pod_terminal by name
            select * from (values
                ('customs', 'hold', 'CBP hold', ?, ?, 0, 'h1'),
                ('freight', 'pending', null, ?, ?, 0, 'h2'),
                ('USDA', 'hold', null, ?, ?, 1, 'h3')
            ) as t(name, status, description, _dlt_root_id, _dlt_parent_id, _dlt_list_idx, _dlt_id)
            """,
            [held, held, pending, pending, held, held],
        )
        # the session sandbox has fees on some containers already: replace the held container's lines
        con.execute(
            "create table if not exists ocean_tracking.containers__fees_at_pod_terminal (type varchar,"
            " amount double, currency_code varchar, _dlt_root_id varchar, _dlt_parent_id varchar,"
            " _dlt_list_idx bigint, _dlt_id varchar)"
        )
        con.execute(
            "delete from ocean_tracking.containers__fees_at_pod_terminal where _dlt_parent_id = ?", [held]
        )
        con.execute(
            "insert into ocean_tracking.containers__fees_at_pod_terminal by name"
            " select *, _dlt_parent_id as _dlt_root_id, 'fee' || _dlt_list_idx as _dlt_id from (values"
            " ('demurrage', 100.0, 'USD', ?, 0), ('exam', 50.0, 'USD', ?, 1),"
            " ('total', 150.0, 'USD', ?, 2), ('other', 20.0, 'EUR', ?, 3))"
            " as t(type, amount, currency_code, _dlt_parent_id, _dlt_list_idx)",
            [held, held, held, held],
        )
    result = materialize_models(
        data_dir,
        selection=[
            "analytics/stg_container_holds",
            "analytics/stg_container_fees",
            "analytics/container_status",
        ],
    )
    assert result.success
    rebuilt = LakeReader(data_dir)
    expected = _ready_by_rule(rebuilt)
    actual = dict(rebuilt.query("select container_id, ready_for_pickup from analytics.container_status"))
    assert actual == expected
    rows = {
        row["container_dlt_id"]: row
        for row in rebuilt.dicts(
            "select c.container_dlt_id, s.* from analytics.container_status s"
            " join _analytics_staging.stg_containers c using (container_id)"
        )
    }
    assert rows[held]["ready_for_pickup"] is False
    assert rows[held]["active_holds"] == ["customs", "USDA"]
    assert rows[held]["active_hold_count"] == 2
    assert rows[pending]["ready_for_pickup"] is True
    assert rows[pending]["pending_holds"] == ["freight"]
    # the `total` line is the USD total, not added to the lines it sums
    totals = {fee["currency_code"]: float(fee["amount"]) for fee in rows[held]["fees_total_by_currency"]}
    assert totals == {"EUR": 20.0, "USD": 150.0}


# ---- local dates: the LFD at the terminal, and the days left (container_free_time) ----------------------


def _expected_local_lfds(warehouse: BuiltWarehouse) -> dict[str, tuple[date | None, str | None, str | None]]:
    """Each container's LFD date at its terminal, the zone and where the zone came from, recomputed from the
    raw rows, the reference terminal list and the engine's zone names by the rule container_status describes."""
    known = {row[0] for row in warehouse.query("select name from pg_timezone_names()")}
    with reference_terminals_csv().open(newline="") as fh:
        reference = list(csv.DictReader(fh))
    by_firms_code = {row["Firms Code"]: row["Time Zone"] for row in reference}
    port_zones: dict[str, set[str]] = {}
    for row in reference:
        port_zones.setdefault(row["Port Code"], set()).add(row["Time Zone"])
    by_port = {port: zones.pop() for port, zones in port_zones.items() if len(zones) == 1}
    firms_codes = dict(warehouse.query("select id, firms_code from ocean_tracking.terminals"))
    shipments = {
        row[0]: row[1:]
        for row in warehouse.query(
            "select id, pod_timezone, pod_terminal_id, port_of_discharge_locode from ocean_tracking.shipments"
        )
    }
    expected = {}
    for container_id, shipment_id, terminal_id, zone, lfd in warehouse.query(
        "select id, shipment_id, pod_terminal_id, pod_timezone, pickup_lfd from ocean_tracking.containers"
    ):
        shipment_zone, shipment_terminal_id, pod_locode = shipments.get(shipment_id, (None, None, None))
        firms_code = firms_codes.get(terminal_id or shipment_terminal_id)
        candidates = [
            (zone, "container"),
            (shipment_zone, "shipment"),
            (by_firms_code.get(firms_code), "reference_terminal"),
            (by_port.get(pod_locode), "reference_port"),
        ]
        used, source = next(((name, source) for name, source in candidates if name in known), (None, None))
        # without a zone from the API, its timestamps are local wall-clock times written as UTC
        read_in = used if zone is not None or shipment_zone is not None else "UTC"
        local = lfd.astimezone(ZoneInfo(read_in)).date() if lfd is not None and read_in is not None else None
        expected[container_id] = (local, used, source)
    return expected


def _expected_free_time_running(warehouse: BuiltWarehouse) -> dict[str, bool]:
    """Whether each container's free time still runs, recomputed from the raw rows: not once it was picked up
    (at the POD terminal, or at its inland destination), returned empty, or its status says either."""
    done_statuses = {"picked_up", "delivered", "dropped", "empty_returned"}
    done_at = ("pod_full_out_at", "final_destination_full_out_at", "empty_terminated_at")
    return {
        row["id"]: row["current_status"] not in done_statuses and all(row.get(name) is None for name in done_at)
        for row in warehouse.dicts("select * from ocean_tracking.containers")
    }


def _assert_local_lfds_and_days_left(warehouse: LakeReader) -> dict[str, dict]:
    """container_status's local LFDs and container_free_time's days left are the recomputed ones, the days
    counted from the date it was, at each terminal, when the view was queried, for the containers whose
    free time still runs. Returns the view's rows."""
    expected = _expected_local_lfds(warehouse)
    running = _expected_free_time_running(warehouse)
    status = {
        row[0]: row[1:]
        for row in warehouse.query(
            "select container_id, last_free_day_local, last_free_day_time_zone, last_free_day_time_zone_source"
            " from analytics.container_status"
        )
    }
    assert status == expected
    rows = warehouse.dicts("select *, current_timestamp as queried_at from analytics.container_free_time")
    assert len(rows) == len(expected)
    for row in rows:
        local, zone, source = expected[row["container_id"]]
        assert (row["last_free_day_local"], row["last_free_day_time_zone"]) == (local, zone)
        assert row["last_free_day_time_zone_source"] == source
        today = row["queried_at"].astimezone(ZoneInfo(zone)).date() if zone is not None else None
        assert row["local_today"] == today, row
        assert row["free_time_running"] is running[row["container_id"]], row
        days = (local - today).days if local is not None and today is not None and row["free_time_running"] else None
        assert row["days_until_last_free_day"] == days, row
    return {row["container_id"]: row for row in rows}


@pytest.mark.slow
def test_last_free_day_is_the_terminals_local_date_and_the_days_left_are_counted_now(built: BuiltWarehouse):
    rows = _assert_local_lfds_and_days_left(built)
    with_lfd = [row for row in rows.values() if row["last_free_day"] is not None]
    assert with_lfd and {row["last_free_day_time_zone_source"] for row in rows.values()} == {"container"}
    # the sandbox's LFDs end a local day (23:59:59 there): in the Americas that is already the next UTC date
    assert any(row["last_free_day_local"] != row["last_free_day"].astimezone(UTC).date() for row in with_lfd)
    days = {row["days_until_last_free_day"] for row in with_lfd if row["free_time_running"]}
    assert days and None not in days


def test_ordered_by_days_left_containers_picked_up_or_returned_come_last(built: BuiltWarehouse):
    """What an analyst asks first: whose free time runs out soonest. Containers long picked up or returned
    empty (their LFD weeks past) have no days left to count, so they do not head the list."""
    rows = built.dicts(
        "select container_id, current_status, free_time_running, days_until_last_free_day"
        " from analytics.container_free_time where last_free_day is not null"
        " order by days_until_last_free_day, container_id"
    )
    done = [row for row in rows if not row["free_time_running"]]
    assert any(row["current_status"] == "empty_returned" for row in done), "the world has returned empties"
    assert all(row["days_until_last_free_day"] is None for row in done)
    assert all(row["free_time_running"] for row in rows[: len(rows) - len(done)]), "the running ones first"


@pytest.mark.slow
def test_without_a_zone_from_the_api_the_reference_zone_is_used(built: BuiltWarehouse, tmp_path):
    """On a copy of the lake: a container without `pod_timezone` takes its shipment's; one with a name that
    is no zone ('Europe/Rotterdam') too; one whose shipment has none either takes its terminal's zone from
    the reference (its LFD read as the API writes local times without a zone), and one at a terminal the
    reference does not list, its port's. Rebuilt, every row matches the rule recomputed."""
    data_dir = tmp_path / "data"
    copy_lake(built.data_dir, data_dir)
    candidates = built.query(
        "select c.id, c.shipment_id, t.id from ocean_tracking.containers c"
        " join ocean_tracking.shipments s on s.id = c.shipment_id"
        " join ocean_tracking.terminals t on t.id = coalesce(c.pod_terminal_id, s.pod_terminal_id)"
        " join analytics.container_free_time f on f.container_id = c.id"
        " where c.pickup_lfd is not null and t.firms_code is not null and f.free_time_running order by c.id"
    )
    picked: list[tuple[str, str, str]] = []
    for container_id, shipment_id, terminal_id in candidates:
        if all(shipment_id != other[1] and terminal_id != other[2] for other in picked):
            picked.append((container_id, shipment_id, terminal_id))
    assert len(picked) >= 4, "the sandbox has too few terminals with LFDs"
    (no_zone, _, _), (not_a_zone, _, _), by_terminal, by_port = picked[:4]
    store = lake_in(data_dir)
    with store.writing(), store.connect() as con:
        con.execute(
            "update ocean_tracking.containers set pod_timezone = null where id in (?, ?, ?)",
            [no_zone, by_terminal[0], by_port[0]],
        )
        con.execute("update ocean_tracking.containers set pod_timezone = 'Europe/Rotterdam' where id = ?", [not_a_zone])
        con.execute(
            "update ocean_tracking.shipments set pod_timezone = null where id in (?, ?)", [by_terminal[1], by_port[1]]
        )
        con.execute("update ocean_tracking.terminals set firms_code = null where id = ?", [by_port[2]])
    result = materialize_models(
        data_dir,
        selection=[
            "analytics/stg_containers",
            "analytics/stg_shipments",
            "analytics/stg_terminals",
            "analytics/container_status",
            "analytics/container_free_time",
        ],
    )
    assert result.success
    rows = _assert_local_lfds_and_days_left(LakeReader(data_dir))
    sources = {container_id: rows[container_id]["last_free_day_time_zone_source"]
               for container_id in (no_zone, not_a_zone, by_terminal[0], by_port[0])}  # fmt: skip
    assert sources == {
        no_zone: "shipment",
        not_a_zone: "shipment",
        by_terminal[0]: "reference_terminal",
        by_port[0]: "reference_port",
    }
    for container_id in (by_terminal[0], by_port[0]):
        row = rows[container_id]
        assert row["last_free_day_local"] == row["last_free_day"].astimezone(UTC).date()
        assert row["days_until_last_free_day"] is not None


# ---- shipment_eta_changes ----------------------------------------------------------------------------


# ---- route geometry ----------------------------------------------------------------------------------


def _haversine_km(coords) -> float:
    total = 0.0
    for (lon1, lat1), (lon2, lat2) in itertools.pairwise(coords):
        phi1, phi2 = math.radians(lat1), math.radians(lat2)
        dphi, dlmb = phi2 - phi1, math.radians(lon2 - lon1)
        a = math.sin(dphi / 2) ** 2 + math.cos(phi1) * math.cos(phi2) * math.sin(dlmb / 2) ** 2
        total += 2 * EARTH_RADIUS_KM * math.asin(math.sqrt(a))
    return total


def test_voyage_leg_length_matches_haversine(built: BuiltWarehouse):
    # the longest completed leg: its line is exactly the raw past_vessel_locations feature
    leg = built.dicts(
        "select container_id, leg_sequence, length_km, sailed_km from analytics.voyage_legs"
        " where leg_status = 'completed' and geometry_source = 'actual' order by length_km desc limit 1"
    )[0]
    (wkb,) = built.query(
        "select geometry from ocean_tracking.map_features where container_id = ?"
        " and feature_type = 'past_vessel_locations' and ports_sequence = ?",
        [leg["container_id"], leg["leg_sequence"]],
    )[0]
    coords = shapely.get_coordinates(shapely.from_wkb(bytes(wkb))).tolist()
    expected = _haversine_km(coords)
    assert expected > 100
    assert leg["length_km"] == pytest.approx(expected, rel=0.01)
    assert leg["sailed_km"] == pytest.approx(leg["length_km"], rel=1e-9)


def test_legs_join_consecutive_port_calls(built: BuiltWarehouse):
    (calls, containers) = built.query(
        "select count(*), count(distinct container_id) from analytics.port_calls"
    )[0]
    legs = built.query("select count(*) from analytics.voyage_legs")[0][0]
    assert legs == calls - containers  # n ports -> n - 1 legs per container
    under_way = built.dicts(
        "select length_km, sailed_km, remaining_km, vessel_name from analytics.voyage_legs"
        " where leg_status = 'under_way'"
    )
    assert under_way
    for leg in under_way:
        assert leg["vessel_name"]
        assert leg["length_km"] == pytest.approx(leg["sailed_km"] + leg["remaining_km"], rel=0.01)


def test_containers_at_sea_position_and_distance_to_go(built: BuiltWarehouse):
    at_sea = built.dicts("select * exclude (position) from analytics.containers_at_sea")
    vessels = built.query(
        "select container_id, geometry from ocean_tracking.map_features where feature_type = 'current_vessel'"
    )
    assert len(at_sea) == len(vessels) > 0
    points = {cid: shapely.from_wkb(bytes(wkb)) for cid, wkb in vessels}
    partial = {
        cid: _haversine_km(shapely.get_coordinates(shapely.from_wkb(bytes(wkb))).tolist())
        for cid, wkb in built.query(
            "select container_id, geometry from ocean_tracking.map_features"
            " where feature_type = 'estimated_partial_leg'"
        )
    }
    for row in at_sea:
        point = points[row["container_id"]]
        assert (row["longitude"], row["latitude"]) == pytest.approx((point.x, point.y))
        assert row["vessel_name"] and row["next_port_name"]
        assert row["distance_to_next_port_km"] == pytest.approx(partial[row["container_id"]], rel=0.01)
        assert row["distance_to_go_km"] >= row["distance_to_next_port_km"]
        if row["following_leg_count"] == 0:
            assert row["distance_to_go_km"] == pytest.approx(row["distance_to_next_port_km"])


# ---- deep links --------------------------------------------------------------------------------------


def test_deep_links_use_the_configured_app_url(built: BuiltWarehouse):
    links = built.dicts("select * from analytics.deep_links")
    shipments = built.query("select count(*) from ocean_tracking.shipments")[0][0]
    containers = built.query("select count(*) from ocean_tracking.containers")[0][0]
    assert len(links) == shipments + containers
    for link in links:
        parts = urlsplit(link["url"])
        assert f"{parts.scheme}://{parts.netloc}{parts.path}" == f"{APP_URL}/shipments/find"
        assert parse_qs(parts.query) == {"q": [link["number"]]}


def _stub_warehouse(path: Path, shipment_number: str) -> None:
    """A DuckDB file holding only the two staging tables deep_links reads."""
    with duckdb.connect(str(path)) as con:
        con.execute("create schema _analytics_staging")
        con.execute(
            "create table _analytics_staging.stg_shipments as select 's1' as shipment_id, ? as bill_of_lading_number",
            [shipment_number],
        )
        con.execute(
            "create table _analytics_staging.stg_containers as"
            " select 'c1' as container_id, 's1' as shipment_id, 'MSCU 123456-7' as container_number"
        )


@pytest.mark.slow
def test_deep_links_url_encode_the_number_on_a_duckdb_file(tmp_path):
    """Numbers with spaces, slashes and `&` (real bookings have them) stay one query value. Built by the
    CLI's runner on the plain DuckDB file warehouse (target `duckdb`); the app URL's trailing slash goes."""
    store = duckdb_store(tmp_path / "warehouse.duckdb")
    _stub_warehouse(store.duckdb_file, "AB 12/3&x=+y")
    rows = build_models(store, app_url="https://app.example/", select=["deep_links"]).rows
    assert rows["deep_links"] == 2
    with store.connect(read_only=True) as con:
        urls = dict(con.execute("select id, url from analytics.deep_links").fetchall())
    assert urls == {
        "s1": "https://app.example/shipments/find?q=AB%2012%2F3%26x%3D%2By",
        "c1": "https://app.example/shipments/find?q=MSCU%20123456-7",
    }


@pytest.mark.slow
def test_a_subset_builds_only_its_models_and_runs_only_their_tests(built: BuiltWarehouse, tmp_path):
    """Its own tests, and those of the raw table it reads (dagster-dbt runs a source's tests with the models
    selected downstream of it), and no other."""
    copy_lake(built.data_dir, tmp_path / "data")
    result = materialize_models(tmp_path / "data", selection=["analytics/stg_vessels"])
    assert result.success
    assert {e.asset_key for e in result.get_asset_materialization_events()} == {_key("stg_vessels")}
    checks = {(e.asset_key, e.check_name) for e in result.get_asset_check_evaluations()}
    raw_vessels = dg.AssetKey(["ocean_tracking", "vessels"])
    expected = {(key.asset_key, key.name) for key in analytics_models.check_keys
                if key.asset_key in (_key("stg_vessels"), raw_vessels)}  # fmt: skip
    assert checks == expected
    assert {key for key, _ in expected} == {_key("stg_vessels"), raw_vessels}


@pytest.mark.slow
def test_a_failing_dbt_test_fails_its_check_and_the_run_in_one_line(built: BuiltWarehouse, tmp_path):
    """A raw table's broken key (the registry's test, dbt's on the source) fails its check on the ingest asset,
    fails the models' step in one line, and keeps dbt from building the models that read the table."""
    copy_lake(built.data_dir, tmp_path / "data")
    with lake_in(tmp_path / "data").writing(), lake_in(tmp_path / "data").connect() as con:
        con.execute("insert into ocean_tracking.vessels select * from ocean_tracking.vessels limit 1")  # a duplicate id
    result = materialize_models(tmp_path / "data", selection=["analytics/stg_vessels"], raise_on_error=False)
    assert not result.success
    message = result.get_step_failure_events()[0].step_failure_data.user_failure_data.description
    assert message.startswith("dbt test vessels_primary_key (on vessels) failed: ")
    assert "\n" not in message
    checks = {(e.asset_key.to_user_string(), e.check_name): e.passed for e in result.get_asset_check_evaluations()}
    assert checks[("ocean_tracking/vessels", "vessels_primary_key")] is False
    assert not result.get_asset_materialization_events()  # dbt skipped stg_vessels, downstream of the broken key


@pytest.mark.slow
def test_a_failing_model_is_one_line_naming_it(tmp_path):
    store = duckdb_store(tmp_path / "warehouse.duckdb")
    _stub_warehouse(store.duckdb_file, "AB1")
    with duckdb.connect(str(store.duckdb_file)) as con:
        con.execute("drop table _analytics_staging.stg_containers")
    with pytest.raises(ModelBuildError) as raised:
        build_models(store, app_url=APP_URL, select=["deep_links"])
    message = str(raised.value)
    assert message.startswith("dbt model deep_links failed: ") and "stg_containers" in message
    assert "\n" not in message


def test_builds_reuse_the_parse_the_first_saved_whatever_the_build_sets(tmp_path, monkeypatch):
    monkeypatch.setattr(tempfile, "tempdir", str(tmp_path))  # where the runner keeps saved parses
    store = duckdb_store(tmp_path / "warehouse.duckdb")
    args = dbt_args("parse", target="duckdb", variables=dbt_vars(store, app_url=APP_URL))
    run_dbt(args, build_environment(store, commit_message="sync 1: dbt build"))
    saved = saved_parse_path(args)
    first = saved.stat().st_mtime_ns

    run_dbt(args, build_environment(store, commit_message="sync 2: dbt build", changed_since="2026-11-01 00:00:00+00"))

    assert saved.stat().st_mtime_ns == first, "dbt parsed the project again (it saves a parse only after parsing)"
    assert list(saved.parent.iterdir()) == [saved]
    other = dbt_args("parse", target="duckdb", variables=dbt_vars(store, app_url="https://other.example"))
    run_dbt(other)
    assert saved_parse_path(other) != saved and saved_parse_path(other).is_file()
    # a lake is named in the build's environment, not its vars: every lake's builds share one parse
    lakes = [default_lake_in(tmp_path / name) for name in ("one", "two")]
    assert len({saved_parse_path(dbt_args("build", target="ducklake", variables=dbt_vars(lake, app_url=APP_URL)))
                for lake in lakes}) == 1  # fmt: skip
    assert build_environment(lakes[0]) != build_environment(lakes[1])


@pytest.mark.slow
def test_deep_links_resolve_in_the_sandbox_web_app(built: BuiltWarehouse, sandbox, tmp_path):
    data_dir = tmp_path / "data"
    copy_lake(built.data_dir, data_dir)  # the links are rebuilt with another app URL: not in the shared lake
    result = materialize_models(data_dir, app_url=sandbox.app_url, selection=["analytics/deep_links"])
    assert result.success
    links = LakeReader(data_dir).dicts(
        "select * from (select *, row_number() over (partition by kind order by id) as n from analytics.deep_links)"
        " where n <= 3"
    )
    assert {link["kind"] for link in links} == {"shipment", "container"}
    for link in links:
        assert link["url"].startswith(f"{sandbox.app_url}/shipments/find?q=")
        response = requests.get(
            link["url"], headers={"Authorization": f"Token {FULL_KEY}"}, allow_redirects=False, timeout=10
        )
        assert response.status_code == 302, link
        expected = f"{sandbox.app_url}/shipments/{link['shipment_id']}"
        if link["kind"] == "container":
            expected += f"?container={link['id']}"
        assert response.headers["location"] == expected


# ---- the schemas analysts see ------------------------------------------------------------------------


def _tables_by_schema(con: duckdb.DuckDBPyConnection) -> dict[str, set[str]]:
    tables: dict[str, set[str]] = {}
    for schema, table in con.execute("select table_schema, table_name from information_schema.tables"
                                     " where table_catalog = current_database()").fetchall():  # fmt: skip
        tables.setdefault(schema, set()).add(table)
    return tables


def test_analytics_holds_the_marts_and_implementation_is_apart(built: BuiltWarehouse):
    """`analytics` is what analysts query: the marts, nothing else. The staging models, the seeds, the record of
    the last complete build and dlt's merge staging are in schemas named as internal; no mart has the name of a
    raw table."""
    with built.store.connect(read_only=True) as con:
        tables = _tables_by_schema(con)
    marts = {model.name for model in project_models() if model.layer == "marts"}
    seeds = set(seed_names())
    assert tables["analytics"] == marts
    staging = {model.name for model in project_models() if model.layer == "staging"}
    assert tables["_analytics_staging"] == staging | seeds | {BUILD_RECORD_TABLE}
    assert "shipments" in tables["_ocean_tracking_staging"], "dlt merged through its staging, named as internal"
    assert "ocean_tracking_staging" not in tables
    assert not marts & tables["ocean_tracking"], "a mart named like a raw table"


@pytest.mark.slow
def test_a_model_run_drops_what_the_earlier_layout_left(tmp_path):
    """A lake built before: the staging models beside the marts, the ETA mart under the raw table's name, dlt's
    staging under its default name. The next model run (any selection) drops them, and never a dataset that
    only has such a name (an account `emea_staging` loads into `ocean_tracking_emea_staging`)."""
    store = lake_in(tmp_path)
    with store.writing(), store.connect() as con:
        con.execute("""
            create schema ocean_tracking;
            create table ocean_tracking.terminals as select 't1' as id, 'Pier 400' as name;
            create schema analytics;
            create table analytics.stg_terminals as select 1 as old;
            create table analytics.shipment_eta_history as select 1 as old;
            create table analytics.container_status as select 1 as kept;
            create schema ocean_tracking_staging;
            create table ocean_tracking_staging.shipments as select 1 as old;
            create schema ocean_tracking_emea_staging;
            create table ocean_tracking_emea_staging._dlt_loads as select 'l1' as load_id;
        """)  # fmt: skip

    build_models(store, app_url=APP_URL, select=["stg_terminals"])
    build_models(store, app_url=APP_URL, select=["stg_terminals"], raw_schema="ocean_tracking_emea",
                 analytics_schema="analytics_emea")  # fmt: skip

    with store.connect(read_only=True) as con:
        tables = _tables_by_schema(con)
    assert tables["analytics"] == {"container_status"}
    assert tables["_analytics_staging"] == {"stg_terminals"}
    assert "ocean_tracking_staging" not in tables
    assert tables["ocean_tracking_emea_staging"] == {"_dlt_loads"}, "a dataset is never dropped"


# ---- a raw table or column dlt has not created yet ------------------------------------------------------


@pytest.mark.slow
def test_missing_raw_table_and_columns_read_as_typed_nulls_and_leave_nothing_behind(tmp_path):
    store = lake_in(tmp_path)
    with store.writing(), store.connect() as con:
        con.execute("create schema ocean_tracking")
        # dlt created `terminals` with two of the columns stg_terminals reads: the rest read as null
        con.execute("create table ocean_tracking.terminals as select 't1' as id, 'Pier 400' as name")
    assert build_models(store, app_url=APP_URL, select=["stg_container_holds", "stg_terminals"]).rows == {}  # no mart
    with store.connect(read_only=True) as con:
        rows = dict(con.execute("select 'stg_container_holds', count(*) from _analytics_staging.stg_container_holds"
                                " union all select 'stg_terminals', count(*) from _analytics_staging.stg_terminals"
                                ).fetchall())  # fmt: skip
        assert rows == {"stg_container_holds": 0, "stg_terminals": 1}
        raw = con.execute(
            "select table_name from information_schema.tables where table_schema = 'ocean_tracking'"
        ).fetchall()
        assert raw == [("terminals",)]  # no stand-in for the missing child table
        terminal = con.execute(
            "select terminal_id, terminal_name, firms_code, port_id from _analytics_staging.stg_terminals").fetchall()
        types = dict(con.execute("select column_name, data_type from information_schema.columns"
                                 " where table_name = 'stg_container_holds'").fetchall())  # fmt: skip
    assert terminal == [("t1", "Pier 400", None, None)]
    assert types["hold_index"] == "BIGINT" and types["is_blocking"] == "BOOLEAN"


@pytest.mark.slow
def test_every_model_compiles_for_the_warehouses_we_cannot_run_here(built: BuiltWarehouse):
    """BigQuery and Snowflake are reached by configuration (dlt loads them; dbt builds there with their
    adapter). Here: every model dbt compiles (against the built lake: the contracts look at the raw
    tables) transpiles from DuckDB to both with sqlglot, an unsupported construct raising, and parses back."""
    store = built.store
    with store.writing():
        compiled = run_dbt(dbt_args("compile", target="ducklake", variables=dbt_vars(store, app_url=APP_URL)),
                           build_environment(store))
    models = {result.node.name: result.node.compiled_code for result in compiled.results
              if result.node.resource_type == "model"}  # fmt: skip
    assert set(models) == {model.name for model in project_models()}
    for dialect in ("bigquery", "snowflake"):
        for name, sql in models.items():
            [translated] = sqlglot.transpile(sql, read="duckdb", write=dialect, unsupported_level=ErrorLevel.RAISE)
            assert sqlglot.parse_one(translated, read=dialect).find(sqlglot.exp.Select), (dialect, name)
