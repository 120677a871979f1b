"""Inland destinations reached by rail after discharge (IPI moves).

A deterministic share of shipments discharged at a US port with rail service continue by train to an
inland ramp (`destination`, `destination_terminal`: the ramp, a `terminal` with facility_type
rail_terminal). Each container then gets `rail_loaded` / `rail_departed` at the port of discharge and
`rail_arrived` / `rail_unloaded` at the ramp, where it becomes available, is picked up
(`final_destination_full_out_at`) and later returned empty. Draws come from their own random streams so
shipments without an inland leg are generated exactly as before.
"""

from __future__ import annotations

import random
from dataclasses import dataclass

from .identifiers import reference_uuid, rng_for
from .milestones import milestone
from .timeutil import DAY, HOUR, MINUTE

INLAND_SHARE = 0.2
WEST = ("BNSF", "UP")
EAST = ("NSRR", "CSXT")
# port of discharge -> inland ramps served from it, with the railroads on that corridor
RAMPS: dict[str, tuple[tuple[str, tuple[str, ...]], ...]] = {
    **{pod: (("USCHI", WEST), ("USDAL", WEST), ("USMEM", WEST), ("USKCK", WEST))
       for pod in ("USLAX", "USLGB", "USOAK", "USSEA", "USTIW")},
    **{pod: (("USCHI", EAST), ("USCMH", EAST), ("USDET", EAST), ("USCLE", EAST), ("USATL", EAST))
       for pod in ("USNYC", "USORF", "USBAL", "USPHL")},
    **{pod: (("USATL", EAST), ("USMEM", EAST), ("USCHI", EAST)) for pod in ("USSAV", "USCHS", "USJAX")},
    **{pod: (("USDAL", WEST), ("USMEM", WEST), ("USKCK", WEST)) for pod in ("USHOU", "USMSY", "USMOB")},
}


@dataclass(frozen=True)
class InlandLeg:
    """The rail leg of a shipment: ramp, its terminal, the railroads and the ETA error of the first estimate."""

    locode: str
    terminal_id: str
    pod_rail_scac: str
    ind_rail_scac: str
    transit: int            # typical rail transit (seconds), for the first estimate
    eta_error: int          # error of the first destination ETA (seconds)


@dataclass
class RailTimes:
    """Rail milestones of one container."""

    loaded: int
    departed: int
    arrived: int
    unloaded: int
    eta_error: int
    lfd: int = 0            # last free day at the ramp (end of local day), set with the events
    lfd_known: int = 0


def pick(seed: int, account: str, index: int, number: str, pod: str) -> InlandLeg | None:
    """The inland leg of shipment `index` discharged at `pod`, or None (most shipments)."""
    ramps = RAMPS.get(pod)
    if not ramps:
        return None
    rng = rng_for(seed, account, "inland", index, number)
    if rng.random() >= INLAND_SHARE:
        return None
    locode, roads = ramps[int(rng.random() * len(ramps))]
    first = roads[int(rng.random() * len(roads))]
    last = first if rng.random() < 0.8 else roads[(roads.index(first) + 1) % len(roads)]
    transit = (2 + int(rng.random() * 4)) * DAY
    err = (int(rng.random() * 5 * DAY) - DAY) // HOUR * HOUR
    return InlandLeg(locode, reference_uuid("terminal", f"{locode}:rail"), first, last, transit, err)


def container_times(rng: random.Random, leg: InlandLeg, discharged: int) -> RailTimes:
    """Rail milestones of one container discharged at `discharged`."""
    loaded = discharged + _ri(rng, 12 * HOUR, 3 * DAY)
    departed = loaded + _ri(rng, 2 * HOUR, 18 * HOUR)
    arrived = departed + leg.transit + _ri(rng, -12 * HOUR, 30 * HOUR)
    unloaded = arrived + _ri(rng, 2 * HOUR, 14 * HOUR)
    err = leg.eta_error + _ri(rng, -6 * HOUR, 6 * HOUR) // MINUTE * MINUTE
    return RailTimes(loaded, departed, arrived, unloaded, err)


def eta_estimate(rail: RailTimes, pod_arrived_known: bool, departed_known: bool) -> int:
    """Latest estimate of the rail arrival: the first error until the vessel arrives, a third of it
    until the train departs, then the scheduled arrival."""
    if departed_known:
        return rail.arrived
    return rail.arrived + (rail.eta_error // 3 if pod_arrived_known else rail.eta_error)


def _ri(rng: random.Random, lo: int, hi: int) -> int:
    return lo + int(rng.random() * (hi - lo))


def shipment_destination(ref, plan, now: int) -> tuple[dict, dict]:
    """(destination attributes, destination relationships) of a shipment at `now`: all null without an
    inland leg, as live; else the ramp, with its ETA (estimate -> actual of the first container's train)."""
    from .timeutil import iso

    leg: InlandLeg | None = plan.extra.get("inland")
    if leg is None:
        return ({"destination_locode": None, "destination_name": None, "destination_timezone": None,
                 "destination_ata_at": None, "destination_eta_at": None, "destination_original_eta_at": None},
                {"destination": {"data": None}, "destination_terminal": {"data": None}})
    port = ref.ports[leg.locode]
    cp = plan.containers[0].detail()
    rail = cp.rail
    ata = plan.legs[-1].ata
    arrived = _known(cp, "rail_arrived", now)
    departed = _known(cp, "rail_departed", now) is not None
    eta = eta_estimate(rail, ata <= now, departed)
    return ({"destination_locode": port.locode, "destination_name": port.name, "destination_timezone": port.time_zone,
             "destination_ata_at": iso(arrived), "destination_eta_at": iso(eta),
             "destination_original_eta_at": iso(rail.arrived + rail.eta_error)},
            {"destination": {"data": {"id": port.id, "type": "port"}},
             "destination_terminal": {"data": {"id": leg.terminal_id, "type": "terminal"}}})


def container_rail(ref, plan, cp, ms: dict, now: int) -> dict:
    """The rail / inland attributes of a container at `now` (all null without an inland leg)."""
    from .timeutil import iso

    leg: InlandLeg | None = plan.extra.get("inland")
    rail = cp.rail
    if leg is None or rail is None:
        return {"pod_rail_carrier_scac": None, "ind_rail_carrier_scac": None, "pod_rail_loaded_at": None,
                "pod_rail_departed_at": None, "ind_eta_at": None, "ind_ata_at": None, "ind_rail_unloaded_at": None,
                "ind_facility_lfd_on": None, "final_destination_timezone": None, "rail_last_tracking_request_at": None}
    arrived = _known(cp, "rail_arrived", now)
    eta = None
    if arrived is None and ms.get("vessel_discharged"):
        eta = eta_estimate(rail, True, _known(cp, "rail_departed", now) is not None)
    lfd = rail.lfd if rail.lfd_known and now >= rail.lfd_known else None
    loaded = _known(cp, "rail_loaded", now)
    checked = None
    if loaded is not None and ms.get("full_out") is None:
        checked = now - ((now - plan.phase) % (2 * HOUR))
    return {"pod_rail_carrier_scac": leg.pod_rail_scac, "ind_rail_carrier_scac": leg.ind_rail_scac,
            "pod_rail_loaded_at": iso(loaded), "pod_rail_departed_at": iso(_known(cp, "rail_departed", now)),
            "ind_eta_at": iso(eta), "ind_ata_at": iso(arrived),
            "ind_rail_unloaded_at": iso(_known(cp, "rail_unloaded", now)), "ind_facility_lfd_on": iso(lfd),
            "final_destination_timezone": ref.ports[leg.locode].time_zone,
            "rail_last_tracking_request_at": iso(checked)}


def _known(cp, name: str, now: int) -> int | None:
    return milestone(cp, name, now)
