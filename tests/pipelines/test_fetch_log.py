"""The fetch log's decisions as pure units: what counts as changed, unknown or due, what it records, how
the old dlt-state keys move into it, and the due-by-age SQL run by DuckDB on a real table."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import duckdb
import pyarrow as pa
import pytest

from pipelines.source.bookkeeping import FETCH_LOG_TABLE, FetchLog, adopt_legacy_state, digest, index_batches
from pipelines.source.map_schedule import Phase, due_by_age_sql
from pipelines.source.pages import Page, changed_bundles, owners_of

NOW = datetime(2026, 11, 24, 12, tzinfo=UTC)


def _log(rows: list[tuple[str, str, int | None]], due: tuple[str, ...] = ()) -> FetchLog:
    """A log as `load_fetch_log` builds it, from rows of (kind, item_id, digest) read as Arrow."""
    table = pa.table({"kind": [r[0] for r in rows], "item_id": [r[1] for r in rows],
                      "digest": pa.array([r[2] for r in rows], pa.int64())})
    return FetchLog(*index_batches([table]), map_fetched_due=due)


def test_digest_ignores_key_order_and_sees_every_value():
    assert digest({"a": 1, "b": [1, 2]}) == digest({"b": [1, 2], "a": 1})
    assert digest({"a": 1, "b": [1, 2]}) != digest({"a": 1, "b": [2, 1]})
    assert digest({"a": None}) != digest({})
    assert -(2**63) <= digest("x") < 2**63


def test_changed_is_true_for_unknown_and_different_items_only():
    log = _log([("party", "p1", digest({"id": "p1"})), ("party", "p2", 5), ("port", "p1", None)])
    items = [("p1", digest({"id": "p1"})), ("p2", 6), ("p3", 1)]
    assert log.changed("party", items) == [False, True, True]
    # the same id under another kind is another item; a null digest is known but matches no content
    assert log.changed("port", [("p1", 1)]) == [True]
    assert log.unknown("port", {"p1", "p9"}) == ["p9"]


def test_references_recorded_in_a_sync_are_known_for_the_rest_of_it():
    log = _log([])
    assert log.unknown("terminal", {"t1"}) == ["t1"]
    log.record("terminal", "t1")  # a 404: known, nothing loaded
    assert log.unknown("terminal", {"t1"}) == []
    log.record("vessel", "v1", digest({"id": "v1"}))
    assert log.changed("vessel", [("v1", digest({"id": "v1"}))]) == [False]


def test_changed_rows_yields_and_records_only_what_changed():
    rows = [{"id": "a", "name": "x"}, {"id": "b", "name": "y"}]
    log = _log([("shipping_line", "a", digest(rows[0])), ("shipping_line", "b", digest({"id": "b", "name": "old"}))])
    assert list(log.changed_rows("shipping_line", rows)) == [rows[1]]
    [item] = log.pending()
    assert item.data == [{"kind": "shipping_line", "item_id": "b", "digest": digest(rows[1]), "phase": None,
                          "fetched_at": None}]
    assert log.pending() == []


def test_a_map_is_due_when_never_fetched_in_another_phase_or_due_by_age():
    log = _log(
        [("map", "sea-fresh", digest("at_sea")), ("map", "sea-old", digest("at_sea")),
         ("map", "departed", digest("pre_departure")), ("map", "arrived", digest("arrived"))],
        due=("sea-old",),
    )
    containers = [("sea-fresh", "at_sea"), ("sea-old", "at_sea"), ("departed", "at_sea"), ("arrived", "arrived"),
                  ("new", "pre_departure")]
    assert log.map_due(containers) == ["sea-old", "departed", "new"]


def test_due_by_age_sql_returns_only_the_maps_old_enough_for_their_phase():
    con = duckdb.connect()
    con.execute(f"create table {FETCH_LOG_TABLE} (kind varchar, item_id varchar, digest bigint, phase varchar, "
                "fetched_at timestamptz)")
    rows = [
        ("sea-old", Phase.AT_SEA, NOW - timedelta(hours=2)),
        ("sea-fresh", Phase.AT_SEA, NOW - timedelta(minutes=10)),
        ("pre-old", Phase.PRE_DEPARTURE, NOW - timedelta(days=2)),
        ("pre-fresh", Phase.PRE_DEPARTURE, NOW - timedelta(hours=2)),
        ("arrived-old", Phase.ARRIVED, NOW - timedelta(days=30)),
    ]
    for item_id, phase, fetched_at in rows:
        con.execute(f"insert into {FETCH_LOG_TABLE} values ('map', ?, 0, ?, ?)", [item_id, str(phase), fetched_at])
    con.execute(f"insert into {FETCH_LOG_TABLE} values ('shipment', 'sea-old-too', 0, 'at_sea', ?)", [NOW - timedelta(days=9)])

    due = {row[0] for row in con.execute(due_by_age_sql(FETCH_LOG_TABLE, NOW, refresh_seconds=3600)).fetchall()}

    assert due == {"sea-old", "pre-old"}


def test_legacy_state_moves_into_the_log_once():
    state = {
        "event_ids_by_container": {"c1": ["e2", "e1"]},
        "fetched_ids": {"terminal": ["t1"], "vessel": ["v1"]},
        "resources": {"map_features": {"schedule": {"c1": ["at_sea", NOW.timestamp()]}}},
        "item_issues": {"open": {}},
    }
    log = _log([])

    assert adopt_legacy_state(log, state) == 4

    assert state == {"resources": {"map_features": {}}, "item_issues": {"open": {}}}
    assert log.changed("transport_events", [("c1", digest(["e1", "e2"]))]) == [False]
    assert log.unknown("terminal", {"t1", "t2"}) == ["t2"]
    assert log.map_due([("c1", "at_sea"), ("c1", "arrived")]) == ["c1"]  # only the phase change
    [item] = log.pending()
    assert {(row["kind"], row["item_id"]) for row in item.data} == {
        ("transport_events", "c1"), ("terminal", "t1"), ("vessel", "v1"), ("map", "c1")}
    assert adopt_legacy_state(log, state) == 0


@pytest.fixture
def page() -> dict[str, list[dict]]:
    return {
        "shipment": [{"id": "s1", "containers_ids": ["c1"]}, {"id": "s2", "containers_ids": ["c2"]}],
        "container": [{"id": "c1", "shipment_id": "s1"}, {"id": "c2", "shipment_id": None}],
        "transport_event": [{"id": "e1", "container_id": "c1"}, {"id": "e2", "container_id": "c2"},
                            {"id": "e9", "container_id": "elsewhere", "shipment_id": None}],
    }


def test_only_changed_bundles_load_and_rows_of_no_shipment_always_do(page):
    owners = owners_of(page)
    assert owners[("container", "c2")] == "s2"  # by the shipment's containers_ids when the row lacks it
    assert owners[("transport_event", "e2")] == "s2"
    first = FetchLog()
    assert changed_bundles(page, owners, first) == {"s1", "s2"}
    [item] = first.pending()
    log = _log([(row["kind"], row["item_id"], row["digest"]) for row in item.data])

    page["transport_event"][1]["code"] = "discharged"  # s2's container has news
    changed = changed_bundles(page, owners, log)

    assert changed == {"s2"}
    loaded = Page(page, owners, changed)
    assert [row["id"] for row in loaded.changed_rows("shipment")] == ["s2"]
    assert [row["id"] for row in loaded.changed_rows("container")] == ["c2"]
    assert [row["id"] for row in loaded.changed_rows("transport_event")] == ["e2", "e9"]


def test_a_shipment_back_on_a_later_page_is_loaded_once_a_sync(page):
    """The list shifted while it was paged: the same bundle again (or a newer version of it) loads no row
    twice, since `transport_events` is merged without ranking its staged rows; the next sync loads the
    newer version, its logged digest being the first one's."""
    owners = owners_of(page)
    log = _log([])
    assert changed_bundles(page, owners, log) == {"s1", "s2"}
    assert changed_bundles(page, owners, log) == set()  # the same page again
    page["transport_event"][1]["code"] = "discharged"
    assert changed_bundles(page, owners, log) == set()  # s2 changed since: not in this sync
    [item] = log.pending()
    next_sync = _log([(row["kind"], row["item_id"], row["digest"]) for row in item.data])
    assert changed_bundles(page, owners, next_sync) == {"s2"}


def test_a_containers_events_are_fetched_apart_once_a_sync():
    log = _log([])
    events = [("c1", digest(["e1", "e2"]))]
    assert log.changed("transport_events", events) == [True]
    log.record("transport_events", "c1", events[0][1])
    assert log.changed("transport_events", events) == [False]
    assert log.changed("transport_events", [("c1", digest(["e1", "e2", "e3"]))]) == [False]
    assert log.changed("transport_events", [("c2", 1)]) == [True]
