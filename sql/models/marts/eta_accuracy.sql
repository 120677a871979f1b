-- eta_accuracy: how far the ETA known at fixed lead times before each actual arrival was from it.
-- Grain: one row per arrived leg per lead time. An arrived leg (`arrival`) is an arrival the service dates
-- that has happened: a shipment's at its port of discharge (`port_of_discharge`: `pod_ata_at`) or, going
-- inland, at its inland destination (`inland_destination`: `destination_ata_at`); a transshipment has no
-- ETA history (stg_arrival_eta_versions). Lead times (`lead_time_days`): 1, 3, 7, 14 and 21 days.
-- ETA accuracy against the actual arrival at each lead time (issue 34's definition): `eta_at` is the ETA
-- known at `known_at` = `arrived_at` - lead time, the ETA version valid then (valid_from <= known_at <
-- valid_to, open when current); `eta_error_hours` = eta_at - arrived_at in hours (positive: the ETA was
-- later than the arrival); `within_one_day` = |eta_error_hours| <= 24. With no version valid then (the syncs
-- first saw the shipment later, or its ETA was empty) `eta_known` is false: the row stays, counted, and
-- the aggregates (eta_accuracy_summary) leave it out.
-- A version's time is when a sync first saw it (the service's clock), not when the carrier changed it: no
-- table keeps an estimated event's own timestamp (a webhook's `shipment.estimated.arrival` triggers a
-- refresh, stamped the same way). So the ETA said to be known at `known_at` is the one the last sync before
-- it saw; one the carrier published since, up to one sync interval earlier (a day on the daily schedule,
-- minutes with webhooks), is not counted yet.
-- `eta_versions_before_arrival`: the ETA versions (non-empty) first seen before the arrival;
-- `eta_revisions_before_arrival` that minus one (null with none). Carrier: the SCAC (`unknown` when none);
-- `lane`: POL -> POD by UN/LOCODE (POD -> inland destination for an inland arrival); `vessel`: the POD
-- arrival's vessel, name and IMO (null inland: rail); `arrival_month`: the first day of arrived_at's UTC
-- month.
-- Key: shipment_id, arrival, lead_time_days

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('shipment_id', 'shipment') }}") }}  -- rebuilt for the shipments a sync changed (macros/changed_entities.sql)

{%- set lead_times_days = [1, 3, 7, 14, 21] %}

with shipments as (
    select * from {{ ref('stg_shipments') }} {{ changed_entities_only('shipment_id', 'shipment') }}
),

eta_versions as (
    select * from {{ ref('stg_arrival_eta_versions') }} {{ changed_entities_only('shipment_id', 'shipment') }}
),

arrivals as (
    select
        shipment_id,
        'port_of_discharge' as arrival,
        pod_ata_at as arrived_at,
        {{ lane_label('port_of_lading_locode', 'port_of_discharge_locode') }} as lane,
        coalesce(pod_vessel_name, 'unknown') || coalesce(' (IMO ' || pod_vessel_imo || ')', '') as vessel
    from shipments
    where pod_ata_at is not null
    union all
    select
        shipment_id,
        'inland_destination' as arrival,
        destination_ata_at as arrived_at,
        {{ lane_label('port_of_discharge_locode', 'destination_locode') }} as lane,
        null as vessel
    from shipments
    where destination_ata_at is not null
),

versions_before_arrival as (
    select
        arrivals.shipment_id,
        arrivals.arrival,
        count(eta_versions.eta_at) as eta_versions_before_arrival
    from arrivals
    left join eta_versions
        on arrivals.shipment_id = eta_versions.shipment_id
        and arrivals.arrival = eta_versions.arrival
        and eta_versions.valid_from < arrivals.arrived_at
    group by arrivals.shipment_id, arrivals.arrival
),

at_lead_times as (
    {%- for days in lead_times_days %}
    select
        *,
        {{ days }} as lead_time_days,
        arrived_at - interval '{{ days * 24 }} hours' as known_at
    from arrivals
    {{- "\n    union all" if not loop.last }}
    {%- endfor %}
),

known as (
    select
        at_lead_times.*,
        eta_versions.eta_at,
        eta_versions.valid_from as eta_seen_at
    from at_lead_times
    left join eta_versions
        on at_lead_times.shipment_id = eta_versions.shipment_id
        and at_lead_times.arrival = eta_versions.arrival
        and eta_versions.valid_from <= at_lead_times.known_at
        and (eta_versions.valid_to is null or at_lead_times.known_at < eta_versions.valid_to)
),

errors as (
    select
        *,
        {{ hours_between('eta_at', 'arrived_at') }} as eta_error_hours
    from known
)

select
    errors.shipment_id,
    shipments.bill_of_lading_number,
    errors.arrival,
    errors.lead_time_days,
    coalesce(shipments.shipping_line_scac, 'unknown') as carrier_scac,
    errors.lane,
    errors.vessel,
    errors.arrived_at,
    {{ utc_month('errors.arrived_at') }} as arrival_month,
    errors.known_at,
    errors.eta_at is not null as eta_known,
    errors.eta_at,
    errors.eta_seen_at,
    errors.eta_error_hours,
    abs(errors.eta_error_hours) <= 24 as within_one_day,
    versions_before_arrival.eta_versions_before_arrival,
    case
        when versions_before_arrival.eta_versions_before_arrival > 0
            then versions_before_arrival.eta_versions_before_arrival - 1
    end as eta_revisions_before_arrival
from errors
inner join versions_before_arrival
    on errors.shipment_id = versions_before_arrival.shipment_id
    and errors.arrival = versions_before_arrival.arrival
left join shipments
    on errors.shipment_id = shipments.shipment_id
{{ changed_entities_only('errors.shipment_id', 'shipment') }}
