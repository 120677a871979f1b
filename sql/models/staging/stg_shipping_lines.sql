-- stg_shipping_lines: shipping lines (carriers) the service tracks, by SCAC, with what each line provides.
-- Grain: one row per shipping line.
-- Key: shipping_line_id

with source as (
    {{ contract_source('shipping_lines', [
        ['id', 'varchar'],
        ['scac', 'varchar'],
        ['name', 'varchar'],
        ['short_name', 'varchar'],
        ['bill_of_lading_tracking_support', 'boolean'],
        ['booking_number_tracking_support', 'boolean'],
        ['container_number_tracking_support', 'boolean']
    ]) }}
)

select
    id as shipping_line_id,
    scac,
    name as shipping_line_name,
    short_name,
    bill_of_lading_tracking_support,
    booking_number_tracking_support,
    container_number_tracking_support
from source
