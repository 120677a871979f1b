-- custom_field_values: the account's custom fields (purchase order numbers, customer references, ...) next
-- to the shipment and container they describe, labelled by their definition.
-- Grain: one row per custom field value. A container's value also names its shipment (`shipment_id`), so
-- `where shipment_id = ...` gives every field of a shipment and its containers; `entity_type` says which
-- one carries it. A tracking request's value names the shipment the request became, once it succeeded.
-- Key: custom_field_id

{{ config(materialized='view') }}  -- a join of staging rows, cheap to read: no copy rewritten when a shipment changes

with fields as (
    select * from {{ ref('stg_custom_fields') }}
),

shipments as (
    select * from {{ ref('stg_shipments') }}
),

containers as (
    select * from {{ ref('stg_containers') }}
),

tracking_requests as (
    select * from {{ ref('stg_tracking_requests') }}
)

select
    fields.custom_field_id,
    fields.entity_type,
    fields.entity_id,
    coalesce(fields.shipment_id, containers.shipment_id, tracking_requests.shipment_id) as shipment_id,
    shipments.bill_of_lading_number,
    fields.container_id,
    containers.container_number,
    fields.tracking_request_id,
    fields.api_slug,
    fields.display_name,
    fields.data_type,
    fields.value,
    fields.display_value
from fields
left join containers
    on fields.container_id = containers.container_id
left join tracking_requests
    on fields.tracking_request_id = tracking_requests.tracking_request_id
left join shipments
    on shipments.shipment_id = coalesce(fields.shipment_id, containers.shipment_id, tracking_requests.shipment_id)
