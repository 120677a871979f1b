-- stg_containers: containers as a clean typed projection (holds and fees are in stg_container_holds and
-- stg_container_fees, dlt's child tables joined back through `container_dlt_id`).
-- Grain: one row per container (ocean_tracking.containers is merged on id).
-- Key: container_id

with source as (
    -- every column read here, typed; a column dlt has not created yet reads as null
    {{ contract_source('containers', [
        ['id', 'varchar'],
        ['_dlt_id', 'varchar'],
        ['number', 'varchar'],
        ['shipment_id', 'varchar'],
        ['ref_numbers', 'json'],
        ['current_status', 'varchar'],
        ['equipment_type', 'varchar'],
        ['equipment_length', 'bigint'],
        ['equipment_height', 'varchar'],
        ['weight_in_lbs', 'double'],
        ['seal_number', 'varchar'],
        ['pod_terminal_id', 'varchar'],
        ['pod_timezone', 'varchar'],
        ['availability_known', 'boolean'],
        ['available_for_pickup', 'boolean'],
        ['pickup_lfd', 'timestamptz'],
        ['import_deadlines__pickup_lfd_line', 'timestamptz'],
        ['import_deadlines__pickup_lfd_terminal', 'timestamptz'],
        ['import_deadlines__pickup_lfd_rail', 'timestamptz'],
        ['pickup_appointment_at', 'timestamptz'],
        ['location_at_pod_terminal', 'varchar'],
        ['pod_arrived_at', 'timestamptz'],
        ['pod_discharged_at', 'timestamptz'],
        ['pod_full_out_at', 'timestamptz'],
        ['empty_terminated_at', 'timestamptz'],
        ['terminal_checked_at', 'timestamptz'],
        ['created_at', 'timestamptz']
    ]) }}
)

select
    id as container_id,
    _dlt_id as container_dlt_id,
    number as container_number,
    shipment_id,
    {{ json_text_array('ref_numbers') }} as ref_numbers,
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
