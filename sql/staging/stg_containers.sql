-- stg_containers: containers as a clean typed projection (holds and fees are in stg_container_holds and
-- stg_container_fees, dlt's child tables joined back through `container_dlt_id`).
-- Grain: one row per container (ocean_tracking.containers is merged on id).
-- Key: container_id

create or replace table analytics.stg_containers as

with contract as (
    -- every column read here, typed; a column dlt has not created yet reads as null
    select
        null::varchar as id,
        null::varchar as _dlt_id,
        null::varchar as number,
        null::varchar as shipment_id,
        null::json as ref_numbers,
        null::varchar as current_status,
        null::varchar as equipment_type,
        null::bigint as equipment_length,
        null::varchar as equipment_height,
        null::double as weight_in_lbs,
        null::varchar as seal_number,
        null::varchar as pod_terminal_id,
        null::varchar as pod_timezone,
        null::boolean as availability_known,
        null::boolean as available_for_pickup,
        null::timestamptz as pickup_lfd,
        null::timestamptz as import_deadlines__pickup_lfd_line,
        null::timestamptz as import_deadlines__pickup_lfd_terminal,
        null::timestamptz as import_deadlines__pickup_lfd_rail,
        null::timestamptz as pickup_appointment_at,
        null::varchar as location_at_pod_terminal,
        null::timestamptz as pod_arrived_at,
        null::timestamptz as pod_discharged_at,
        null::timestamptz as pod_full_out_at,
        null::timestamptz as empty_terminated_at,
        null::timestamptz as terminal_checked_at,
        null::timestamptz as created_at
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.containers
)

select
    id as container_id,
    _dlt_id as container_dlt_id,
    number as container_number,
    shipment_id,
    coalesce(ref_numbers::varchar[], []) as ref_numbers,
    current_status,
    equipment_type,
    equipment_length,
    equipment_height,
    weight_in_lbs,
    seal_number,
    pod_terminal_id,
    pod_timezone,
    coalesce(availability_known, false) as availability_known,
    available_for_pickup,
    pickup_lfd,
    import_deadlines__pickup_lfd_line as pickup_lfd_line,
    import_deadlines__pickup_lfd_terminal as pickup_lfd_terminal,
    import_deadlines__pickup_lfd_rail as pickup_lfd_rail,
    pickup_appointment_at,
    location_at_pod_terminal,
    pod_arrived_at,
    pod_discharged_at,
    pod_full_out_at,
    empty_terminated_at,
    terminal_checked_at,
    created_at
from source
