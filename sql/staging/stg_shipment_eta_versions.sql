-- stg_shipment_eta_versions: every version of a shipment's departure/arrival dates that a sync has seen
-- (dlt SCD2: a new version whenever any of the six dates changed between syncs).
-- Grain: one row per shipment per version; `valid_to` is null for the current version.
-- Key: shipment_id, valid_from

create or replace table analytics.stg_shipment_eta_versions as

with contract as (
    select
        null::varchar as shipment_id,
        null::timestamptz as pol_etd_at,
        null::timestamptz as pol_atd_at,
        null::timestamptz as pod_eta_at,
        null::timestamptz as pod_ata_at,
        null::timestamptz as destination_eta_at,
        null::timestamptz as destination_ata_at,
        null::timestamptz as _dlt_valid_from,
        null::timestamptz as _dlt_valid_to
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.shipment_eta_history
)

select
    shipment_id,
    _dlt_valid_from as valid_from,
    _dlt_valid_to as valid_to,
    _dlt_valid_to is null as is_current,
    pol_etd_at,
    pol_atd_at,
    pod_eta_at,
    pod_ata_at,
    destination_eta_at,
    destination_ata_at
from source
