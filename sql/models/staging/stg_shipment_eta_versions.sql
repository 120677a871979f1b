-- stg_shipment_eta_versions: every version of a shipment's departure/arrival dates that a sync has seen
-- (dlt SCD2: a new version whenever any of the six dates changed between syncs).
-- Grain: one row per shipment per version; `valid_to` is null for the current version. `valid_from` is
-- when the service showed the version (its clock, from the sync's responses), not when the carrier changed
-- it: it is late by up to one sync interval (a webhook's refresh narrows that to minutes).
-- Key: shipment_id, valid_from

with source as (
    {{ contract_source('shipment_eta_history', [
        ['shipment_id', 'varchar'],
        ['pol_etd_at', 'timestamptz'],
        ['pol_atd_at', 'timestamptz'],
        ['pod_eta_at', 'timestamptz'],
        ['pod_ata_at', 'timestamptz'],
        ['destination_eta_at', 'timestamptz'],
        ['destination_ata_at', 'timestamptz'],
        ['_dlt_valid_from', 'timestamptz'],
        ['_dlt_valid_to', 'timestamptz']
    ]) }}
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
