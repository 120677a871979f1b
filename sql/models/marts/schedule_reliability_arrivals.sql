-- schedule_reliability_arrivals: each shipment's arrival at its port of discharge against a schedule, on
-- time or not by the Sea-Intelligence rule (Global Liner Performance (GLP) report, sea-intelligence.com
-- press room: a vessel arrival is on time within one calendar day either side of the scheduled arrival).
-- Grain: one row per shipment that arrived at its POD (`pod_ata_at`) per schedule basis. The unit is the
-- shipment's arrival at its POD: a vessel call carrying several of the account's shipments counts once per
-- shipment (Sea-Intelligence counts vessel calls; this weighs them by the cargo the account has on board).
-- `schedule_basis`, the schedule compared against: `original_eta`, the carrier's first published ETA the
-- service keeps (`pod_original_eta_at`): the closest it has to the published schedule Sea-Intelligence
-- measures against, and it needs no history of ours; `eta_at_departure`, the POD ETA version valid when
-- the vessel left the POL (`pol_atd_at`; stg_arrival_eta_versions): what was promised once the cargo sailed,
-- known only where the syncs saw the shipment by then, and late by up to one sync interval like every
-- version.
-- `arrival_status`: `no_schedule` (no schedule on that basis: excluded from reliability, counted), else
-- `early`, `on_time` or `late` by `days_off_schedule` = the arrival's calendar date - the scheduled one
-- (on time: -1..1), dates at the POD's time zone (`date_time_zone`: the shipment's `pod_timezone` when the
-- engine knows it, else UTC). `delay_days` = (arrived_at - scheduled_at) in days (positive: late).
-- Carrier, lane (POL -> POD) and arrival month (UTC) as in eta_accuracy.
-- Key: shipment_id, schedule_basis

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('shipment_id', 'shipment') }}") }}  -- rebuilt for the shipments a sync changed (macros/changed_entities.sql)

with shipments as (
    select * from {{ ref('stg_shipments') }}
    where pod_ata_at is not null {{ changed_entities_only('shipment_id', 'shipment', 'and') }}
),

pod_eta_versions as (
    select * from {{ ref('stg_arrival_eta_versions') }}
    where arrival = 'port_of_discharge' {{ changed_entities_only('shipment_id', 'shipment', 'and') }}
),

time_zones as (
    select time_zone from {{ known_time_zones() }} as known
),

at_departure as (
    select
        shipments.shipment_id,
        pod_eta_versions.eta_at
    from shipments
    inner join pod_eta_versions
        on shipments.shipment_id = pod_eta_versions.shipment_id
        and pod_eta_versions.valid_from <= shipments.pol_atd_at
        and (pod_eta_versions.valid_to is null or shipments.pol_atd_at < pod_eta_versions.valid_to)
),

schedules as (
    select shipment_id, 'original_eta' as schedule_basis, pod_original_eta_at as scheduled_at
    from shipments
    union all
    select shipments.shipment_id, 'eta_at_departure' as schedule_basis, at_departure.eta_at as scheduled_at
    from shipments
    left join at_departure
        on shipments.shipment_id = at_departure.shipment_id
),

dated as (
    select
        schedules.shipment_id,
        schedules.schedule_basis,
        coalesce(shipments.shipping_line_scac, 'unknown') as carrier_scac,
        {{ lane_label('shipments.port_of_lading_locode', 'shipments.port_of_discharge_locode') }} as lane,
        {{ utc_month('shipments.pod_ata_at') }} as arrival_month,
        shipments.bill_of_lading_number,
        shipments.pod_ata_at as arrived_at,
        schedules.scheduled_at,
        coalesce(pod_zone.time_zone, 'UTC') as date_time_zone
    from schedules
    inner join shipments
        on schedules.shipment_id = shipments.shipment_id
    left join time_zones as pod_zone
        on shipments.pod_timezone = pod_zone.time_zone
),

compared as (
    select
        *,
        {{ local_date('arrived_at', 'date_time_zone') }} as arrival_date_local,
        {{ local_date('scheduled_at', 'date_time_zone') }} as scheduled_date_local,
        {{ hours_between('arrived_at', 'scheduled_at') }} / 24 as delay_days
    from dated
),

off_schedule as (
    select
        *,
        {{ days_between('arrival_date_local', 'scheduled_date_local') }} as days_off_schedule
    from compared
)

select
    shipment_id,
    schedule_basis,
    bill_of_lading_number,
    carrier_scac,
    lane,
    arrival_month,
    arrived_at,
    scheduled_at,
    date_time_zone,
    arrival_date_local,
    scheduled_date_local,
    days_off_schedule,
    case
        when scheduled_at is null then 'no_schedule'
        when days_off_schedule < -1 then 'early'
        when days_off_schedule > 1 then 'late'
        else 'on_time'
    end as arrival_status,
    delay_days
from off_schedule
{{ changed_entities_only('shipment_id', 'shipment') }}
