-- container_charge_versions: the history of what decides a container's money: its last free days, holds,
-- fees and availability, each version as the syncs saw it (beside the ETA history, shipment_eta_changes).
-- Grain: one row per container per version of stg_container_charge_versions (the raw dlt SCD2 table
-- `container_charge_history`: a new version whenever one of these changed between two syncs).
-- `valid_from` is the service's clock (its Date header) at the sync that first saw the version, not when
-- the carrier or the terminal changed it: it is late by up to one sync interval. `valid_to` is the sync that
-- saw it replaced; null for the current version (`is_current`).
-- Last free days (LFD): `pickup_lfd` is the API's LFD (the one container_status calls `last_free_day`),
-- `pickup_lfd_terminal`/`pickup_lfd_line` the terminal's and the line's at the POD, `pickup_lfd_rail` and
-- `inland_lfd` those at the inland rail ramp. Each `*_local` is its date where it applies, read as
-- container_status reads `last_free_day_local`: in the zone the API sent (`pod_time_zone`, the POD's:
-- container_status's `last_free_day_time_zone`; `inland_time_zone`, the API's `final_destination_timezone`),
-- else as is (the API's timestamps without a zone are the local wall-clock time written as UTC): macro
-- charge_time_zones.
-- Holds and fees are the service's canonical text (`name:status`, `type amount currency`, `; `-separated).
-- `blocking_hold_names` are the holds with status `hold` (`pending` does not block: the service's readiness
-- rule, as container_status). `fees_total` sums the reported amounts when they are in one currency
-- (`fees_currency`), null when in several; a `total` line is the total (it includes the others), as
-- container_status. Nothing is computed from a rate.
-- `*_changed` compare a version with the container's previous one (null for its first); `changed_fields`
-- names what changed (`lfd`, `holds`, `fees`, `availability`).
-- Key: container_id, valid_from

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with versions as (
    select
        *,
        row_number() over by_time as version_number,
        count(*) over (partition by container_id) as version_count
    from {{ ref('stg_container_charge_versions') }}
    {{ changed_entities_only('container_id', 'container') }}
    window by_time as (partition by container_id order by valid_from)
),

zones as (
    select * from {{ charge_time_zones() }} as zones
),

hold_lines as (
    select
        container_id,
        valid_from,
        regexp_replace(hold, ':[^:]*$', '') as hold_name,
        lower(regexp_replace(hold, '^.*:', '')) as hold_status
    from (
        select container_id, valid_from, unnest(string_to_array(holds, '; ')) as hold
        from versions
        where holds is not null
    ) as split_holds
),

holds as (
    select
        container_id,
        valid_from,
        string_agg(hold_name, '; ' order by hold_name nulls first) filter (where hold_status = 'hold') as blocking_hold_names,
        count(*) filter (where hold_status = 'hold') as blocking_hold_count
    from hold_lines
    group by container_id, valid_from
),

fee_lines as (
    select
        container_id,
        valid_from,
        split_part(fee, ' ', 1) as fee_type,
        case
            when split_part(fee, ' ', 2) ~ '^-?[0-9]+(\.[0-9]+)?$'
                then cast(split_part(fee, ' ', 2) as decimal(18, 2))
        end as amount,
        upper(split_part(fee, ' ', 3)) as currency_code
    from (
        select container_id, valid_from, unnest(string_to_array(fees, '; ')) as fee
        from versions
        where fees is not null
    ) as split_fees
),

fees as (
    select
        container_id,
        valid_from,
        case when count(distinct currency_code) = 1 then min(currency_code) end as fees_currency,
        case
            when count(distinct currency_code) <> 1 then null
            when bool_or(fee_type = 'total') then sum(amount) filter (where fee_type = 'total')
            else sum(amount)
        end as fees_total
    from fee_lines
    group by container_id, valid_from
),

with_previous as (
    select
        versions.*,
        lag(array[pickup_lfd, pickup_lfd_terminal, pickup_lfd_line, pickup_lfd_rail, inland_lfd]) over by_time
            as previous_lfds,
        lag(holds) over by_time as previous_holds,
        lag(fees) over by_time as previous_fees,
        lag(available_for_pickup) over by_time as previous_available_for_pickup
    from versions
    window by_time as (partition by container_id order by valid_from)
),

changes as (
    select
        *,
        case when version_number > 1 then
            previous_lfds is distinct from array[pickup_lfd, pickup_lfd_terminal, pickup_lfd_line, pickup_lfd_rail, inland_lfd]
        end as lfd_changed,
        case when version_number > 1 then previous_holds is distinct from holds end as holds_changed,
        case when version_number > 1 then previous_fees is distinct from fees end as fees_changed,
        case when version_number > 1 then previous_available_for_pickup is distinct from available_for_pickup end
            as availability_changed
    from with_previous
)

select
    changes.container_id,
    containers.container_number,
    containers.shipping_line_scac,
    cast(changes.version_number as integer) as version_number,
    cast(changes.version_count as integer) as version_count,
    changes.valid_from,
    changes.valid_to,
    changes.is_current,
    changes.pickup_lfd,
    {{ local_date('changes.pickup_lfd', 'zones.pod_read_zone') }} as pickup_lfd_local,
    changes.pickup_lfd_terminal,
    {{ local_date('changes.pickup_lfd_terminal', 'zones.pod_read_zone') }} as pickup_lfd_terminal_local,
    changes.pickup_lfd_line,
    {{ local_date('changes.pickup_lfd_line', 'zones.pod_read_zone') }} as pickup_lfd_line_local,
    changes.pickup_lfd_rail,
    {{ local_date('changes.pickup_lfd_rail', 'zones.inland_read_zone') }} as pickup_lfd_rail_local,
    changes.inland_lfd,
    {{ local_date('changes.inland_lfd', 'zones.inland_read_zone') }} as inland_lfd_local,
    zones.pod_time_zone,
    zones.inland_time_zone,
    changes.available_for_pickup,
    changes.holds,
    holds.blocking_hold_names,
    cast(coalesce(holds.blocking_hold_count, 0) as integer) as blocking_hold_count,
    changes.fees,
    fees.fees_currency,
    fees.fees_total,
    changes.lfd_changed,
    changes.holds_changed,
    changes.fees_changed,
    changes.availability_changed,
    case when changes.version_number > 1 then
        concat_ws(', ',
            case when changes.lfd_changed then 'lfd' end,
            case when changes.holds_changed then 'holds' end,
            case when changes.fees_changed then 'fees' end,
            case when changes.availability_changed then 'availability' end)
    end as changed_fields
from changes
left join {{ ref('container_status') }} as containers
    on changes.container_id = containers.container_id
left join zones
    on changes.container_id = zones.container_id
left join holds
    on changes.container_id = holds.container_id
    and changes.valid_from = holds.valid_from
left join fees
    on changes.container_id = fees.container_id
    and changes.valid_from = fees.valid_from
{{ changed_entities_only('changes.container_id', 'container') }}
