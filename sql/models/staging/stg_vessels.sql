-- stg_vessels: vessels named by transport events, with their last reported position.
-- Grain: one row per vessel.
-- Key: vessel_id

with source as (
    {{ contract_source('vessels', [
        ['id', 'varchar'],
        ['name', 'varchar'],
        ['imo', 'varchar'],
        ['mmsi', 'varchar'],
        ['latitude', 'double'],
        ['longitude', 'double'],
        ['nautical_speed_knots', 'double'],
        ['navigational_heading_degrees', 'double'],
        ['position_timestamp', 'timestamptz']
    ]) }}
)

select
    id as vessel_id,
    name as vessel_name,
    imo as vessel_imo,
    mmsi as vessel_mmsi,
    latitude,
    longitude,
    nautical_speed_knots,
    navigational_heading_degrees,
    position_timestamp
from source
