-- stg_map_features: route-map GeoJSON features of each container (ports, current vessel, past vessel
-- tracks, estimated legs) with typed properties and GEOMETRY columns (WGS84, x = longitude, y = latitude).
-- `geometry` keeps the coordinates as sent; `geometry_split` is cut at the antimeridian for maps.
-- Grain: one row per feature per container (the container's latest map snapshot).
-- Key: container_id, feature_index

create or replace table analytics.stg_map_features as

with contract as (
    select
        null::varchar as container_id,
        null::integer as feature_index,
        null::varchar as feature_type,
        null::bigint as ports_sequence,
        null::bigint as ports_total,
        null::bigint as point_count,
        null::varchar as location_id,
        null::varchar as name,
        null::varchar as state_abbr,
        null::varchar as country_code,
        null::varchar as country,
        null::varchar as time_zone,
        null::varchar as label,
        null::timestamptz as inbound_eta_at,
        null::timestamptz as inbound_ata_at,
        null::timestamptz as outbound_etd_at,
        null::timestamptz as outbound_atd_at,
        null::timestamptz as updated_at,
        null::varchar as vessel_id,
        null::varchar as vessel_name,
        null::varchar as vessel_imo,
        null::varchar as voyage_number,
        null::timestamptz as vessel_location_timestamp,
        null::double as vessel_location_heading,
        null::double as vessel_location_speed,
        null::varchar as departure_port_id,
        null::varchar as departure_port_name,
        null::varchar as departure_port_label,
        null::timestamptz as departure_port_atd,
        null::varchar as arrival_port_id,
        null::varchar as arrival_port_name,
        null::varchar as arrival_port_label,
        null::timestamptz as arrival_port_eta,
        null::timestamptz as start_time,
        null::timestamptz as end_time,
        null::varchar as previous_port_id,
        null::varchar as next_port_id,
        null::varchar as current_port_id,
        null::blob as geometry,
        null::blob as geometry_split,
        null::varchar as geometry_error
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.map_features
)

select
    container_id,
    feature_index,
    feature_type,
    ports_sequence,
    ports_total,
    point_count,
    -- port
    location_id,
    name as port_name,
    state_abbr,
    country_code,
    country,
    time_zone,
    label,
    inbound_eta_at,
    inbound_ata_at,
    outbound_etd_at,
    outbound_atd_at,
    updated_at,
    -- vessel (current_vessel; past_vessel_locations carries vessel_id only)
    vessel_id,
    vessel_name,
    vessel_imo,
    voyage_number,
    vessel_location_timestamp,
    vessel_location_heading,
    vessel_location_speed,
    departure_port_id,
    departure_port_name,
    departure_port_label,
    departure_port_atd,
    arrival_port_id,
    arrival_port_name,
    arrival_port_label,
    arrival_port_eta,
    -- tracks and estimated legs
    start_time,
    end_time,
    previous_port_id,
    next_port_id,
    current_port_id,
    st_geomfromwkb(geometry) as geometry,
    st_geomfromwkb(geometry_split) as geometry_split,
    geometry_error
from source
