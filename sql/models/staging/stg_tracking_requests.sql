-- stg_tracking_requests: tracking requests (what the account asked the service to track) as a clean typed
-- projection. `status` is pending, awaiting_manifest (a BL or booking the line has not published yet,
-- re-checked daily), created (succeeded: `shipment_id` names the shipment), failed (`failed_reason`) or
-- tracking_stopped.
-- Grain: one row per tracking request (ocean_tracking.tracking_requests is merged on id).
-- Key: tracking_request_id

with source as (
    {{ contract_source('tracking_requests', [
        ['id', 'varchar'],
        ['request_number', 'varchar'],
        ['request_type', 'varchar'],
        ['scac', 'varchar'],
        ['status', 'varchar'],
        ['failed_reason', 'varchar'],
        ['is_retrying', 'boolean'],
        ['retry_count', 'bigint'],
        ['tracked_object_id', 'varchar'],
        ['tracked_object_type', 'varchar'],
        ['customer_id', 'varchar'],
        ['created_at', 'timestamptz'],
        ['updated_at', 'timestamptz']
    ]) }}
)

select
    id as tracking_request_id,
    request_number,
    request_type,
    scac,
    status,
    failed_reason,
    is_retrying,
    retry_count,
    case when tracked_object_type = 'shipment' then tracked_object_id end as shipment_id,
    customer_id,
    created_at,
    updated_at
from source
