-- leg_emissions: the greenhouse gas emissions of each container on each sea leg, well to wake, in CO2e.
-- Grain: one row per leg per container (voyage_legs' rows).
-- `co2e_kg` = `distance_km` x `teu` x `g_co2e_per_teu_km` / 1000 (GLEC Framework v3 / ISO 14083: transport
-- activity in TEU-km times an emission intensity per TEU-km).
-- `distance_km`: the leg's geodesic length (voyage_legs' `length_km`, WGS84 spheroid, checked against
-- pyproj.Geod) along the best geometry there is, named in `distance_method`: `sailed_path` (the vessel's
-- actual track), `sailed_and_estimated_path` (the leg under way: the track so far and the estimated rest),
-- `estimated_path` (the carrier's estimated route), else `great_circle_x1.15`: the great circle between
-- the two ports times 1.15, the +15% distance adjustment GLEC's earlier editions tied to the Clean Cargo
-- factors (as quoted by the Climatiq database; not verified in a GLEC edition), since ships do not sail
-- great circles. The factors are per km of shortest feasible (or planned) distance, so a sailed track, longer
-- than that, gives an upper estimate.
-- `teu` = `equipment_length` / 20 ft (20 ft = 1, 40 ft = 2, 45 ft = 2.25); null when the length is
-- unknown, and so is `co2e_kg` (no size is guessed).
-- The factor: seed emission_factors, its `default` trade lane (no trade-lane rows yet) for the container's
-- `cargo_class` (`reefer` for a reefer, else `dry`), with its `factor_edition`, `factor_source` and
-- `factor_verified` (false: not copied from the cited edition).
-- `carrier_scac` and `lane` (`POL -> POD`, macro lane_label) are the shipment's, as in container_durations.
-- Key: container_id, leg_sequence

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

{% set great_circle_factor = 1.15 %}

with legs as (
    select * from {{ ref('voyage_legs') }} {{ changed_entities_only('container_id', 'container') }}
),

containers as (
    select * from {{ ref('stg_containers') }} {{ changed_entities_only('container_id', 'container') }}
),

shipments as (
    select * from {{ ref('stg_shipments') }}
),

factors as (
    select * from {{ ref('emission_factors') }}
    where trade_lane = 'default'
),

measured as (
    select
        legs.*,
        case legs.geometry_source
            when 'actual' then 'sailed_path'
            when 'actual_and_estimated' then 'sailed_and_estimated_path'
            when 'estimated' then 'estimated_path'
            when 'straight_line' then 'great_circle_x{{ great_circle_factor }}'
        end as distance_method,
        case
            when legs.geometry_source = 'straight_line' then legs.length_km * {{ great_circle_factor }}
            else legs.length_km
        end as distance_km,
        containers.equipment_type,
        containers.equipment_length,
        case
            when containers.equipment_length > 0 then cast(containers.equipment_length as double precision) / 20
        end as teu,
        case when containers.equipment_type = 'reefer' then 'reefer' else 'dry' end as cargo_class
    from legs
    left join containers
        on legs.container_id = containers.container_id
)

select
    measured.container_id,
    measured.container_number,
    measured.shipment_id,
    measured.leg_sequence,
    measured.from_port_id,
    measured.from_port_name,
    measured.to_port_id,
    measured.to_port_name,
    measured.leg_status,
    measured.departed_at,
    measured.arrived_at,
    measured.vessel_id,
    measured.vessel_name,
    measured.distance_method,
    measured.distance_km,
    measured.equipment_type,
    measured.equipment_length,
    measured.teu,
    measured.cargo_class,
    factors.trade_lane as factor_trade_lane,
    cast(factors.g_co2e_per_teu_km as double precision) as g_co2e_per_teu_km,
    factors.scope as factor_scope,
    factors.edition as factor_edition,
    factors.source as factor_source,
    factors.verified as factor_verified,
    measured.distance_km * measured.teu * cast(factors.g_co2e_per_teu_km as double precision) / 1000 as co2e_kg,
    shipments.shipping_line_scac as carrier_scac,
    shipments.port_of_lading_locode as pol_locode,
    shipments.port_of_discharge_locode as pod_locode,
    {{ lane_label('shipments.port_of_lading_locode', 'shipments.port_of_discharge_locode') }} as lane
from measured
left join factors
    on measured.cargo_class = factors.cargo_class
left join shipments
    on measured.shipment_id = shipments.shipment_id
{{ changed_entities_only('measured.container_id', 'container') }}
