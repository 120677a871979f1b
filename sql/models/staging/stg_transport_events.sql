-- stg_transport_events: container milestones (vessel departed, discharged, full out, ...) as a clean typed
-- projection. Events the carrier later invalidated stay, flagged by `is_invalidated`.
-- Grain: one row per transport event.
-- Key: event_id

with source as (
    {{ contract_source('transport_events', [
        ['id', 'varchar'],
        ['event', 'varchar'],
        ['container_id', 'varchar'],
        ['shipment_id', 'varchar'],
        ['timestamp', 'timestamptz'],
        ['timezone', 'varchar'],
        ['location_id', 'varchar'],
        ['location_locode', 'varchar'],
        ['terminal_id', 'varchar'],
        ['vessel_id', 'varchar'],
        ['voyage_number', 'varchar'],
        ['data_source', 'varchar'],
        ['previous_version_id', 'varchar'],
        ['invalidated_at', 'timestamptz'],
        ['created_at', 'timestamptz']
    ]) }}
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
