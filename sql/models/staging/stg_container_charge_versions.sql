-- stg_container_charge_versions: every version of a container's last free days, availability, holds and
-- fees that a sync has seen (dlt SCD2: a new version whenever one of them changed between syncs).
-- Grain: one row per container per version; `valid_to` is null for the current version. `valid_from` is
-- when the service showed the version (its clock, from the sync's responses), not when the carrier or the
-- terminal changed it: it is late by up to one sync interval (a webhook's refresh narrows that to minutes).
-- `holds` and `fees` are canonical text (`name:status`, `type amount currency`, sorted, `; `-separated).
-- Key: container_id, valid_from

with source as (
    {{ contract_source('container_charge_history', [
        ['container_id', 'varchar'],
        ['pickup_lfd', 'timestamptz'],
        ['pickup_lfd_terminal', 'timestamptz'],
        ['pickup_lfd_line', 'timestamptz'],
        ['pickup_lfd_rail', 'timestamptz'],
        ['inland_lfd', 'timestamptz'],
        ['available_for_pickup', 'boolean'],
        ['holds', 'varchar'],
        ['fees', 'varchar'],
        ['_dlt_valid_from', 'timestamptz'],
        ['_dlt_valid_to', 'timestamptz']
    ]) }}
)

select
    container_id,
    _dlt_valid_from as valid_from,
    _dlt_valid_to as valid_to,
    _dlt_valid_to is null as is_current,
    pickup_lfd,
    pickup_lfd_terminal,
    pickup_lfd_line,
    pickup_lfd_rail,
    inland_lfd,
    available_for_pickup,
    holds,
    fees
from source
