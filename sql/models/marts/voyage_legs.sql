-- voyage_legs: the sea legs between consecutive port calls of each container's route, with the vessel
-- where the map names one, the leg's line and its length.
-- Grain: one row per leg per container (leg n runs from port call n to port call n + 1).
-- Geometry: a completed leg is the vessel's actual track (`past_vessel_locations`); the leg under way is
-- that track joined with the estimated rest (`estimated_partial_leg`); a future leg is the estimated path
-- (`estimated_full_legs`); with none of these, the straight line between the two ports.
-- Lengths are geodesic (WGS84 spheroid). DuckDB spatial's spheroid functions read x as latitude, so the
-- lon/lat GeoJSON coordinates are flipped first (checked: JFK-LHR = 5,555 km).
-- Key: container_id, leg_sequence

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with port_calls as (
    select * from {{ ref('port_calls') }} {{ changed_entities_only('container_id', 'container') }}
),

features as (
    select * from {{ ref('stg_map_features') }} {{ changed_entities_only('container_id', 'container') }}
),

vessels as (
    select * from {{ ref('stg_vessels') }}
),

legs as (
    select
        origin.container_id,
        origin.container_number,
        origin.shipment_id,
        origin.ports_sequence as leg_sequence,
        origin.port_id as from_port_id,
        origin.port_name as from_port_name,
        origin.label as from_label,
        destination.port_id as to_port_id,
        destination.port_name as to_port_name,
        destination.label as to_label,
        origin.etd_at as departure_estimated_at,
        origin.atd_at as departed_at,
        destination.eta_at as arrival_estimated_at,
        destination.ata_at as arrived_at,
        origin.geometry as from_geometry,
        destination.geometry as to_geometry
    from port_calls as origin
    inner join port_calls as destination
        on origin.container_id = destination.container_id
        and destination.ports_sequence = origin.ports_sequence + 1
),

-- a leg can have more than one actual track (e.g. a gap in positions); keep them all, in time order
tracks as (
    select
        container_id,
        ports_sequence,
        case
            when count(*) = 1 then {{ any_value('geometry') }}
            else {{ collect_geometries('geometry', 'start_time') }}
        end as geometry,
        sum({{ geodesic_length_km('geometry') }}) as length_km,
        {{ arg_max('vessel_id', 'end_time') }} as vessel_id
    from features
    where feature_type = 'past_vessel_locations' and geometry is not null
    group by container_id, ports_sequence
),

current_vessel as (
    select
        container_id,
        ports_sequence,
        vessel_id,
        vessel_name,
        vessel_imo,
        voyage_number
    from features
    where feature_type = 'current_vessel'
),

partial_legs as (
    select
        container_id,
        ports_sequence,
        geometry,
        {{ geodesic_length_km('geometry') }} as length_km
    from features
    where feature_type = 'estimated_partial_leg' and geometry is not null
),

full_legs as (
    select
        container_id,
        ports_sequence,
        {{ any_value('geometry') }} as geometry,
        {{ any_value(geodesic_length_km('geometry')) }} as length_km
    from features
    where feature_type = 'estimated_full_legs' and geometry is not null
    group by container_id, ports_sequence
),

assembled as (
    select
        legs.*,
        case
            when legs.arrived_at is not null then 'completed'
            when current_vessel.container_id is not null or legs.departed_at is not null then 'under_way'
            else 'planned'
        end as leg_status,
        coalesce(current_vessel.vessel_id, tracks.vessel_id) as vessel_id,
        current_vessel.voyage_number,
        current_vessel.vessel_name as current_vessel_name,
        current_vessel.vessel_imo as current_vessel_imo,
        case
            when partial_legs.geometry is not null and tracks.geometry is not null
                then 'actual_and_estimated'
            when partial_legs.geometry is not null then 'estimated'
            when tracks.geometry is not null then 'actual'
            when full_legs.geometry is not null then 'estimated'
            else 'straight_line'
        end as geometry_source,
        case
            when partial_legs.geometry is not null and tracks.geometry is not null
                then {{ merge_lines('tracks.geometry', 'partial_legs.geometry') }}
            else coalesce(
                partial_legs.geometry,
                tracks.geometry,
                full_legs.geometry,
                st_makeline(legs.from_geometry, legs.to_geometry)
            )
        end as geometry,
        tracks.length_km as sailed_km,
        partial_legs.length_km as remaining_km
    from legs
    left join tracks
        on legs.container_id = tracks.container_id and legs.leg_sequence = tracks.ports_sequence
    left join current_vessel
        on legs.container_id = current_vessel.container_id and legs.leg_sequence = current_vessel.ports_sequence
    left join partial_legs
        on legs.container_id = partial_legs.container_id and legs.leg_sequence = partial_legs.ports_sequence
    left join full_legs
        on legs.container_id = full_legs.container_id and legs.leg_sequence = full_legs.ports_sequence
)

select
    assembled.container_id,
    assembled.container_number,
    assembled.shipment_id,
    assembled.leg_sequence,
    assembled.from_port_id,
    assembled.from_port_name,
    assembled.from_label,
    assembled.to_port_id,
    assembled.to_port_name,
    assembled.to_label,
    assembled.leg_status,
    assembled.departure_estimated_at,
    assembled.departed_at,
    assembled.arrival_estimated_at,
    assembled.arrived_at,
    {{ hours_between(
        'coalesce(assembled.arrived_at, assembled.arrival_estimated_at)',
        'coalesce(assembled.departed_at, assembled.departure_estimated_at)'
    ) }} as transit_hours,
    assembled.vessel_id,
    coalesce(assembled.current_vessel_name, vessels.vessel_name) as vessel_name,
    coalesce(assembled.current_vessel_imo, vessels.vessel_imo) as vessel_imo,
    assembled.voyage_number,
    assembled.geometry_source,
    assembled.geometry,
    {{ geodesic_length_km('assembled.geometry') }} as length_km,
    assembled.sailed_km,
    assembled.remaining_km
from assembled
left join vessels
    on assembled.vessel_id = vessels.vessel_id
{{ changed_entities_only('assembled.container_id', 'container') }}
