"""How often the hourly refresh may run, computed from the account's rate budget.

The service allows 100 requests per rolling minute per account. A refresh of `tracking_requests` +
`map_features` costs (map_features is a transformer over the shipments page stream):

    ceil(shipments / 100)                 shipment pages (the stream the maps hang off)
  + ceil(changed tracking requests / 100) at least one page
  + maps due                              one request per container map that can have changed:
                                          at sea -> every refresh (hourly at most, the service's advice),
                                          before departure -> daily, arrived -> never again

`plan_refresh` picks the shortest interval (dividing a day) whose cost per hour fits the share of
the budget given to the refresh; the rest is left for the daily full sync, the pending-requests
sensor and write-back. Pure functions here; `account_size` reads the sizes from the warehouse.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import duckdb

from pipelines.settings import PAGE_SIZE, REQUESTS_PER_MINUTE

DEFAULT_UTILISATION = 0.8
DEFAULT_REFRESH_SHARE = 0.5
CANDIDATE_HOURS = (1, 2, 3, 4, 6, 8, 12, 24)
REFRESH_MINUTE = 15  # off the hour, away from the daily full sync at 02:00


@dataclass(frozen=True)
class AccountSize:
    """What drives a refresh's cost, as counted in the warehouse."""

    shipments: int
    containers_at_sea: int
    containers_before_departure: int = 0
    tracking_request_changes_per_hour: float = 0.0


@dataclass(frozen=True)
class RefreshPlan:
    """The refresh cadence and why."""

    hours: int
    requests_per_refresh: int
    requests_per_hour: float
    budget_per_hour: float
    fits: bool

    @property
    def cron(self) -> str:
        """Cron of the refresh: hourly, or every `hours` hours, at minute 15."""
        if self.hours == 1:
            return f"{REFRESH_MINUTE} * * * *"
        if self.hours >= 24:
            return f"{REFRESH_MINUTE} 0 * * *"
        return f"{REFRESH_MINUTE} */{self.hours} * * *"

    def explain(self) -> str:
        """One paragraph for the schedule's description and skip messages."""
        verdict = "fits" if self.fits else "does NOT fit even daily; raise the share or drop maps"
        return (
            f"Every {self.hours} h ({self.cron}): a refresh costs ~{self.requests_per_refresh} requests "
            f"(~{self.requests_per_hour:.0f}/h) against a refresh budget of {self.budget_per_hour:.0f}/h; {verdict}."
        )


def refresh_cost(size: AccountSize, interval_hours: float) -> int:
    """Requests one refresh spends when it runs every `interval_hours` hours (see module docstring)."""
    pages = math.ceil(size.shipments / PAGE_SIZE)
    tracking_pages = max(1, math.ceil(size.tracking_request_changes_per_hour * interval_hours / PAGE_SIZE))
    # an at-sea map is due once per refresh when refreshes are >= 1 h apart, else once per hour
    at_sea = size.containers_at_sea * min(1.0, interval_hours)
    before_departure = size.containers_before_departure * min(1.0, interval_hours / 24)
    return pages + tracking_pages + math.ceil(at_sea + before_departure)


def budget_per_hour(
    requests_per_minute: int = REQUESTS_PER_MINUTE,
    utilisation: float = DEFAULT_UTILISATION,
    refresh_share: float = DEFAULT_REFRESH_SHARE,
) -> float:
    """Requests per hour the refresh may spend: the rate limit x utilisation target x its share."""
    if not (0 < utilisation <= 1 and 0 < refresh_share <= 1):
        raise ValueError("utilisation and refresh_share must be in (0, 1]")
    return requests_per_minute * 60 * utilisation * refresh_share


def plan_refresh(
    size: AccountSize,
    requests_per_minute: int = REQUESTS_PER_MINUTE,
    utilisation: float = DEFAULT_UTILISATION,
    refresh_share: float = DEFAULT_REFRESH_SHARE,
    candidates: tuple[int, ...] = CANDIDATE_HOURS,
) -> RefreshPlan:
    """The shortest interval in `candidates` whose cost per hour fits the refresh's budget share.

    Also requires one refresh to fit in the budget of its own interval (it must finish before the
    next one starts). When nothing fits, the longest candidate is returned with `fits=False`."""
    budget = budget_per_hour(requests_per_minute, utilisation, refresh_share)
    plan = None
    for hours in sorted(candidates):
        cost = refresh_cost(size, hours)
        plan = RefreshPlan(hours, cost, cost / hours, budget, fits=cost <= budget * hours)
        if plan.fits:
            return plan
    assert plan is not None, "candidates must not be empty"
    return plan


def account_size(con: duckdb.DuckDBPyConnection, dataset: str) -> AccountSize:
    """Count the refresh's cost drivers in the loaded tables (0 for tables not loaded yet).

    Phases as in `pipelines.extract.map_schedule.container_phase`: arrived when the container or its shipment
    arrived, at sea when the shipment departed, else before departure."""
    tables = {
        row[0]
        for row in con.execute(
            "select table_name from information_schema.tables where table_schema = ?", [dataset]
        ).fetchall()
    }
    shipments = at_sea = before = 0
    changes = 0.0
    if "shipments" in tables:
        shipments = con.execute(f"select count(*) from {dataset}.shipments").fetchone()[0]
    if {"shipments", "containers"} <= tables:
        col = _column_or_null(con, dataset)
        arrived = f"({col('containers', 'c', 'pod_arrived_at')} is not null or {col('shipments', 's', 'pod_ata_at')} is not null)"
        departed = f"{col('shipments', 's', 'pol_atd_at')} is not null"
        at_sea, before = con.execute(
            f"""select count(*) filter (where not {arrived} and {departed}),
                       count(*) filter (where not {arrived} and not {departed})
                from {dataset}.containers c left join {dataset}.shipments s on s.id = c.shipment_id"""
        ).fetchone()
    if "tracking_requests" in tables and _columns(con, dataset, "tracking_requests") >= {"updated_at"}:
        # tracking requests updated over the last week, per hour
        changes = con.execute(
            f"select count(*) / 168.0 from {dataset}.tracking_requests "
            "where try_cast(updated_at as timestamptz) >= now() - interval 7 day"
        ).fetchone()[0]
    return AccountSize(int(shipments), int(at_sea), int(before), float(changes or 0.0))


def _columns(con: duckdb.DuckDBPyConnection, dataset: str, table: str) -> set[str]:
    """Column names of a loaded table (dlt creates a column only once it saw a non-null value)."""
    return {
        row[0]
        for row in con.execute(
            "select column_name from information_schema.columns where table_schema = ? and table_name = ?",
            [dataset, table],
        ).fetchall()
    }


def _column_or_null(con: duckdb.DuckDBPyConnection, dataset: str):
    """`col(table, alias, name)` -> `alias.name`, or `null` when the column does not exist yet."""
    cache: dict[str, set[str]] = {}

    def col(table: str, alias: str, name: str) -> str:
        columns = cache.setdefault(table, _columns(con, dataset, table))
        return f'{alias}."{name}"' if name in columns else "null"

    return col


def map_budget(minutes: float, spent_last_hour: float, requests_per_minute: int = REQUESTS_PER_MINUTE,
               utilisation: float = DEFAULT_UTILISATION) -> int:
    """Requests a map refresh covering the next `minutes` may spend: the hour's budget (the rate limit x
    utilisation) less what everything else spent over the last hour (pages, targeted refreshes, write-back),
    pro rata. What the pages and refreshes leave goes to the maps; never below zero."""
    if minutes <= 0:
        return 0
    hourly = requests_per_minute * 60 * utilisation
    return max(0, math.floor((hourly - spent_last_hour) * min(minutes, 60) / 60))
