-- deep_links: a link into the service's web app for every shipment and container, for dashboards and
-- notifications: `{app_url}/shipments/find?q=<number>` (the app resolves an exact container number to
-- the shipment page with that container selected, and a bill of lading number to its shipment).
-- Grain: one row per shipment (kind `shipment`, number = bill of lading / booking number) and one row per
-- container (kind `container`, number = container number); rows without a number are left out.
-- `app_url` is configuration: the dbt var `app_url` (`--vars '{app_url: ...}'`); dbt fails without it.
-- Key: kind, id

{{ config(materialized='view') }}  -- a join of staging rows, cheap to read: no copy rewritten when a shipment changes

with settings as (
    select cast({{ app_url() }} as varchar) as app_url
),

shipment_links as (
    select
        'shipment' as kind,
        shipment_id as id,
        shipment_id,
        bill_of_lading_number as number
    from {{ ref('stg_shipments') }}
    where nullif(trim(bill_of_lading_number), '') is not null
),

container_links as (
    select
        'container' as kind,
        container_id as id,
        shipment_id,
        container_number as number
    from {{ ref('stg_containers') }}
    where nullif(trim(container_number), '') is not null
),

links as (
    select * from shipment_links
    union all
    select * from container_links
)

select
    links.kind,
    links.id,
    links.shipment_id,
    links.number,
    settings.app_url || '/shipments/find?q=' || {{ url_encode('links.number') }} as url
from links
cross join settings
