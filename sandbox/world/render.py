"""Rendering an account's rows into JSON:API resource dicts as seen at a given `now`.

A plan holds every milestone with the time it becomes known; these functions reveal only what is
known by `now`, so advancing the clock changes statuses, ETAs and events while the same `now` always
renders the same output. Overlays (patches, API-created rows) are read from the account's store.
"""

from __future__ import annotations

import math
from typing import TYPE_CHECKING

from . import inland
from .lifecycle import api_state, failing_state, own_state
from .milestones import milestone
from .shipments import ContainerPlan, Event, Plan
from .stops import request_stopped, stop_state, stop_user_id
from .timeutil import DAY, HOUR, iso

if TYPE_CHECKING:  # pragma: no cover
    from .store import AccountStore


def latest_estimate(revs: list[tuple[int, int]], now: int) -> int | None:
    """The newest estimate published by `now` (None before the first one)."""
    value = None
    for known, est in revs:
        if known <= now:
            value = est
        else:
            break
    return value


def known(ts: int | None, now: int) -> int | None:
    """`ts` if it has happened by `now`."""
    return ts if ts is not None and ts <= now else None


def event_live(e: Event, now: int) -> bool:
    """An event is returned once known; it stays returned (flagged) after being invalidated."""
    return e.known_at <= now


def tracking_attempt(plan: Plan, now: int, stopped_at: int | None) -> tuple[int, int | None]:
    """(last tracking attempt, stop time or None): attempts every 3 h until tracking stops at
    `stopped_at` (the stop in force, see `stops.stop_state`; None while tracked)."""
    if stopped_at is not None and now >= stopped_at:
        return max(stopped_at - 1, plan.ident.created_at), stopped_at
    grid = now - ((now - plan.phase) % (3 * HOUR))
    return max(grid, plan.ident.created_at), None


def container_status(cp: ContainerPlan, now: int) -> str:
    """`current_status` from the live enum, derived from the milestones known by `now` (inland
    containers: awaiting_inland_transfer after discharge, on_rail until unloaded at the ramp)."""
    if milestone(cp, "empty_in", now):
        return "empty_returned"
    if milestone(cp, "full_out", now):
        return "picked_up"
    if milestone(cp, "available", now):
        return "available"
    if cp.rail is not None and milestone(cp, "vessel_discharged", now):
        if milestone(cp, "rail_unloaded", now):
            return "not_available"
        if milestone(cp, "rail_departed", now) or milestone(cp, "rail_loaded", now):
            return "on_rail"
        return "awaiting_inland_transfer"
    if milestone(cp, "vessel_discharged", now):
        return "not_available"
    if milestone(cp, "vessel_departed", now) or milestone(cp, "vessel_loaded", now):
        return "on_ship"
    return "new"


def shipment_resource(store: AccountStore, plan: Plan, now: int) -> dict:
    """A `shipment` resource at `now`, with ref_numbers/tags overlays applied."""
    ident = plan.ident
    ref = store.ref
    sid = store.shipment_id(ident.index)
    first, last = plan.legs[0], plan.legs[-1]
    pol, pod = ref.ports[first.origin], ref.ports[last.destination]
    stop = stop_state(store, plan, now)
    attempted, stopped = tracking_attempt(plan, now, stop.stopped_at if stop else None)
    if stop is not None and stop.frozen:
        now = min(now, stop.stopped_at)     # nothing learnt after an early or user stop is shown
    dest_attrs, dest_rels = inland.shipment_destination(ref, plan, now)
    patch = store.shipment_patches.get(sid, {})
    return {
        "id": sid, "type": "shipment",
        "attributes": {
            "created_at": iso(ident.created_at),
            "ref_numbers": list(patch.get("ref_numbers", ident.ref_numbers)),
            "tags": list(patch.get("tags", ident.tags)),
            "bill_of_lading_number": ident.bl_number,
            "normalized_number": ident.normalized_number,
            "shipping_line_scac": ident.carrier.scac,
            "shipping_line_name": ident.carrier.name,
            "shipping_line_short_name": ident.carrier.short_name,
            "customer_name": store.party_name(ident.party),
            "port_of_lading_locode": pol.locode, "port_of_lading_name": pol.name,
            "port_of_discharge_locode": pod.locode, "port_of_discharge_name": pod.name,
            "pod_vessel_name": last.vessel.name, "pod_vessel_imo": last.vessel.imo,
            "pod_voyage_number": last.voyage,
            "destination_locode": dest_attrs["destination_locode"],
            "destination_name": dest_attrs["destination_name"],
            "destination_timezone": dest_attrs["destination_timezone"],
            "destination_ata_at": dest_attrs["destination_ata_at"],
            "destination_eta_at": dest_attrs["destination_eta_at"],
            "pol_etd_at": iso(latest_estimate(plan.etd_revisions[0], now)),
            "pol_atd_at": iso(known(first.atd, now)),
            "pol_timezone": pol.time_zone,
            "pod_eta_at": iso(latest_estimate(plan.eta_revisions[-1], now)),
            "pod_original_eta_at": iso(plan.eta_revisions[-1][0][1]),
            "pol_original_etd_at": iso(plan.etd_revisions[0][0][1]),
            "destination_original_eta_at": dest_attrs["destination_original_eta_at"],
            "pod_ata_at": iso(known(last.ata, now)),
            "pod_timezone": pod.time_zone,
            "line_tracking_last_attempted_at": iso(attempted),
            "line_tracking_last_succeeded_at": iso(attempted + 1),
            "line_tracking_stopped_at": iso(stopped),
            "line_tracking_stopped_reason": stop.reason if stop else None,
        },
        "links": {"self": f"/v2/shipments/{sid}"},
        "relationships": {
            "port_of_lading": {"data": {"id": pol.id, "type": "port"}},
            "port_of_discharge": {"data": {"id": pod.id, "type": "port"}},
            "pod_terminal": {"data": {"id": plan.pod_terminal.id, "type": "terminal"}},
            **dest_rels,
            "line_tracking_stopped_by_user": {"data": {"id": stop_user_id(store), "type": "user"}
                                              if stop is not None and stop.by_user else None},
            "containers": {"data": [{"id": store.container_id(ident.index, c.slot), "type": "container"}
                                    for c in ident.containers]},
        },
    }


def container_resource(store: AccountStore, plan: Plan, slot: int, now: int) -> dict:
    """A `container` resource at `now`: milestones, holds, fees, LFDs and availability."""
    cp = plan.containers[slot].detail()
    ident = plan.ident
    cid = store.container_id(ident.index, slot)
    tz = store.ref.ports[plan.legs[-1].destination].time_zone
    stop = stop_state(store, plan, now)
    attempted, _ = tracking_attempt(plan, now, stop.stopped_at if stop else None)
    if stop is not None and stop.frozen:
        now = min(now, stop.stopped_at)     # no updates after an early or user stop
    ms = {name: milestone(cp, name, now) for name in (
        "empty_out", "full_in", "vessel_loaded", "vessel_departed", "vessel_arrived", "vessel_discharged",
        "available", "full_out", "empty_in")}
    arrived, out = ms["vessel_arrived"], ms["full_out"]
    railed = cp.rail is not None
    at_terminal = arrived is not None and out is None and not (railed and milestone(cp, "rail_loaded", now))
    rail = inland.container_rail(store.ref, plan, cp, ms, now)
    lfd_known = now >= cp.lfd_known
    pickup_lfd = (cp.lfd_line or cp.lfd_terminal) if lfd_known else None
    holds = [{"name": h.name, "status": h.status, "description": h.description}
             for h in cp.holds if at_terminal and h.appear <= now < h.clear]
    fees = []
    if at_terminal and ms["vessel_discharged"]:
        if pickup_lfd is not None and now > pickup_lfd:
            days = math.ceil((now - pickup_lfd) / DAY)
            fees.append({"type": "demurrage", "amount": days * cp.demurrage_rate, "currency_code": "USD"})
        if any(h.name == "VACIS" and h.appear <= now for h in cp.holds):
            fees.append({"type": "exam", "amount": cp.exam_fee, "currency_code": "USD"})
    available = None if arrived is None else bool(ms["available"]) and out is None
    checked = (now - ((now - plan.phase) % HOUR)) if at_terminal else None
    patch = store.container_patches.get(cid, {})
    etype, elen, eheight = cp.equipment
    return {
        "id": cid, "type": "container",
        "attributes": {
            "number": cp.ident.number, "seal_number": cp.seal, "created_at": iso(ident.created_at),
            "ref_numbers": list(patch.get("ref_numbers", store.container_base_refs(plan, slot))),
            "pod_arrived_at": iso(arrived), "pod_discharged_at": iso(ms["vessel_discharged"]),
            "final_destination_full_out_at": iso(out) if railed else None,
            "holds_at_pod_terminal": holds,
            "available_for_pickup": available,
            "delivered_at": None,
            "current_status": container_status(cp, now),
            "empty_out_at": iso(ms["empty_out"]), "pol_full_in_at": iso(ms["full_in"]),
            "pol_vessel_loaded_at": iso(ms["vessel_loaded"]), "pol_vessel_departed_at": iso(ms["vessel_departed"]),
            "equipment_type": etype, "equipment_length": elen, "equipment_height": eheight,
            "pod_full_out_at": None if railed else iso(out), "empty_terminated_at": iso(ms["empty_in"]),
            "terminal_checked_at": iso(checked),
            "fees_at_pod_terminal": fees,
            "pickup_lfd": iso(pickup_lfd),
            "pickup_appointment_at": iso(cp.appointment[1]) if cp.appointment and now >= cp.appointment[0] else None,
            "pod_full_out_chassis_number": cp.chassis if out else None,
            "location_at_pod_terminal": cp.yard if at_terminal and ms["vessel_discharged"] else None,
            "pod_last_tracking_request_at": iso(checked),
            "shipment_last_tracking_request_at": iso(attempted),
            "rail_last_tracking_request_at": rail.pop("rail_last_tracking_request_at"),
            "availability_known": arrived is not None,
            "pod_timezone": tz, "final_destination_timezone": rail.pop("final_destination_timezone"),
            "weight_in_lbs": cp.weight_lbs, "empty_terminated_timezone": tz,
            "pod_rail_carrier_scac": rail["pod_rail_carrier_scac"], "ind_rail_carrier_scac": rail["ind_rail_carrier_scac"],
            "pod_rail_loaded_at": rail["pod_rail_loaded_at"], "pod_rail_departed_at": rail["pod_rail_departed_at"],
            "ind_eta_at": rail["ind_eta_at"], "ind_ata_at": rail["ind_ata_at"],
            "ind_rail_unloaded_at": rail["ind_rail_unloaded_at"],
            "ind_facility_holds": None, "ind_facility_fees": None, "ind_facility_lfd_on": rail["ind_facility_lfd_on"],
            "import_deadlines": {
                "pickup_lfd_terminal": iso(cp.lfd_terminal) if lfd_known and not railed else None,
                "pickup_lfd_rail": rail["ind_facility_lfd_on"],
                "pickup_lfd_line": iso(cp.lfd_line) if lfd_known and cp.lfd_line else None,
            },
            "ssl_lfd": iso(cp.lfd_line) if lfd_known and cp.lfd_line else None,
        },
        "relationships": {
            "shipment": {"data": {"id": store.shipment_id(ident.index), "type": "shipment"}},
            "pickup_facility": {"data": {"id": plan.extra["inland"].terminal_id, "type": "terminal"}
                                if railed and plan.extra.get("inland") else None},
            "pod_terminal": {"data": {"id": plan.pod_terminal.id, "type": "terminal"}},
            "transport_events": {"data": [{"id": store.event_id(ident.index, slot, e.seq), "type": "transport_event"}
                                          for e in cp.events if event_live(e, now)]},
            "raw_events": {"data": []},
        },
    }


def event_resource(store: AccountStore, plan: Plan, slot: int, e: Event, now: int) -> dict:
    """A `transport_event` resource (live shape: value, invalidated_at, previous_version)."""
    ref = store.ref
    port = ref.ports[e.locode]
    idx = plan.ident.index
    eid = store.event_id(idx, slot, e.seq)
    prev = store.event_id(idx, slot, e.previous_seq) if e.previous_seq is not None else None
    return {
        "id": eid, "type": "transport_event",
        "attributes": {
            "event": e.name, "created_at": iso(e.known_at), "voyage_number": e.voyage, "timestamp": iso(e.ts),
            "data_source": e.data_source,
            "invalidated_at": iso(e.invalidated_at) if e.invalidated_at is not None and e.invalidated_at <= now
            else None,
            "location_locode": port.locode, "timezone": port.time_zone, "value": e.value,
        },
        "relationships": {
            "shipment": {"data": {"id": store.shipment_id(idx), "type": "shipment"}},
            "container": {"data": {"id": store.container_id(idx, slot), "type": "container"}},
            "vessel": {"data": {"id": e.vessel.id, "type": "vessel"} if e.vessel is not None else None},
            "source_event": {"data": None},
            "previous_version": {"data": {"id": prev, "type": "transport_event"} if prev else None},
            "location": {"data": {"id": port.id, "type": "port"}},
            "terminal": {"data": {"id": e.terminal, "type": "terminal"} if e.terminal else None},
        },
    }


def tracking_request_resource(store: AccountStore, tr: int, now: int, *,
                              creation_response: bool = False) -> dict:
    """A `tracking_request` resource (live shape: shipment_tags, is_retrying, retry_count); the
    response to a create echoes no ref_numbers, as the live service."""
    tid = store.tr_id(tr)
    tracked = None
    if tr < store.n:
        ident = store.identity(tr)
        status, upd = own_state(store, tr, now)
        attrs = {"request_number": ident.request_number, "request_type": ident.request_type,
                 "scac": ident.carrier.scac, "ref_numbers": list(ident.ref_numbers),
                 "shipment_tags": list(ident.tags), "created_at": iso(int(store.tr_created[tr])),
                 "updated_at": iso(upd), "status": status, "failed_reason": None,
                 "is_retrying": False, "retry_count": None}
        if status in ("created", "tracking_stopped"):
            tracked = store.shipment_id(tr)
        customer = store.party_id(ident.party) if ident.party is not None else None
    elif tr < store.seeded_tr_count:
        f = store.failing(tr - store.n)
        st = failing_state(store, tr, now)
        created = int(store.tr_created[tr])
        attrs = {"request_number": f["number"], "request_type": f["type"], "scac": f["scac"],
                 "ref_numbers": list(f["refs"]), "shipment_tags": [], "created_at": iso(created),
                 "updated_at": iso(st.updated_at), "status": st.status, "failed_reason": st.failed_reason,
                 "is_retrying": st.is_retrying, "retry_count": st.retry_count}
        customer = store.party_id(f["party"])
    else:
        req = store.api_requests[tr - store.seeded_tr_count]
        status, upd, sc = api_state(req, now)
        attrs = {"request_number": req.attrs.get("request_number"),
                 "request_type": req.attrs.get("request_type") or "bill_of_lading", "scac": sc,
                 "ref_numbers": [] if creation_response else list(req.attrs.get("ref_numbers") or []),
                 "shipment_tags": list(req.attrs.get("shipment_tags") or []),
                 "created_at": iso(req.created_at), "updated_at": iso(upd), "status": status,
                 "failed_reason": req.failed_reason if status == "failed" else None,
                 "is_retrying": False, "retry_count": None}
        if status == "created" and req.shipment_index is not None:
            tracked = store.shipment_id(req.shipment_index)
            if req.shipment_index in store.stop_overrides:
                st = request_stopped(store, store.plan(req.shipment_index), now)
                if st is not None:
                    attrs["status"], attrs["updated_at"] = "tracking_stopped", iso(st.stopped_at)
        customer = req.customer_id
    if tid in store.tr_patches and not creation_response:
        attrs.update(store.tr_patches[tid])
    return {
        "id": tid, "type": "tracking_request", "attributes": attrs,
        "relationships": {
            "tracked_object": {"data": {"id": tracked, "type": "shipment"} if tracked else None},
            "customer": {"data": {"id": customer, "type": "party"} if customer else None},
            "user": {"data": None},
        },
        "links": {"self": f"/v2/tracking_requests/{tid}"},
    }


def party_resource(store: AccountStore, p: int, name: str) -> dict:
    """A `party` resource (customer) for party index `p`."""
    pid = store.party_id(p)
    return {"id": pid, "type": "party", "attributes": {"company_name": name}}


def document_resource(did: str, name: str, blob: dict, now: int, shipment_id: str | None,
                      container_id: str | None) -> dict:
    """A `document` resource for an uploaded blob (the HTTP layer's blob summary), as created at `now`."""
    return {
        "id": did, "type": "document",
        "attributes": {
            "name": name, "document_type": None, "document_type_manual": None,
            "classification_notes": None, "source": "api", "file_name": blob.get("filename"),
            "file_content_type": blob.get("content_type"), "file_size_bytes": blob.get("byte_size"),
            "created_at": iso(now), "updated_at": iso(now),
        },
        "relationships": {
            "shipments": {"data": [{"id": shipment_id, "type": "shipment"}] if shipment_id else []},
            "containers": {"data": [{"id": container_id, "type": "container"}] if container_id else []},
        },
        "links": {"self": f"/v2/documents/{did}"},
    }
