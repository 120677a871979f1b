-- containers_at_sea: containers on a vessel at sea now (their route map has a `current_vessel` feature):
-- last reported position, vessel, heading and speed, next port and its ETA, and the distance still to go.
-- Grain: one row per container at sea.
-- `distance_to_next_port_km` is the estimated partial leg (current position -> next port);
-- `distance_to_go_km` adds the estimated full legs after it, up to the port of discharge.
-- Key: container_id

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with features as (
    select * from {{ ref('stg_map_features') }} {{ changed_entities_only('container_id', 'container') }}
),

current_vessel as (
    select * from features
    where feature_type = 'current_vessel'
),

partial_legs as (
    select
        container_id,
        {{ geodesic_length_km('geometry') }} as length_km
    from features
    where feature_type = 'estimated_partial_leg'
),

full_legs as (
    select
        container_id,
        ports_sequence,
        {{ geodesic_length_km('geometry') }} as length_km
    from features
    where feature_type = 'estimated_full_legs'
),

following_legs as (
    select
        current_vessel.container_id,
        sum(full_legs.length_km) as length_km,
        count(*) as leg_count
    from current_vessel
    inner join full_legs
        on current_vessel.container_id = full_legs.container_id
        and full_legs.ports_sequence > current_vessel.ports_sequence
    group by current_vessel.container_id
),

pod as (
    select
        container_id,
        port_name as pod_name,
        eta_at as pod_eta_at
    from {{ ref('port_calls') }}
    where label = 'POD' {{ changed_entities_only('container_id', 'container', 'and') }}
),

containers as (
    select * from {{ ref('stg_containers') }} {{ changed_entities_only('container_id', 'container') }}
),

shipments as (
    select * from {{ ref('stg_shipments') }}
)

select
    current_vessel.container_id,
    containers.container_number,
    containers.shipment_id,
    shipments.bill_of_lading_number,
    current_vessel.vessel_id,
    current_vessel.vessel_name,
    current_vessel.vessel_imo,
    current_vessel.voyage_number,
    current_vessel.vessel_location_timestamp as position_at,
    st_x(current_vessel.geometry) as longitude,
    st_y(current_vessel.geometry) as latitude,
    current_vessel.geometry as position,
    current_vessel.vessel_location_heading as heading_degrees,
    current_vessel.vessel_location_speed as speed_knots,
    current_vessel.ports_sequence as leg_sequence,
    current_vessel.departure_port_id,
    current_vessel.departure_port_name,
    current_vessel.departure_port_label,
    current_vessel.departure_port_atd as departed_at,
    current_vessel.arrival_port_id as next_port_id,
    current_vessel.arrival_port_name as next_port_name,
    current_vessel.arrival_port_label as next_port_label,
    current_vessel.arrival_port_eta as next_port_eta_at,
    pod.pod_name,
    pod.pod_eta_at,
    partial_legs.length_km as distance_to_next_port_km,
    coalesce(following_legs.leg_count, 0) as following_leg_count,
    partial_legs.length_km + coalesce(following_legs.length_km, 0) as distance_to_go_km
from current_vessel
left join partial_legs
    on current_vessel.container_id = partial_legs.container_id
left join following_legs
    on current_vessel.container_id = following_legs.container_id
left join pod
    on current_vessel.container_id = pod.container_id
left join containers
    on current_vessel.container_id = containers.container_id
left join shipments
    on containers.shipment_id = shipments.shipment_id
{{ changed_entities_only('current_vessel.container_id', 'container') }}
