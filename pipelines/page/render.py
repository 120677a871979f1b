"""The team page as one HTML file that opens from disk with no network: drawn (`render_page`) and written
(`write_team_page`).

Charts are Vega-Lite specifications written with Altair; the route map is a Vega specification (Vega-Lite
has no pan and zoom for a projection). Both are drawn in the browser by Vega, whose JavaScript (vega,
vega-lite and vega-embed, 0.9 MB) is inlined once per page from `vl_convert.javascript_bundle()`. Why these:
Plotly's bundled JavaScript is 4.8 MB and its geographic charts fetch their basemap from a CDN, so a page
would weigh five times as much and its map would not open offline; Altair's own `save(inline=True)` inlines
the same 0.9 MB in every chart. The land is Natural Earth's 1:110m outline the PNG maps draw
(`pipelines/geo/reference_data`), read as GeoJSON, not through geopandas.

Every number the page prints sits in a table cell with its exact value in `data-value`, so a reader (and
the browser test) can compare it with the mart it came from; the charts draw the same rows.
"""

from __future__ import annotations

import hashlib
import html
import json
import math
import os
import re
from dataclasses import dataclass
from datetime import date, datetime
from decimal import Decimal
from functools import cache
from pathlib import Path
from typing import Any

from pipelines.errors import ConfigurationError
from pipelines.page import NEAR_FREE_DAYS, ROUTE_FEATURES, PageFigures, page_state, read_page_figures
from pipelines.settings import ANALYTICS_SCHEMA, DATASET_NAME, Account, data_dir
from pipelines.warehouse import WarehouseStore, table_exists

PAGE_FILE_NAME = "team_page.html"
STATE_PATTERN = re.compile(rb'<meta name="page-state" content="([^"]*)"')
MAP_HEIGHT = 460
CHART_WIDTH = 560


@dataclass(frozen=True)
class TeamPage:
    """The page's file, whether this call wrote it (False: its inputs had not changed), and its bytes."""

    path: Path
    written: bool
    bytes: int


def team_page_path(account: Account | None = None) -> Path:
    """`<data_dir>/team_page.html`, or `team_page_<account>.html` for a named account."""
    return (account or Account()).own_file(data_dir() / PAGE_FILE_NAME)


def write_team_page(store: WarehouseStore, out_path: Path, *, title: str = "Ocean tracking",
                    analytics_schema: str = ANALYTICS_SCHEMA, dataset_name: str = DATASET_NAME) -> TeamPage:
    """Write the team page of the marts in `analytics_schema` to `out_path`, unless the file there already
    shows their current state; read-only on the warehouse. The file appears whole or not at all (written
    beside its place, then renamed). Marts not built yet are one line saying to build them."""
    out_path = Path(out_path)
    with store.connect(read_only=True) as con:
        if not table_exists(con, analytics_schema, "container_status"):
            raise ConfigurationError(f"No models in {store.place} (schema {analytics_schema}) to draw the team page "
                                     "from: run a sync with models first (python -m pipelines sync).")  # fmt: skip
        state = f"{page_code()}:{page_state(con, analytics_schema=analytics_schema, dataset_name=dataset_name)}"
        if recorded_state(out_path) == state:
            return TeamPage(out_path, written=False, bytes=out_path.stat().st_size)
        figures = read_page_figures(con, analytics_schema=analytics_schema, dataset_name=dataset_name)
    page = render_page(figures, title=title, state=state).encode()
    out_path.parent.mkdir(parents=True, exist_ok=True)
    partial = out_path.with_name(f".{out_path.name}.{os.getpid()}.partial")
    try:
        partial.write_bytes(page)
        os.replace(partial, out_path)
    finally:
        partial.unlink(missing_ok=True)
    return TeamPage(out_path, written=True, bytes=len(page))


@cache
def page_code() -> str:
    """A digest of the code that reads and draws the page (this package): part of the state a page records,
    so a release that changes the page rewrites every page once."""
    digest = hashlib.sha256()
    for module in sorted(Path(__file__).parent.glob("*.py")):
        digest.update(module.read_bytes())
    return digest.hexdigest()[:12]


def recorded_state(path: Path) -> str | None:
    """The state a page on disk shows (its `page-state` meta, near the top), None without one."""
    try:
        with path.open("rb") as page:
            found = STATE_PATTERN.search(page.read(4096))
    except OSError:
        return None
    return html.unescape(found.group(1).decode()) if found else None


@cache
def vega_javascript() -> str:
    """vega, vega-lite and vega-embed as one script that sets `window.vegaEmbed` (read once per process)."""
    import vl_convert

    return vl_convert.javascript_bundle()


@cache
def land_features() -> list[dict[str, Any]]:
    """The land polygons as GeoJSON features (the vendored Natural Earth outline)."""
    from pipelines.geo import LAND_PATH

    return json.loads(LAND_PATH.read_text())["features"]


def chart_specs(figures: PageFigures) -> dict[str, dict[str, Any]]:
    """Each chart's specification by its name (a Vega-Lite one from Altair, the map's a Vega one); a
    section without rows has no chart."""
    import altair as alt

    specs: dict[str, Any] = {}
    if figures.carriers:
        specs["reliability"] = alt.Chart(alt.Data(values=_plain(figures.carriers))).mark_bar().encode(
            x=alt.X("reliability:Q", title="on time against the original ETA", axis=alt.Axis(format="%"),
                    scale=alt.Scale(domain=[0, 1])),
            y=alt.Y("carrier_scac:N", title="carrier", sort="-x"),
            tooltip=["carrier_scac:N", alt.Tooltip("reliability:Q", format=".1%"), "arrivals_compared:Q",
                     "arrivals_late:Q"],
        ).properties(width=CHART_WIDTH, title="Schedule reliability by carrier")  # fmt: skip
    if any(row["mean_absolute_error_hours"] is not None for row in figures.eta_error):
        specs["eta_error"] = alt.Chart(alt.Data(values=_plain(figures.eta_error))).mark_line(point=True).encode(
            x=alt.X("lead_time_days:O", title="days before arrival"),
            y=alt.Y("mean_absolute_error_hours:Q", title="mean ETA error, hours"),
            color=alt.Color("carrier_scac:N", title="carrier"),
            tooltip=["carrier_scac:N", "lead_time_days:O", alt.Tooltip("mean_absolute_error_hours:Q", format=".1f"),
                     "arrivals_with_eta:Q"],
        ).transform_filter("datum.mean_absolute_error_hours != null").properties(
            width=CHART_WIDTH, title="ETA error against lead time (port of discharge)")  # fmt: skip
    if figures.at_risk:
        specs["at_risk"] = alt.Chart(alt.Data(values=_plain([{**row, "risk": risk_of(row)} for row in figures.at_risk]))
        ).mark_bar().encode(
            x=alt.X("count():Q", title="containers"),
            y=alt.Y("place:N", title="where the free time runs", sort="-x"),
            color=alt.Color("risk:N", title="risk"),
            tooltip=["place:N", "risk:N", "count():Q"],
        ).properties(width=CHART_WIDTH, title="Containers at risk today")  # fmt: skip
    for name, rows, title in (("dwell", figures.dwell, "Terminal dwell by terminal, days"),
                              ("transit", figures.transit, "Port-to-port transit by lane, days")):
        if rows:
            base = alt.Chart(alt.Data(values=_plain(rows))).encode(
                y=alt.Y("label:N", title=None, sort=alt.EncodingSortField("observations", order="descending")))
            specs[name] = (base.mark_rule(strokeWidth=3).encode(x=alt.X("p50_days:Q", title="median to 90th percentile"),
                                                                x2="p90_days:Q", tooltip=["label:N", "observations:Q"])
                           + base.mark_point(filled=True).encode(x="p50_days:Q")).properties(width=CHART_WIDTH, title=title)  # fmt: skip
    for name, rows, field, title in (("emissions_carrier", figures.emissions_by_carrier, "carrier_scac", "by carrier"),
                                     ("emissions_lane", figures.emissions_by_lane, "lane", "by lane")):
        if rows:
            specs[name] = alt.Chart(alt.Data(values=_plain(rows))).mark_bar().encode(
                x=alt.X("co2e_tonnes:Q", title="t CO2e (well to wake)"),
                y=alt.Y(f"{field}:N", title=None, sort="-x"),
                tooltip=[f"{field}:N", alt.Tooltip("co2e_tonnes:Q", format=",.1f"), "legs:Q"],
            ).properties(width=CHART_WIDTH, title=f"Emissions {title}")  # fmt: skip
    specs = {name: chart.to_dict() for name, chart in specs.items()}
    specs["routes"] = route_map_spec(figures)
    return specs


def risk_of(row: dict[str, Any]) -> str:
    """Why a container is at risk: past its last free day, within `NEAR_FREE_DAYS` of it, or held."""
    if (row.get("days_past_last_free_day") or 0) > 0:
        return "past the last free day"
    if row.get("free_days_left") is not None and row["free_days_left"] <= NEAR_FREE_DAYS:
        return f"last free day within {NEAR_FREE_DAYS} days"
    return "held"


def route_map_spec(figures: PageFigures) -> dict[str, Any]:
    """The route map (Vega): land, the route lines (the vessels' past positions solid, the legs ahead
    dashed) and a point per container at sea linking to its page in the service's web application. Drag
    to turn the globe east or west (the antimeridian is a meridian like any other: d3-geo cuts every line
    and polygon at the map's edge), the wheel to zoom."""
    past = ROUTE_FEATURES[0]
    return {
        "$schema": "https://vega.github.io/schema/vega/v5.json",
        "width": CHART_WIDTH + 300, "height": MAP_HEIGHT, "autosize": "none",
        "signals": [
            {"name": "scale", "value": 140, "on": [{"events": {"type": "wheel", "consume": True},
                                                    "update": "clamp(scale * pow(1.0015, -event.deltaY), 100, 4000)"}]},
            {"name": "angles", "value": [0, 0], "on": [{"events": "pointerdown", "update": "[rotateX, centerY]"}]},
            {"name": "cloned", "value": None, "on": [{"events": "pointerdown", "update": "copy('projection')"}]},
            {"name": "start", "value": None, "on": [{"events": "pointerdown", "update": "invert(cloned, xy())"}]},
            {"name": "drag", "value": None, "on": [{"events": "[pointerdown, window:pointerup] > window:pointermove",
                                                    "update": "invert(cloned, xy())"}]},
            {"name": "delta", "value": None, "on": [{"events": {"signal": "drag"},
                                                     "update": "[drag[0] - start[0], start[1] - drag[1]]"}]},
            {"name": "rotateX", "value": 0, "on": [{"events": {"signal": "delta"}, "update": "angles[0] + delta[0]"}]},
            {"name": "centerY", "value": 20, "on": [{"events": {"signal": "delta"},
                                                     "update": "clamp(angles[1] + delta[1], -70, 70)"}]},
        ],
        "projections": [{"name": "projection", "type": "mercator", "scale": {"signal": "scale"},
                         "rotate": [{"signal": "rotateX"}, 0, 0], "center": [0, {"signal": "centerY"}],
                         "translate": [{"signal": "width / 2"}, {"signal": "height / 2"}]}],
        "data": [
            {"name": "land", "values": land_features()},
            {"name": "routes", "values": figures.routes},
            {"name": "containers", "values": _plain(figures.at_sea),
             "transform": [{"type": "geopoint", "projection": "projection", "fields": ["longitude", "latitude"]}]},
        ],
        "marks": [
            {"type": "shape", "from": {"data": "land"}, "encode": {"update": {"fill": {"value": "#e9e4d6"}}},
             "transform": [{"type": "geoshape", "projection": "projection"}]},
            {"type": "shape", "from": {"data": "routes"},
             "encode": {"update": {"stroke": {"signal": f"datum.properties.kind === '{past}' ? '#4a6d8c' : '#d9822b'"},
                                   "strokeDash": {"signal": f"datum.properties.kind === '{past}' ? [] : [4, 3]"},
                                   "strokeWidth": {"value": 1}, "strokeOpacity": {"value": 0.6},
                                   "fill": {"value": None}}},
             "transform": [{"type": "geoshape", "projection": "projection"}]},
            {"type": "symbol", "from": {"data": "containers"},
             "encode": {"update": {"x": {"field": "x"}, "y": {"field": "y"}, "size": {"value": 28},
                                   "fill": {"value": "#1f4e79"}, "stroke": {"value": "white"},
                                   "strokeWidth": {"value": 0.5}, "href": {"field": "url"}, "cursor": {"value": "pointer"},
                                   "tooltip": {"signal": "{title: datum.container_number, vessel: datum.vessel_name, "
                                                         "'next port': datum.next_port_name, 'POD ETA': datum.pod_eta_at}"}}}},
        ],
    }  # fmt: skip


# ---- the page ---------------------------------------------------------------------------------------

STYLE = """
body { font: 14px/1.45 system-ui, sans-serif; margin: 0 auto; max-width: 1000px; padding: 1rem 1.5rem; color: #1d2733; }
header { border-bottom: 1px solid #d0d7de; margin-bottom: 1rem; }
h1 { font-size: 1.5rem; margin: 0.2rem 0; } h2 { font-size: 1.2rem; margin-top: 2rem; }
.note { color: #57606a; } .stale { color: #a0522d; }
table { border-collapse: collapse; margin: 0.5rem 0 1rem; font-size: 13px; }
th, td { padding: 2px 8px; border-bottom: 1px solid #eaeef2; text-align: left; }
td[data-value] { text-align: right; font-variant-numeric: tabular-nums; }
details { margin: 0.5rem 0; } nav a { margin-right: 1rem; }
"""


def render_page(figures: PageFigures, *, title: str, state: str) -> str:
    """The whole page: a header saying when the data was synced, then each section's chart and table,
    then the script that draws the charts and reports what it drew (`window.pageReport`,
    `document.body.dataset.rendered`)."""
    specs = chart_specs(figures)
    sections = "\n".join([_scorecard(figures), _at_risk(figures), _distributions(figures), _emissions(figures),
                          _routes(figures)])  # fmt: skip
    charts = json.dumps(specs, default=_json_value, separators=(",", ":")).replace("</", "<\\/")
    return f"""<!doctype html>
<html lang="en"><head><meta charset="utf-8"><meta name="page-state" content="{html.escape(state)}">
<title>{html.escape(title)}</title><style>{STYLE}</style>
<script>{vega_javascript()}</script></head>
<body data-rendered="0">
<header><h1>{html.escape(title)}</h1>
<p class="note">Data synced <time id="synced-at">{html.escape(figures.synced_at or "never")}</time>; models built
{html.escape(figures.models_built_at or "never")}. Every figure comes from a mart of the lake (its name under each
table).</p>
<nav><a href="#scorecard">Carrier scorecard</a><a href="#at-risk">Demurrage at risk</a><a href="#distributions">Dwell and
transit</a><a href="#emissions">Emissions</a><a href="#routes">Routes</a></nav></header>
{sections}
<script type="application/json" id="page-charts">{charts}</script>
<script>{DRAW_SCRIPT}</script>
</body></html>
"""


DRAW_SCRIPT = """
(async () => {
  const specs = JSON.parse(document.getElementById('page-charts').textContent);
  const marks = (node) => node.marktype && node.marktype !== 'group' ? (node.items || []).length
    : (node.items || []).reduce((sum, item) => sum + marks(item), 0);
  const report = {};
  await Promise.all(Object.entries(specs).map(async ([name, spec]) => {
    const drawn = await vegaEmbed('#chart-' + name, spec, {actions: false, renderer: name === 'routes' ? 'canvas' : 'svg'});
    report[name] = marks(drawn.view.scenegraph().root);
  }));
  window.pageReport = report;
  document.body.dataset.rendered = String(Object.keys(report).length);
})().catch((error) => { console.error(error); document.body.dataset.failed = String(error); });
"""


def _scorecard(figures: PageFigures) -> str:
    return _section("scorecard", "Carrier scorecard", [
        _chart("reliability"),
        _table("carriers", "schedule_reliability (original ETA, every month summed)", figures.carriers,
               [("carrier_scac", "carrier"), ("arrivals", "arrivals"), ("arrivals_compared", "compared"),
                ("arrivals_on_time", "on time"), ("arrivals_late", "late"), ("reliability", "reliability"),
                ("mean_delay_days_of_late", "mean delay of the late, days")]),
        _table("lanes", f"schedule_reliability by carrier and lane (the {len(figures.lanes)} with most arrivals)",
               figures.lanes, [("carrier_scac", "carrier"), ("lane", "lane"), ("arrivals", "arrivals"),
                               ("arrivals_compared", "compared"), ("reliability", "reliability")]),
        _chart("eta_error"),
        _details("ETA error by carrier and lead time", _table(
            "eta_error", "eta_accuracy_summary (carrier, port of discharge)", figures.eta_error,
            [("carrier_scac", "carrier"), ("lead_time_days", "days before arrival"), ("arrivals", "arrivals"),
             ("arrivals_with_eta", "with an ETA"), ("mean_absolute_error_hours", "mean error, h"),
             ("bias_hours", "bias, h"), ("share_within_1_day", "within a day")])),
    ])  # fmt: skip


def _at_risk(figures: PageFigures) -> str:
    rows = [{**row, "risk": risk_of(row), "stale": "" if row["trusted"] else (row["untrusted_reason"] or "stale")}
            for row in figures.at_risk]
    return _section("at-risk", "Demurrage and detention at risk", [
        f'<p class="note">Containers still where their free time runs that are past their last free day, '
        f'within {NEAR_FREE_DAYS} days of it, or held from pickup, today in that place\'s time zone. Fees as the '
        f'service reports them; the estimate only where a tariff is supplied (seeds/demurrage_tariffs.csv). '
        f'A <span class="stale">stale</span> row\'s terminal data is old or its tracking stopped.</p>',
        _chart("at_risk"),
        _table("at_risk", "demurrage_exposure (today's rows)", rows,
               [("container_number", "container"), ("shipping_line_scac", "carrier"), ("place", "where"),
                ("risk", "risk"), ("last_free_day", "last free day"), ("free_days_left", "free days left"),
                ("days_past_last_free_day", "days past"), ("blocking_hold_names", "holds blocking pickup"),
                ("fees_total", "fees reported"), ("fees_currency", ""), ("estimated_accrued_amount", "estimate"),
                ("estimated_currency", ""), ("stale", "stale")], link="container_number"),
    ])  # fmt: skip


def _distributions(figures: PageFigures) -> str:
    columns = [("label", ""), ("observations", "observations"), ("p50_days", "median, days"), ("p90_days", "90th pct, days")]
    return _section("distributions", "Dwell and transit", [
        _chart("dwell"), _table("dwell", "transit_dwell_percentiles (terminal_dwell by terminal)", figures.dwell, columns),
        _chart("transit"), _table("transit", "transit_dwell_percentiles (port_to_port by lane)", figures.transit, columns),
    ])  # fmt: skip


def _emissions(figures: PageFigures) -> str:
    return _section("emissions", "Emissions", [
        _chart("emissions_carrier"),
        _table("emissions_carrier", "leg_emissions summed by carrier", figures.emissions_by_carrier,
               [("carrier_scac", "carrier"), ("legs", "legs"), ("co2e_tonnes", "t CO2e"),
                ("g_co2e_per_teu_km", "g CO2e per TEU-km")]),
        _chart("emissions_lane"),
        _table("emissions_lane", f"leg_emissions summed by lane (the {len(figures.emissions_by_lane)} largest)",
               figures.emissions_by_lane, [("lane", "lane"), ("legs", "legs"), ("co2e_tonnes", "t CO2e")]),
    ])  # fmt: skip


def _routes(figures: PageFigures) -> str:
    return _section("routes", "Containers at sea", [
        '<p class="note">Drag to turn the map, scroll to zoom; a point opens the container in the service\'s web '
        'application. Solid: where the vessel sailed; dashed: the legs ahead.</p>',
        _chart("routes"),
        _details(f"The {len(figures.at_sea)} containers at sea", _table(
            "at_sea", "containers_at_sea", figures.at_sea,
            [("container_number", "container"), ("vessel_name", "vessel"), ("next_port_name", "next port"),
             ("next_port_eta_at", "next port ETA"), ("pod_name", "POD"), ("pod_eta_at", "POD ETA"),
             ("distance_to_go_km", "km to go")], link="container_number")),
    ])  # fmt: skip


def _section(anchor: str, heading: str, parts: list[str]) -> str:
    return f'<section id="{anchor}"><h2>{html.escape(heading)}</h2>\n' + "\n".join(parts) + "\n</section>"


def _chart(name: str) -> str:
    return f'<div class="chart" id="chart-{name}"></div>'


def _details(summary: str, body: str) -> str:
    return f"<details><summary>{html.escape(summary)}</summary>{body}</details>"


def _table(name: str, source: str, rows: list[dict[str, Any]], columns: list[tuple[str, str]], *,
           link: str | None = None) -> str:
    """A table of `rows` (`columns`: field and heading); numbers keep their exact value in `data-value`,
    the cell named `link` links to the row's `url`; `source` names the mart under it."""
    if not rows:
        return f'<p class="note" data-table="{name}">Nothing yet ({html.escape(source)} has no rows).</p>'
    head = "".join(f"<th>{html.escape(heading)}</th>" for _, heading in columns)
    body = []
    for row in rows:
        cells = []
        for field, _ in columns:
            value = row.get(field)
            if isinstance(value, bool) or not isinstance(value, int | float | Decimal):
                text = html.escape("" if value is None else str(value))
                if field == link and row.get("url"):
                    text = f'<a href="{html.escape(row["url"])}">{text}</a>'
                cells.append(f'<td data-field="{field}">{text}</td>')
            else:
                cells.append(f'<td data-field="{field}" data-value="{value}">{_number(field, value)}</td>')
        stale = ' class="stale"' if row.get("stale") else ""
        body.append(f"<tr{stale}>{''.join(cells)}</tr>")
    return (f'<table data-table="{name}"><thead><tr>{head}</tr></thead><tbody>{"".join(body)}</tbody>'
            f'<caption class="note" style="caption-side: bottom">{html.escape(source)}</caption></table>')  # fmt: skip


def _number(field: str, value: float | int | Decimal) -> str:
    if isinstance(value, float) and math.isnan(value):
        return ""
    if field in ("reliability", "share_within_1_day"):
        return f"{value:.1%}"
    if isinstance(value, int):
        return f"{value:,}"
    return f"{value:,.2f}" if isinstance(value, Decimal) else f"{value:,.1f}"


def _plain(rows: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Rows with JSON's types (dates and decimals as text and floats) for a chart's inline data."""
    return [{key: _json_value(value) if isinstance(value, date | datetime | Decimal) else value
             for key, value in row.items()} for row in rows]


def _json_value(value: Any) -> Any:
    if isinstance(value, Decimal):
        return float(value)
    if isinstance(value, date | datetime):
        return value.isoformat()
    raise TypeError(f"not JSON: {type(value).__name__}")
