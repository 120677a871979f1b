-- stg_vessels: vessels named by transport events, with their last reported position.
-- Grain: one row per vessel.
-- Key: vessel_id

create or replace table analytics.stg_vessels as

with contract as (
    select
        null::varchar as id,
        null::varchar as name,
        null::varchar as imo,
        null::varchar as mmsi,
        null::double as latitude,
        null::double as longitude,
        null::double as nautical_speed_knots,
        null::double as navigational_heading_degrees,
        null::timestamptz as position_timestamp
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.vessels
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
