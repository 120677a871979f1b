-- stg_transport_events: container milestones (vessel departed, discharged, full out, ...) as a clean typed
-- projection. Events the carrier later invalidated stay, flagged by `is_invalidated`.
-- Grain: one row per transport event.
-- Key: event_id

create or replace table analytics.stg_transport_events as

with contract as (
    select
        null::varchar as id,
        null::varchar as event,
        null::varchar as container_id,
        null::varchar as shipment_id,
        null::timestamptz as timestamp,
        null::varchar as timezone,
        null::varchar as location_id,
        null::varchar as location_locode,
        null::varchar as terminal_id,
        null::varchar as vessel_id,
        null::varchar as voyage_number,
        null::varchar as data_source,
        null::varchar as previous_version_id,
        null::timestamptz as invalidated_at,
        null::timestamptz as created_at
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.transport_events
)

select
    id as event_id,
    event as event_name,
    container_id,
    shipment_id,
    "timestamp" as event_at,
    timezone as event_timezone,
    location_id,
    location_locode,
    terminal_id,
    vessel_id,
    voyage_number,
    data_source,
    previous_version_id,
    invalidated_at,
    invalidated_at is not null as is_invalidated,
    created_at
from source
