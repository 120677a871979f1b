"""The team page: one HTML file, opened from disk with no network, showing what a logistics team looks at
every morning: the carrier scorecard, demurrage and detention at risk, dwell and transit, emissions, and the
containers at sea on a map (`pipelines.page.render.write_team_page`).

Written by the Dagster asset `team_page` after every run that changed the models or the maps (so after every
sync the schedule or a webhook runs) and by `python -m pipelines page`: `<data_dir>/team_page.html`,
`team_page_<account>.html` for a named account. Like the PNG maps, it is rewritten only when what it shows may have changed (`page_state`: the
models' build, the map features, today's date where the free time runs), recorded in the page itself.

Here: what the page shows, read from the marts (`read_page_figures`, `page_state`); `render` draws it
(Vega-Lite through Altair, and Vega for the map, inlined) and writes the file (`write_team_page`).

Every figure is a mart's row or a sum of a mart's rows, named after the mart: the page computes nothing the
models do not (a reliability over several months is the mart's on-time arrivals over its compared arrivals,
summed; an emission total is the sum of the mart's legs). The route lines are the loaded map features'
antimeridian-split geometries (`map_features.geometry_split`), simplified for the screen and shared by every
container that follows the same line (the containers of one vessel mostly do), so the page's weight follows
the routes, not the containers.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from typing import Any

import duckdb

from pipelines.geo import map_features_state
from pipelines.warehouse import table_exists

# Demurrage at risk: a container still where its free time runs, past its last free day, within this many
# free days of it, or held from pickup.
NEAR_FREE_DAYS = 2
SCORECARD_LANES = 25  # the carrier-and-lane rows shown (most arrivals first); the carriers' rows are all shown
DISTRIBUTION_ROWS = 20  # terminals and lanes in the dwell and transit charts (most observations first)
EMISSION_LANES = 15
# Route lines on the page: simplified to a tenth of a degree (about 11 km: finer than the page draws the
# world) and rounded to two decimals; the vessels' past positions are drawn as lines too.
ROUTE_TOLERANCE_DEGREES = 0.1
ROUTE_FEATURES = ("past_vessel_locations", "estimated_partial_leg", "estimated_full_legs")


@dataclass(frozen=True)
class PageFigures:
    """Everything the page shows, by section: lists of rows (dicts named like the marts' columns)."""

    synced_at: str | None
    models_built_at: str | None
    carriers: list[dict[str, Any]] = field(default_factory=list)
    lanes: list[dict[str, Any]] = field(default_factory=list)
    eta_error: list[dict[str, Any]] = field(default_factory=list)
    at_risk: list[dict[str, Any]] = field(default_factory=list)
    dwell: list[dict[str, Any]] = field(default_factory=list)
    transit: list[dict[str, Any]] = field(default_factory=list)
    emissions_by_carrier: list[dict[str, Any]] = field(default_factory=list)
    emissions_by_lane: list[dict[str, Any]] = field(default_factory=list)
    at_sea: list[dict[str, Any]] = field(default_factory=list)
    routes: list[dict[str, Any]] = field(default_factory=list)  # GeoJSON features, one per distinct line


def page_state(con: duckdb.DuckDBPyConnection, *, analytics_schema: str, dataset_name: str) -> str:
    """A token that changes whenever what the page shows may have: the models' build record (the snapshot
    they were built through), the map features' state, and the local dates the views counting days to
    today stand at (a new day changes the free days left without any sync)."""
    from pipelines.warehouse.models import BUILD_RECORD_TABLE, staging_schema

    parts = [map_features_state(con, dataset_name) or "no map features"]
    record_schema = staging_schema(analytics_schema)
    if table_exists(con, record_schema, BUILD_RECORD_TABLE):
        parts.append(str(con.execute(f'select max(built_through_snapshot) from "{record_schema}".{BUILD_RECORD_TABLE}')
                         .fetchone()[0]))  # fmt: skip
    if table_exists(con, analytics_schema, "container_free_time"):
        parts.append(str(con.execute(f'select list(distinct local_today order by local_today) from '
                                     f'"{analytics_schema}".container_free_time').fetchone()[0]))  # fmt: skip
    return json.dumps(parts)


def read_page_figures(con: duckdb.DuckDBPyConnection, *, analytics_schema: str, dataset_name: str) -> PageFigures:
    """Read every section's rows from the marts in `analytics_schema` (and the route lines from
    `dataset_name.map_features`) in one transaction, so every section shows the same snapshot."""
    a = f'"{analytics_schema}"'
    con.execute("begin transaction")
    try:
        synced_at = (con.execute(f'select max(inserted_at)::varchar from "{dataset_name}"._dlt_loads').fetchone()[0]
                     if table_exists(con, dataset_name, "_dlt_loads") else None)  # fmt: skip
        from pipelines.warehouse.models import BUILD_RECORD_TABLE, staging_schema

        record_schema = staging_schema(analytics_schema)
        built_at = (con.execute(f'select max(recorded_at)::varchar from "{record_schema}".{BUILD_RECORD_TABLE}').fetchone()[0]
                    if table_exists(con, record_schema, BUILD_RECORD_TABLE) else None)  # fmt: skip
        figures = PageFigures(
            synced_at=synced_at,
            models_built_at=built_at,
            carriers=_rows(con, f"""
                select carrier_scac, sum(arrivals) as arrivals, sum(arrivals_compared) as arrivals_compared,
                       sum(arrivals_on_time) as arrivals_on_time, sum(arrivals_late) as arrivals_late,
                       sum(arrivals_on_time) / nullif(sum(arrivals_compared), 0) as reliability,
                       sum(mean_delay_days_of_late * arrivals_late) / nullif(sum(arrivals_late), 0)
                           as mean_delay_days_of_late
                from {a}.schedule_reliability where schedule_basis = 'original_eta'
                group by carrier_scac order by arrivals desc, carrier_scac"""),
            lanes=_rows(con, f"""
                select carrier_scac, lane, sum(arrivals) as arrivals, sum(arrivals_compared) as arrivals_compared,
                       sum(arrivals_on_time) / nullif(sum(arrivals_compared), 0) as reliability
                from {a}.schedule_reliability where schedule_basis = 'original_eta'
                group by carrier_scac, lane order by arrivals desc, carrier_scac, lane limit {SCORECARD_LANES}"""),
            eta_error=_rows(con, f"""
                select dimension_value as carrier_scac, lead_time_days, arrivals, arrivals_with_eta,
                       mean_absolute_error_hours, bias_hours, share_within_1_day
                from {a}.eta_accuracy_summary where dimension = 'carrier' and arrival = 'port_of_discharge'
                order by carrier_scac, lead_time_days"""),
            at_risk=_rows(con, f"""
                select e.container_id, e.container_number, e.shipping_line_scac, e.exposure_place,
                       coalesce(e.pod_terminal_firms_code, e.pod_terminal_id) as place,
                       e.last_free_day_local::varchar as last_free_day, e.free_days_left,
                       e.days_past_last_free_day, e.blocking_hold_names, e.blocking_hold_count,
                       e.fees_total, e.fees_currency, e.estimated_accrued_amount, e.estimated_currency,
                       e.trusted, e.untrusted_reason, l.url
                from {a}.demurrage_exposure e
                left join {a}.deep_links l on l.kind = 'container' and l.id = e.container_id
                where e.local_date = e.local_today and e.left_at is null
                  and (e.days_past_last_free_day > 0 or e.free_days_left <= {NEAR_FREE_DAYS}
                       or e.blocking_hold_count > 0)
                order by e.days_past_last_free_day desc nulls last, e.free_days_left nulls last,
                         e.container_number"""),
            dwell=_distribution(con, a, dataset_name, "terminal_dwell", "terminal"),
            transit=_distribution(con, a, dataset_name, "port_to_port", "lane"),
            emissions_by_carrier=_rows(con, f"""
                select carrier_scac, count(*) as legs, sum(co2e_kg) / 1000 as co2e_tonnes,
                       sum(co2e_kg) * 1000 / nullif(sum(teu * distance_km), 0) as g_co2e_per_teu_km
                from {a}.leg_emissions group by carrier_scac order by co2e_tonnes desc nulls last, carrier_scac"""),
            emissions_by_lane=_rows(con, f"""
                select lane, count(*) as legs, sum(co2e_kg) / 1000 as co2e_tonnes
                from {a}.leg_emissions where lane is not null group by lane
                order by co2e_tonnes desc nulls last, lane limit {EMISSION_LANES}"""),
            at_sea=_rows(con, f"""
                select s.container_id, s.container_number, s.vessel_name, s.vessel_imo, s.longitude, s.latitude,
                       s.next_port_name, s.next_port_eta_at::varchar as next_port_eta_at, s.pod_name,
                       s.pod_eta_at::varchar as pod_eta_at, s.distance_to_go_km, l.url
                from {a}.containers_at_sea s
                left join {a}.deep_links l on l.kind = 'container' and l.id = s.container_id
                where s.longitude is not null and s.latitude is not null
                order by s.vessel_name, s.container_number"""),
            routes=_routes(con, dataset_name, a),
        )
    finally:
        con.execute("rollback")  # read only: ends the snapshot
    return figures


def _distribution(con: duckdb.DuckDBPyConnection, schema: str, dataset_name: str, measure: str,
                  dimension: str) -> list[dict[str, Any]]:
    """The `measure`'s percentiles by `dimension`, labelled: a terminal by its name (the raw `terminals`)."""
    names = (f'(select id, any_value(name) as name from "{dataset_name}".terminals group by id)'
             if table_exists(con, dataset_name, "terminals") else "(select null as id, null as name)")
    return _rows(con, f"""
        select p.dimension_value, coalesce(n.name, p.dimension_value) as label, p.observations,
               p.p50_hours / 24 as p50_days, p.p90_hours / 24 as p90_days
        from {schema}.transit_dwell_percentiles p left join {names} n on n.id = p.dimension_value
        where p.measure = '{measure}' and p.dimension = '{dimension}'
        order by p.observations desc, p.dimension_value limit {DISTRIBUTION_ROWS}""")


def _routes(con: duckdb.DuckDBPyConnection, dataset_name: str, schema: str) -> list[dict[str, Any]]:
    """The distinct route lines of the containers at sea, as GeoJSON features (`kind`: the feature type)."""
    if not table_exists(con, dataset_name, "map_features"):
        return []
    kinds = ", ".join(f"'{kind}'" for kind in ROUTE_FEATURES)
    lines = con.execute(f"""
        with simplified as (
            select f.feature_type,
                   st_asgeojson(st_reduceprecision(st_simplify(st_geomfromwkb(f.geometry_split),
                                                               {ROUTE_TOLERANCE_DEGREES}), 0.01)) as geometry
            from "{dataset_name}".map_features f
            where f.geometry_split is not null and f.feature_type in ({kinds})
              and f.container_id in (select container_id from {schema}.containers_at_sea)
        )
        select feature_type, geometry from simplified
        where geometry is not null group by all order by all""").fetchall()
    return [{"type": "Feature", "properties": {"kind": kind}, "geometry": json.loads(geometry)}
            for kind, geometry in lines]


def _rows(con: duckdb.DuckDBPyConnection, sql: str) -> list[dict[str, Any]]:
    cursor = con.execute(sql)
    names = [column[0] for column in cursor.description]
    return [dict(zip(names, row, strict=True)) for row in cursor.fetchall()]
