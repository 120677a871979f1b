"""Local dates (sql/macros/local_dates.sql): an instant's date at a place from its IANA time zone, and the
days from today there to a date, around local midnight and across daylight-saving changes, rendered by
dbt for DuckDB and for PostgreSQL and run on a REAL engine of each; and the vendored terminal time zones
(sql/macros/reference_terminals.sql) against the reference file they were copied from. The models that
use them are tested in test_models.py."""

from __future__ import annotations

import csv
from datetime import UTC, date, datetime
from zoneinfo import ZoneInfo

import duckdb
import pytest

from pipelines.warehouse import duckdb_store
from pipelines.warehouse.models import dbt_args, dbt_vars, run_dbt
from tests.support.dagster import APP_URL, reference_terminals_csv


def _utc(text: str) -> datetime:
    return datetime.fromisoformat(text).replace(tzinfo=UTC)


# (instant in UTC, zone, its local date there): each pair straddles a local midnight, on ordinary days and
# on the days the clocks change, where a fixed UTC offset would put the instant on the wrong date.
LOCAL_DATES = [
    # New York, standard time (UTC-5): midnight is 05:00 UTC
    ("2026-03-08 04:59:59", "America/New_York", date(2026, 3, 7)),
    ("2026-03-08 05:00:00", "America/New_York", date(2026, 3, 8)),
    # 2026-03-08 02:00 EST -> 03:00 EDT: the next midnight is 04:00 UTC
    ("2026-03-09 03:59:59", "America/New_York", date(2026, 3, 8)),
    ("2026-03-09 04:00:00", "America/New_York", date(2026, 3, 9)),
    # 2026-11-01 02:00 EDT -> 01:00 EST: that day began at 04:00 UTC and ends at 05:00 UTC (25 hours)
    ("2026-11-01 03:59:59", "America/New_York", date(2026, 10, 31)),
    ("2026-11-01 04:00:00", "America/New_York", date(2026, 11, 1)),
    ("2026-11-01 05:30:00", "America/New_York", date(2026, 11, 1)),  # 01:30 EDT
    ("2026-11-01 06:30:00", "America/New_York", date(2026, 11, 1)),  # 01:30 EST, the repeated hour
    ("2026-11-02 04:59:59", "America/New_York", date(2026, 11, 1)),
    ("2026-11-02 05:00:00", "America/New_York", date(2026, 11, 2)),
    # Shanghai (UTC+8, no DST): the local date runs ahead of UTC's from 16:00 UTC
    ("2026-03-08 15:59:59", "Asia/Shanghai", date(2026, 3, 8)),
    ("2026-03-08 16:00:00", "Asia/Shanghai", date(2026, 3, 9)),
    ("2026-11-01 23:30:00", "Asia/Shanghai", date(2026, 11, 2)),
    # Rotterdam's zone: 2026-03-29 02:00 CET -> 03:00 CEST, so midnight moves from 23:00 to 22:00 UTC
    ("2026-03-28 22:59:59", "Europe/Amsterdam", date(2026, 3, 28)),
    ("2026-03-28 23:00:00", "Europe/Amsterdam", date(2026, 3, 29)),
    ("2026-03-29 21:59:59", "Europe/Amsterdam", date(2026, 3, 29)),
    ("2026-03-29 22:00:00", "Europe/Amsterdam", date(2026, 3, 30)),
    # UTC: the date as written (how container_status reads an LFD the API sent without a zone)
    ("2026-03-08 23:59:59", "UTC", date(2026, 3, 8)),
]

# (last free day, zone, now in UTC, days until it): the count turns at the terminal's midnight, not UTC's
DAYS_UNTIL = [
    (date(2026, 3, 9), "America/New_York", "2026-03-09 03:59:59", 1),  # 23:59:59 EDT on the 8th
    (date(2026, 3, 9), "America/New_York", "2026-03-09 04:00:00", 0),
    (date(2026, 3, 9), "America/New_York", "2026-03-10 04:00:00", -1),  # the day after: one day over
    (date(2026, 11, 2), "America/New_York", "2026-11-01 04:00:00", 1),  # the 25-hour day is one day
    (date(2026, 11, 2), "America/New_York", "2026-11-02 04:59:59", 1),
    (date(2026, 11, 2), "America/New_York", "2026-11-02 05:00:00", 0),
    (date(2026, 3, 9), "Asia/Shanghai", "2026-03-08 15:59:59", 1),
    (date(2026, 3, 9), "Asia/Shanghai", "2026-03-08 16:00:00", 0),  # still the 8th in UTC
    (date(2026, 3, 30), "Europe/Amsterdam", "2026-03-29 21:59:59", 1),
    (date(2026, 3, 30), "Europe/Amsterdam", "2026-03-29 22:00:00", 0),
    (date(2026, 4, 30), "Europe/Amsterdam", "2026-03-28 23:00:00", 32),  # across the change, whole days
]


def test_the_expected_local_dates_agree_with_python():
    """The hand-written cases above say what Python's zoneinfo says (the tables are right)."""
    for instant, zone, expected in LOCAL_DATES:
        assert _utc(instant).astimezone(ZoneInfo(zone)).date() == expected, (instant, zone)
    for day, zone, now, expected in DAYS_UNTIL:
        assert (day - _utc(now).astimezone(ZoneInfo(zone)).date()).days == expected, (day, zone, now)


def _cases_sql() -> str:
    """One query over every case (literal timestamps, zones and 'now'), calling the macros under test,
    with the same SQL for both engines: `case_no`, `kind`, `result`. Null inputs read as null."""
    local = [
        f"({i}, cast('{instant}+00' as timestamptz), '{zone}')"
        for i, (instant, zone, _) in enumerate(LOCAL_DATES)
    ]
    local.append(f"({len(LOCAL_DATES)}, cast(null as timestamptz), 'UTC')")
    local.append(
        f"({len(LOCAL_DATES) + 1}, cast('2026-03-08 05:00:00+00' as timestamptz), cast(null as varchar))"
    )
    until = [
        f"({i}, cast('{day}' as date), '{zone}', cast('{now}+00' as timestamptz))"
        for i, (day, zone, now, _) in enumerate(DAYS_UNTIL)
    ]
    until.append(
        f"({len(DAYS_UNTIL)}, cast(null as date), 'UTC', cast('2026-03-08 05:00:00+00' as timestamptz))"
    )
    return f"""
        select case_no, 'local_date' as kind, cast({{{{ days_between(local_date('instant', 'zone'), "cast('2000-01-01' as date)") }}}} as bigint) as result
        from (values {", ".join(local)}) as cases(case_no, instant, zone)
        union all
        select case_no, 'days_until', cast({{{{ days_until('day', 'zone', 'now') }}}} as bigint)
        from (values {", ".join(until)}) as cases(case_no, day, zone, now)
    """


def _expected() -> dict[tuple[int, str], int | None]:
    """Every case's result: a local date as days since 2000-01-01 (a number both engines return alike)."""
    epoch = date(2000, 1, 1)
    expected: dict[tuple[int, str], int | None] = {
        (i, "local_date"): (day - epoch).days for i, (_, _, day) in enumerate(LOCAL_DATES)
    }
    expected[(len(LOCAL_DATES), "local_date")] = None
    expected[(len(LOCAL_DATES) + 1, "local_date")] = None
    expected.update({(i, "days_until"): days for i, (*_, days) in enumerate(DAYS_UNTIL)})
    expected[(len(DAYS_UNTIL), "days_until")] = None
    return expected


def _compiled(target: str, variables: dict[str, str], sql: str) -> str:
    """`sql` (Jinja calling the project's macros) rendered by dbt for `target` (its dispatch macros)."""
    compiled = run_dbt([*dbt_args("compile", target=target, variables=variables), "--inline", sql])
    return compiled.results[0].node.compiled_code


@pytest.mark.slow
def test_local_dates_on_duckdb(tmp_path):
    """The macros as dbt renders them for DuckDB give every case's date and day count on DuckDB."""
    store = duckdb_store(tmp_path / "warehouse.duckdb")
    sql = _compiled("duckdb", dbt_vars(store, app_url=APP_URL), _cases_sql())
    assert "datediff('day'" in sql  # DuckDB's spelling
    with duckdb.connect() as con:
        rows = con.execute(sql).fetchall()
    assert {(case_no, kind): result for case_no, kind, result in rows} == _expected()


@pytest.mark.slow
def test_local_dates_on_postgres(postgres_server, postgres_database, monkeypatch):
    """The macros as dbt renders them for PostgreSQL give the same on a REAL PostgreSQL server."""
    for name, value in {
        "OCEAN_TRACKING_PG_HOST": postgres_server.host,
        "OCEAN_TRACKING_PG_PORT": str(postgres_server.port),
        "OCEAN_TRACKING_PG_USER": "postgres",
        "OCEAN_TRACKING_PG_DATABASE": postgres_database.name,
        "DBT_ENV_SECRET_PG_PASSWORD": postgres_server.password,
    }.items():
        monkeypatch.setenv(name, value)
    sql = _compiled("postgres", {"app_url": APP_URL}, _cases_sql())
    assert "datediff" not in sql  # PostgreSQL's spelling: date - date
    rows = postgres_database.query(sql)
    assert {(case_no, kind): result for case_no, kind, result in rows} == _expected()


@pytest.mark.slow
def test_the_vendored_terminals_are_the_reference_list(tmp_path):
    """The macro `reference_terminals` holds every row of the reference terminals.csv it was copied from
    (FIRMS code, port, time zone, name), one per FIRMS code, each zone one DuckDB and Python know."""
    with reference_terminals_csv().open(newline="") as fh:
        expected = [
            (row["Firms Code"], row["Port Code"], row["Time Zone"], row["Terminal Name"])
            for row in csv.DictReader(fh)
        ]
    store = duckdb_store(tmp_path / "warehouse.duckdb")
    sql = _compiled(
        "duckdb",
        dbt_vars(store, app_url=APP_URL),
        "select firms_code, port_locode, time_zone, terminal_name from {{ reference_terminals() }} as reference",
    )
    with duckdb.connect() as con:
        vendored = con.execute(sql).fetchall()
        known = {row[0] for row in con.execute("select name from pg_timezone_names()").fetchall()}
    assert vendored == expected
    assert len({firms_code for firms_code, *_ in vendored}) == len(vendored)
    zones = {zone for _, _, zone, _ in vendored}
    assert zones <= known
    for zone in zones:
        ZoneInfo(zone)
