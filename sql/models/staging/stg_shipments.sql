-- stg_shipments: shipments (bills of lading / bookings) as a clean typed projection.
-- Grain: one row per shipment (ocean_tracking.shipments is merged on id).
-- `tracking_state`: `left_account` once the service stopped listing the shipment (departed_shipments),
-- else `tracking_stopped` once the line's tracking stopped (`line_tracking_stopped_at`), else `tracking`.
-- The `contract` CTE types every column read here; a column dlt has not created yet (never non-null so
-- far) reads as null instead of failing the model.
-- Key: shipment_id

with source as (
    {{ contract_source('shipments', [
        ['id', 'varchar'],
        ['bill_of_lading_number', 'varchar'],
        ['normalized_number', 'varchar'],
        ['ref_numbers', 'json'],
        ['tags', 'json'],
        ['shipping_line_scac', 'varchar'],
        ['shipping_line_name', 'varchar'],
        ['customer_name', 'varchar'],
        ['port_of_lading_id', 'varchar'],
        ['port_of_lading_locode', 'varchar'],
        ['port_of_lading_name', 'varchar'],
        ['port_of_discharge_id', 'varchar'],
        ['port_of_discharge_locode', 'varchar'],
        ['port_of_discharge_name', 'varchar'],
        ['pod_terminal_id', 'varchar'],
        ['destination_id', 'varchar'],
        ['destination_terminal_id', 'varchar'],
        ['destination_locode', 'varchar'],
        ['destination_name', 'varchar'],
        ['pod_vessel_name', 'varchar'],
        ['pod_vessel_imo', 'varchar'],
        ['pod_voyage_number', 'varchar'],
        ['pol_etd_at', 'timestamptz'],
        ['pol_original_etd_at', 'timestamptz'],
        ['pol_atd_at', 'timestamptz'],
        ['pod_eta_at', 'timestamptz'],
        ['pod_original_eta_at', 'timestamptz'],
        ['pod_ata_at', 'timestamptz'],
        ['destination_eta_at', 'timestamptz'],
        ['destination_original_eta_at', 'timestamptz'],
        ['destination_ata_at', 'timestamptz'],
        ['pol_timezone', 'varchar'],
        ['pod_timezone', 'varchar'],
        ['destination_timezone', 'varchar'],
        ['line_tracking_stopped_at', 'timestamptz'],
        ['line_tracking_stopped_reason', 'varchar'],
        ['created_at', 'timestamptz']
    ]) }}
),

departed as (
    {{ contract_source('departed_shipments', [
        ['shipment_id', 'varchar'],
        ['left_account_at', 'timestamptz']
    ]) }}
)

select
    id as shipment_id,
    bill_of_lading_number,
    normalized_number,
    {{ json_text_array('ref_numbers') }} as ref_numbers,
    {{ json_text_array('tags') }} as tags,
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
    destination_id,
    destination_terminal_id,
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
    destination_timezone,
    line_tracking_stopped_at,
    line_tracking_stopped_reason,
    line_tracking_stopped_at is not null as is_tracking_stopped,
    departed.left_account_at,
    case
        when departed.shipment_id is not null then 'left_account'
        when line_tracking_stopped_at is not null then 'tracking_stopped'
        else 'tracking'
    end as tracking_state,
    created_at
from source
left join departed
    on source.id = departed.shipment_id
