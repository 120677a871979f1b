"""Container route map (`GET /containers/{id}/map_geojson`) built from a shipment plan at `now`.

Implements the spec's rules: empty collection before route data exists; one `port` feature per
route port (POL, TS1.., POD); `past_vessel_locations` for completed and in-progress legs;
`current_vessel` only while departed and before the next port; `estimated_partial_leg` starting at
exactly the current vessel coordinates; `estimated_full_legs` for legs not started. Coordinates are
[lon, lat] with lon in [-180, 180], so trans-Pacific legs show the antimeridian jump.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from . import lanes
from .render import known, latest_estimate
from .routing import Leg
from .shipments import Plan
from .timeutil import iso

if TYPE_CHECKING:  # pragma: no cover
    from .fleet import Fleet
    from .reference import Reference


def empty() -> dict:
    """An empty FeatureCollection (no route data yet)."""
    return {"type": "FeatureCollection", "features": []}


def _label(i: int, total: int) -> str:
    return "POL" if i == 0 else "POD" if i == total - 1 else f"TS{i}"


def _line(kind: str, coords: list[list[float]], props: dict) -> dict:
    return {"type": "Feature", "geometry": {"type": "LineString", "coordinates": coords},
            "properties": {"feature_type": kind, **props, "point_count": len(coords)}}


def leg_coords(leg: Leg, first_hop: int | None = None, last_hop: int | None = None) -> list[tuple[float, float]]:
    """Unwrapped coordinates of the hops of `leg` (optionally a sub-range of its hops)."""
    lo = leg.a if first_hop is None else first_hop
    hi = leg.b if last_hop is None else last_hop
    return lanes.concat([list(leg.sched.hop_path(h).coords) for h in range(lo, hi)])


def build(plan: Plan, now: int, ref: Reference, fleet: Fleet) -> dict:
    """The FeatureCollection for one container of `plan` at `now`."""
    if plan.route_known_at is None or plan.route_known_at > now:
        return empty()
    ports = [ref.ports[code] for code in plan.ports]
    total = len(ports)
    features: list[dict] = []
    for i, port in enumerate(ports):
        inbound = plan.legs[i - 1] if i > 0 else None
        outbound = plan.legs[i] if i < total - 1 else None
        eta = latest_estimate(plan.eta_revisions[i - 1], now) if inbound else None
        etd = latest_estimate(plan.etd_revisions[i], now) if outbound else None
        updates = [plan.route_known_at]
        for revs in ([plan.eta_revisions[i - 1]] if inbound else []) + ([plan.etd_revisions[i]] if outbound else []):
            updates += [k for k, _ in revs if k <= now]
        ata = known(inbound.ata, now) if inbound else None
        atd = known(outbound.atd, now) if outbound else None
        updates += [t for t in (ata, atd) if t is not None]
        features.append({
            "type": "Feature", "geometry": {"type": "Point", "coordinates": [port.longitude, port.latitude]},
            "properties": {
                "feature_type": "port", "ports_sequence": i + 1, "ports_total": total, "location_id": port.id,
                "location_type": "Port", "name": port.name, "state_abbr": port.state_abbr, "state": port.state,
                "country_code": port.country_code, "country": port.country, "time_zone": port.time_zone,
                "label": _label(i, total), "inbound_eta_at": iso(eta), "inbound_ata_at": iso(ata),
                "outbound_etd_at": iso(etd), "outbound_atd_at": iso(atd), "updated_at": iso(max(updates)),
            },
        })
    for i, leg in enumerate(plan.legs):
        seq = i + 1
        origin, dest = ports[i], ports[i + 1]
        eta = latest_estimate(plan.eta_revisions[i], now)
        if leg.ata <= now:
            coords = lanes.render(leg_coords(leg))
            features.append(_line("past_vessel_locations", coords, {
                "ports_sequence": seq, "vessel_id": leg.vessel.id, "start_time": iso(leg.atd),
                "end_time": iso(leg.ata), "outbound_atd_at": iso(leg.atd), "inbound_ata_at": iso(leg.ata),
                "inbound_eta_at": iso(eta)}))
        elif leg.atd <= now:
            features.extend(_in_progress(plan, i, leg, now, fleet, origin, dest, total, eta))
        else:
            coords = lanes.render(leg_coords(leg))
            features.append(_line("estimated_full_legs", coords, {
                "ports_sequence": seq, "previous_port_id": origin.id, "next_port_id": dest.id}))
    return {"type": "FeatureCollection", "features": features}


def _in_progress(plan: Plan, i: int, leg: Leg, now: int, fleet: Fleet, origin, dest, total: int,
                 eta: int | None) -> list[dict]:
    seq = i + 1
    sched = leg.sched
    pos_ts = fleet.position_time(leg.vessel, now)
    w, _, hop, port_i, frac = sched.where(leg.vessel.slot, pos_ts)
    if w != leg.w:  # pragma: no cover - schedules make this impossible; degrade to an estimate
        return [_line("estimated_full_legs", lanes.render(leg_coords(leg)),
                      {"ports_sequence": seq, "previous_port_id": origin.id, "next_port_id": dest.id})]
    if hop is not None:
        before, after = sched.hop_path(hop).split_at(frac)
        past = lanes.concat([leg_coords(leg, leg.a, hop), before]) if hop > leg.a else lanes.concat([before])
        ahead = lanes.concat([after, leg_coords(leg, hop + 1, leg.b)]) if hop + 1 < leg.b else lanes.concat([after])
    else:
        p = port_i if port_i is not None else leg.a
        past = leg_coords(leg, leg.a, p)
        ahead = leg_coords(leg, p, leg.b)
    pos = fleet.position(leg.vessel, now)
    here = (pos.lon, pos.lat)
    past = past or [here, here]
    ahead = ahead or [here, here]
    point = lanes.render([(pos.lon, pos.lat)])[0]
    past_r = lanes.render(past)
    past_r[-1] = list(point)
    ahead_r = lanes.render(ahead)
    ahead_r[0] = list(point)
    return [
        _line("past_vessel_locations", past_r, {
            "ports_sequence": seq, "vessel_id": leg.vessel.id, "start_time": iso(leg.atd),
            "end_time": iso(pos.timestamp), "outbound_atd_at": iso(leg.atd), "inbound_ata_at": None,
            "inbound_eta_at": iso(eta)}),
        {"type": "Feature", "geometry": {"type": "Point", "coordinates": list(point)},
         "properties": {
             "feature_type": "current_vessel", "ports_sequence": seq, "vessel_id": leg.vessel.id,
             "vessel_name": leg.vessel.name, "vessel_imo": leg.vessel.imo, "voyage_number": leg.voyage,
             "vessel_location_timestamp": iso(pos.timestamp), "vessel_location_heading": pos.heading,
             "vessel_location_speed": pos.speed_knots,
             "departure_port_id": origin.id, "departure_port_name": origin.name,
             "departure_port_state_abbr": origin.state_abbr, "departure_port_state": origin.state,
             "departure_port_country_code": origin.country_code, "departure_port_country": origin.country,
             "departure_port_label": _label(i, total), "departure_port_atd": iso(leg.atd),
             "departure_port_time_zone": origin.time_zone,
             "arrival_port_id": dest.id, "arrival_port_name": dest.name,
             "arrival_port_state_abbr": dest.state_abbr, "arrival_port_state": dest.state,
             "arrival_port_country_code": dest.country_code, "arrival_port_country": dest.country,
             "arrival_port_label": _label(i + 1, total), "arrival_port_eta": iso(eta),
             "arrival_port_time_zone": dest.time_zone}},
        _line("estimated_partial_leg", ahead_r, {
            "ports_sequence": seq, "current_port_id": origin.id, "next_port_id": dest.id}),
    ]
