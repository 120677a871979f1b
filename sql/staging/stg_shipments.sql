-- stg_shipments: shipments (bills of lading / bookings) as a clean typed projection.
-- Grain: one row per shipment (ocean_tracking.shipments is merged on id).
-- The `contract` CTE types every column read here; a column dlt has not created yet (never non-null so
-- far) reads as null instead of failing the model.
-- Key: shipment_id

create or replace table analytics.stg_shipments as

with contract as (
    select
        null::varchar as id,
        null::varchar as bill_of_lading_number,
        null::varchar as normalized_number,
        null::json as ref_numbers,
        null::json as tags,
        null::varchar as shipping_line_scac,
        null::varchar as shipping_line_name,
        null::varchar as customer_name,
        null::varchar as port_of_lading_id,
        null::varchar as port_of_lading_locode,
        null::varchar as port_of_lading_name,
        null::varchar as port_of_discharge_id,
        null::varchar as port_of_discharge_locode,
        null::varchar as port_of_discharge_name,
        null::varchar as pod_terminal_id,
        null::varchar as destination_locode,
        null::varchar as destination_name,
        null::varchar as pod_vessel_name,
        null::varchar as pod_vessel_imo,
        null::varchar as pod_voyage_number,
        null::timestamptz as pol_etd_at,
        null::timestamptz as pol_original_etd_at,
        null::timestamptz as pol_atd_at,
        null::timestamptz as pod_eta_at,
        null::timestamptz as pod_original_eta_at,
        null::timestamptz as pod_ata_at,
        null::timestamptz as destination_eta_at,
        null::timestamptz as destination_original_eta_at,
        null::timestamptz as destination_ata_at,
        null::varchar as pol_timezone,
        null::varchar as pod_timezone,
        null::timestamptz as line_tracking_stopped_at,
        null::varchar as line_tracking_stopped_reason,
        null::timestamptz as created_at
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.shipments
)

select
    id as shipment_id,
    bill_of_lading_number,
    normalized_number,
    coalesce(ref_numbers::varchar[], []) as ref_numbers,
    coalesce(tags::varchar[], []) as tags,
    shipping_line_scac,
    shipping_line_name,
    customer_name,
    port_of_lading_id,
    port_of_lading_locode,
    port_of_lading_name,
    port_of_discharge_id,
    port_of_discharge_locode,
    port_of_discharge_name,
    pod_terminal_id,
    destination_locode,
    destination_name,
    pod_vessel_name,
    pod_vessel_imo,
    pod_voyage_number,
    pol_etd_at,
    pol_original_etd_at,
    pol_atd_at,
    pod_eta_at,
    pod_original_eta_at,
    pod_ata_at,
    destination_eta_at,
    destination_original_eta_at,
    destination_ata_at,
    pol_timezone,
    pod_timezone,
    line_tracking_stopped_at,
    line_tracking_stopped_reason,
    line_tracking_stopped_at is not null as is_tracking_stopped,
    created_at
from source
