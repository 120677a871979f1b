-- inland_legs: the rail leg from the port of discharge to an inland destination, for each container that
-- has one (a rail carrier, a rail milestone or an inland ETA/ATA).
-- Grain: one row per container with an inland leg.
-- `leg_status`: `awaiting_rail` (discharged or not yet at the POD), `on_rail` (departed the POD by rail),
-- `at_inland_destination` (unloaded or arrived inland), `picked_up` (out of the inland facility).
-- `rail_transit_hours` runs from the departure at the POD to the unloading inland (null until both).
-- `inland_delay_hours`: the arrival (or, until then, the latest estimate) against the shipment's original
-- destination ETA; positive when late.
-- Key: container_id

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with containers as (
    select * from {{ ref('stg_containers') }} {{ changed_entities_only('container_id', 'container') }}
),

shipments as (
    select * from {{ ref('stg_shipments') }}
),

with_leg as (
    select *
    from containers
    where pod_rail_carrier_scac is not null
        or ind_rail_carrier_scac is not null
        or pod_rail_loaded_at is not null
        or pod_rail_departed_at is not null
        or ind_rail_unloaded_at is not null
        or ind_eta_at is not null
        or ind_ata_at is not null
)

select
    with_leg.container_id,
    with_leg.container_number,
    with_leg.shipment_id,
    shipments.bill_of_lading_number,
    shipments.port_of_discharge_locode as pod_locode,
    shipments.destination_id,
    shipments.destination_locode,
    shipments.destination_name,
    shipments.destination_terminal_id,
    coalesce(with_leg.final_destination_timezone, shipments.destination_timezone) as destination_timezone,
    with_leg.pod_rail_carrier_scac,
    with_leg.ind_rail_carrier_scac,
    with_leg.pod_discharged_at,
    with_leg.pod_rail_loaded_at,
    with_leg.pod_rail_departed_at,
    with_leg.ind_rail_unloaded_at,
    with_leg.ind_eta_at,
    with_leg.ind_ata_at,
    with_leg.pickup_lfd_rail as last_free_day_rail,
    with_leg.final_destination_full_out_at,
    case
        when with_leg.final_destination_full_out_at is not null then 'picked_up'
        when with_leg.ind_ata_at is not null or with_leg.ind_rail_unloaded_at is not null
            then 'at_inland_destination'
        when with_leg.pod_rail_departed_at is not null then 'on_rail'
        else 'awaiting_rail'
    end as leg_status,
    {{ hours_between('with_leg.ind_rail_unloaded_at', 'with_leg.pod_rail_departed_at') }} as rail_transit_hours,
    {{ hours_between('coalesce(with_leg.ind_ata_at, with_leg.ind_eta_at)', 'shipments.destination_original_eta_at') }}
        as inland_delay_hours,
    shipments.tracking_state
from with_leg
left join shipments
    on with_leg.shipment_id = shipments.shipment_id
{{ changed_entities_only('with_leg.container_id', 'container') }}
