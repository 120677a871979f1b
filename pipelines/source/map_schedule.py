"""When a container's route map is worth another request.

Maps cost one request per container, the largest share of the rate budget, so a map is fetched only
when it can have changed: never fetched, the container changed phase since the last fetch (departed,
arrived), or it is at sea and the last fetch is older than the refresh interval (the service refreshes
vessel positions about every 15 minutes and advises at most hourly polling for containers at sea).
A container that has arrived keeps its last map: its route no longer moves.

When the budget cannot fetch every map a full sync would find due, the map-freshness scheduler
(`candidates_sql`, `plan_maps`) spends what the pages and the targeted refreshes leave on the maps that
matter most (never fetched, phase or events changed, arriving soon, then at sea and oldest) and reports the
freshness it achieved against a bound. It reads the same `fetch_log` rows the sync writes: one plan.

The refresh's cadence (`plan_refresh`, `map_budget`), computed from the account's rate budget. The service allows 100 requests per rolling minute per account. A refresh of `tracking_requests` +
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
from datetime import UTC, datetime, timedelta
from enum import StrEnum
from typing import Any

import duckdb

from pipelines.settings import PAGE_SIZE, REQUESTS_PER_MINUTE


class Phase(StrEnum):
    """Where a container is in its ocean journey, as far as its route map is concerned."""

    PRE_DEPARTURE = "pre_departure"
    AT_SEA = "at_sea"
    ARRIVED = "arrived"


PRE_DEPARTURE_REFRESH_SECONDS = 24 * 3600


def container_phase(container: dict[str, Any], shipment: dict[str, Any] | None) -> Phase:
    """Derive the phase from flattened container and shipment rows.

    Shipments carry the port-of-lading departure (`pol_atd_at`) and port-of-discharge arrival
    (`pod_ata_at`); containers carry their own `pod_arrived_at`. Either arrival wins.
    """
    shipment = shipment or {}
    if container.get("pod_arrived_at") or shipment.get("pod_ata_at"):
        return Phase.ARRIVED
    if shipment.get("pol_atd_at") or container.get("pol_vessel_departed_at"):
        return Phase.AT_SEA
    return Phase.PRE_DEPARTURE


def due_by_age_sql(table: str, now: datetime, refresh_seconds: float) -> str:
    """DuckDB SQL returning the ids of containers whose map is due by age alone: fetched at sea at least
    `refresh_seconds` ago, or before departure at least a day ago, by the host clock. (A container never
    fetched, or fetched in another phase, is due whatever its age: that needs the page, see
    `pipelines.source.bookkeeping.FetchLog.map_due`.) Literal timestamps, so dlt can transpile it to any
    destination's dialect."""
    now = now.astimezone(UTC)
    at_sea = (now - timedelta(seconds=refresh_seconds)).isoformat()
    pre_departure = (now - timedelta(seconds=PRE_DEPARTURE_REFRESH_SECONDS)).isoformat()
    return (
        f"select item_id from {table} where kind = 'map' and ("
        f"(phase = '{Phase.AT_SEA}' and fetched_at <= cast('{at_sea}' as timestamptz)) or "
        f"(phase = '{Phase.PRE_DEPARTURE}' and fetched_at <= cast('{pre_departure}' as timestamptz)))"
    )


# ---- the map-freshness scheduler ------------------------------------------------------------------------
# Why a map is worth a request now, most urgent first.
REASONS = ("never_fetched", "phase_changed", "events_changed", "arriving_soon", "at_sea_oldest", "pre_departure_daily")
ARRIVING_SOON_SECONDS = 48 * 3600
# The service refreshes vessel positions about every 15 minutes: a map fetched since shows nothing new.
MIN_MAP_AGE_SECONDS = 15 * 60
DEFAULT_FRESHNESS_BOUND_SECONDS = 6 * 3600


@dataclass(frozen=True)
class MapPlan:
    """The maps one refresh fetches, in order, and the freshness it achieves.

    `chosen`: `(container id, phase)` pairs; `reasons`: how many were chosen for each reason; `candidates`:
    how many maps were worth a request (the budget that would fetch them all); the ages, in seconds, are
    those of the at-sea containers' maps once the chosen ones are fetched (a map never fetched counts as
    infinitely old), `within_bound` the share of them no older than the bound."""

    chosen: list[tuple[str, str]]
    reasons: dict[str, int]
    candidates: int
    budget: int
    bound_seconds: float
    at_sea: int
    age_p50_seconds: float | None
    age_p95_seconds: float | None
    age_max_seconds: float | None
    within_bound: float

    @property
    def bound_met(self) -> bool:
        """Every at-sea map is within the freshness bound once this plan is fetched."""
        return self.within_bound >= 1.0

    def explain(self) -> str:
        """One line for logs and run metadata."""
        age = "n/a" if self.age_p95_seconds is None else f"{self.age_p95_seconds / 60:.0f} min"
        worst = "n/a" if self.age_max_seconds is None else f"{self.age_max_seconds / 60:.0f} min"
        verdict = "met" if self.bound_met else "NOT met (budget too small for the bound)"
        return (f"{len(self.chosen)} of {self.candidates} maps worth a request within a budget of {self.budget} "
                f"({', '.join(f'{k} {v}' for k, v in self.reasons.items() if v) or 'none'}); at-sea maps after "
                f"it: {self.at_sea}, p95 age {age}, oldest {worst}, {self.within_bound:.0%} within "
                f"{self.bound_seconds / 60:.0f} min: bound {verdict}.")


def candidates_sql(now: datetime, bound_seconds: float, dataset_prefix: str = "") -> str:
    """DuckDB SQL ranking every container whose route map is worth a request, most urgent first (see
    `REASONS`), over the loaded `containers`, `shipments`, `transport_events` and `fetch_log` tables: never
    fetched; fetched in another phase (departed, arrived); a transport event became known since the fetch;
    at sea and arriving within 48 h, fetched over a quarter of the bound ago; at sea, oldest first, fetched
    over 15 minutes ago; before departure, fetched over a day ago. Arrived containers keep their last map.
    Also returns every at-sea container with its map's `fetched_at`, to report freshness (`worth` false).
    Literal timestamps, so dlt can transpile it to any destination's dialect."""
    now = now.astimezone(UTC)
    t = dataset_prefix

    def ago(seconds: float) -> str:
        return f"cast('{(now - timedelta(seconds=seconds)).isoformat()}' as timestamptz)"

    soon = f"cast('{(now + timedelta(seconds=ARRIVING_SOON_SECONDS)).isoformat()}' as timestamptz)"
    return f"""
with maps as (
    select item_id as container_id, phase as map_phase, fetched_at from {t}fetch_log where kind = 'map'
), latest_event as (
    select container_id, max(created_at) as event_at from {t}transport_events group by container_id
), containers_now as (
    select c.id as container_id,
           case when c.pod_arrived_at is not null or s.pod_ata_at is not null then '{Phase.ARRIVED}'
                when s.pol_atd_at is not null or c.pol_vessel_departed_at is not null then '{Phase.AT_SEA}'
                else '{Phase.PRE_DEPARTURE}' end as phase,
           s.pod_eta_at, m.map_phase, m.fetched_at, e.event_at
    from {t}containers c
    left join {t}shipments s on s.id = c.shipment_id
    left join maps m on m.container_id = c.id
    left join latest_event e on e.container_id = c.id
), ranked as (
    select container_id, phase, fetched_at,
           case when fetched_at is null then 0
                when map_phase <> phase then 1
                when phase = '{Phase.ARRIVED}' then null
                when event_at > fetched_at then 2
                when phase = '{Phase.AT_SEA}' and pod_eta_at <= {soon}
                     and fetched_at <= {ago(bound_seconds / 4)} then 3
                when phase = '{Phase.AT_SEA}' and fetched_at <= {ago(MIN_MAP_AGE_SECONDS)} then 4
                when phase = '{Phase.PRE_DEPARTURE}' and fetched_at <= {ago(PRE_DEPARTURE_REFRESH_SECONDS)} then 5
           end as reason
    from containers_now
)
select container_id, phase, fetched_at, reason from ranked
where reason is not null or phase = '{Phase.AT_SEA}'
order by reason nulls last, fetched_at nulls first, container_id
"""


def plan_maps(rows: list[dict[str, Any]], budget: int, now: datetime,
              bound_seconds: float = DEFAULT_FRESHNESS_BOUND_SECONDS) -> MapPlan:
    """Choose the first `budget` maps of `candidates_sql`'s ranked rows and report the freshness of the at-sea
    maps once they are fetched."""
    worth = [row for row in rows if row["reason"] is not None]
    chosen = worth[: max(0, budget)]
    chosen_ids = {row["container_id"] for row in chosen}
    reasons = dict.fromkeys(REASONS, 0)
    for row in chosen:
        reasons[REASONS[int(row["reason"])]] += 1
    now = now.astimezone(UTC)
    ages = sorted(
        0.0 if row["container_id"] in chosen_ids
        else math.inf if row["fetched_at"] is None
        else max(0.0, (now - _aware(row["fetched_at"])).total_seconds())
        for row in rows if row["phase"] == Phase.AT_SEA
    )
    return MapPlan(
        chosen=[(row["container_id"], str(row["phase"])) for row in chosen],
        reasons=reasons, candidates=len(worth), budget=budget, bound_seconds=bound_seconds, at_sea=len(ages),
        age_p50_seconds=_quantile(ages, 0.5), age_p95_seconds=_quantile(ages, 0.95),
        age_max_seconds=ages[-1] if ages else None,
        within_bound=(sum(age <= bound_seconds for age in ages) / len(ages)) if ages else 1.0,
    )


def _aware(value: datetime) -> datetime:
    return value if value.tzinfo else value.replace(tzinfo=UTC)


def _quantile(sorted_values: list[float], q: float) -> float | None:
    """The nearest-rank quantile of sorted values (None when empty)."""
    if not sorted_values:
        return None
    return sorted_values[min(len(sorted_values) - 1, max(0, math.ceil(q * len(sorted_values)) - 1))]


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

    Phases as in `pipelines.source.map_schedule.container_phase`: arrived when the container or its shipment
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
