-- demurrage_exposure: each day a container sits where its free time runs, with the free time left or the
-- days past its last free day, the holds that block pickup and the fees the service reports that day.
-- Grain: one row per container per local date at the place its free time runs: the POD terminal
-- (`exposure_place` `pod_terminal`, LFD `pickup_lfd`, the API's) or, for a container that went inland by
-- rail, the rail ramp (`inland_rail`, LFD `pickup_lfd_rail`, else `inland_lfd`); dates and today in that
-- place's zone (macro charge_time_zones). Rows run from the local date it arrived (discharged at the POD,
-- unloaded at the ramp: the day it starts to sit there, so one picked up the same day still has its row) to
-- the date it left (out full, else returned empty) or, while it is still there, today there.
-- A view, like container_free_time: today's row depends on today's date at the place.
-- The LFD, holds, availability and fees of a day are those of the version (container_charge_versions) in
-- force at the end of that local day (`charges_seen_at`: the sync that saw it; they may have changed since
-- without a sync seeing it). On a day before the first version a sync saw (`charges_seen_after_day`), the
-- LFD is that first version's (a later sync's word for a fixed date) and holds, availability and fees are
-- null: no sync saw them that day. `free_days_left` counts the free days from this day to the LFD, both
-- included (positive through the LFD, 0 after); `days_past_last_free_day` the days after it (positive after
-- the LFD, 0 through it); both null without an LFD. Fees are the service's text and total (`fees_total`,
-- container_charge_versions), never computed from a rate.
-- `estimated_accrued_amount` is an estimate, only where the team's tariff (seed demurrage_tariffs) applies:
-- the POD terminal's (by FIRMS code) wins over the carrier's (by SCAC); the ramp has carrier tariffs only.
-- Its chargeable days are the days past the LFD as known that day (without one: past the arrival date plus
-- the tariff's free calendar days); the amount sums, over the tariff's day bands, `rate_per_day` times the
-- chargeable days in the band, in `estimated_currency`. `estimate_basis` names the tariff and its source.
-- `trusted` is false on a day when the shipment's tracking had stopped or it had left the account by that
-- day (`tracking_state`, container_status), or when the container is still there and the terminal's last
-- check (`terminal_checked_at`) is more than 48 hours (var terminal_data_max_age_hours) before the end of
-- that day, or before now for today, or it never came (only the latest check is kept, so a past day of
-- a container that left is not judged by it); `untrusted_reason` says which.
-- Key: container_id, local_date

{{ config(materialized='view') }}

with containers as (
    select
        status.container_id,
        status.container_number,
        status.shipment_id,
        status.shipping_line_scac,
        status.pod_terminal_id,
        terminals.firms_code as pod_terminal_firms_code,
        status.terminal_checked_at,
        status.tracking_state,
        coalesce(status.left_account_at, status.tracking_stopped_at) as tracking_ended_at,
        case
            when raw.pod_rail_loaded_at is not null or raw.ind_rail_unloaded_at is not null then 'inland_rail'
            else 'pod_terminal'
        end as exposure_place,
        raw.ind_rail_unloaded_at,
        raw.final_destination_full_out_at,
        raw.pod_discharged_at,
        raw.pod_full_out_at,
        raw.empty_terminated_at,
        zones.pod_time_zone,
        zones.pod_read_zone,
        zones.inland_time_zone,
        zones.inland_read_zone
    from {{ ref('container_status') }} as status
    inner join {{ ref('stg_containers') }} as raw
        on status.container_id = raw.container_id
    left join {{ ref('stg_terminals') }} as terminals
        on status.pod_terminal_id = terminals.terminal_id
    left join {{ charge_time_zones() }} as zones
        on status.container_id = zones.container_id
),

places as (
    select
        *,
        case when exposure_place = 'inland_rail' then ind_rail_unloaded_at else pod_discharged_at end as arrived_at,
        case
            when exposure_place = 'inland_rail' then coalesce(final_destination_full_out_at, empty_terminated_at)
            else coalesce(pod_full_out_at, empty_terminated_at)
        end as left_at,
        case when exposure_place = 'inland_rail' then inland_time_zone else pod_time_zone end as time_zone,
        case when exposure_place = 'inland_rail' then inland_read_zone else pod_read_zone end as read_zone
    from containers
),

spans as (
    select
        *,
        {{ local_date('arrived_at', 'read_zone') }} as arrival_date,
        {{ local_date('left_at', 'read_zone') }} as left_date,
        {{ local_date('current_timestamp', 'time_zone') }} as local_today
    from places
    where arrived_at is not null
        and time_zone is not null
),

days as (
    select
        spans.*,
        arrival_date + offsets.day_number as local_date,
        offsets.day_number
    from spans
    cross join lateral {{ day_numbers(days_between(
        'least(coalesce(spans.left_date, spans.local_today), spans.local_today)', 'spans.arrival_date')) }} as offsets
),

-- each version's span in local dates at its container's place, computed once a version (not once a day), as
-- plain comparisons: a join on them is a hash join (an `or` in a left join's condition is a nested loop)
versions as (
    select
        versions.*,
        {{ local_date('versions.valid_from', 'spans.time_zone') }} as valid_from_local_date,
        case
            when versions.version_number = 1 then cast('0001-01-01' as date)
            else {{ local_date('versions.valid_from', 'spans.time_zone') }}
        end as in_force_from_local_date,
        coalesce({{ local_date('versions.valid_to', 'spans.time_zone') }}, cast('9999-12-31' as date))
            as in_force_until_local_date
    from {{ ref('container_charge_versions') }} as versions
    inner join spans
        on versions.container_id = spans.container_id
),

day_versions as (
    select
        days.*,
        versions.valid_from as charges_seen_at,
        versions.valid_from_local_date > days.local_date as charges_seen_after_day,
        case
            when days.exposure_place = 'inland_rail'
                then coalesce(versions.pickup_lfd_rail_local, versions.inland_lfd_local)
            else versions.pickup_lfd_local
        end as last_free_day_local,
        versions.available_for_pickup as version_available_for_pickup,
        versions.holds as version_holds,
        versions.blocking_hold_names as version_blocking_hold_names,
        versions.blocking_hold_count as version_blocking_hold_count,
        versions.fees as version_fees,
        versions.fees_currency as version_fees_currency,
        versions.fees_total as version_fees_total
    from days
    left join versions
        on days.container_id = versions.container_id
        and versions.in_force_from_local_date <= days.local_date
        and versions.in_force_until_local_date > days.local_date
),

tariff_bands as (
    select * from {{ ref('demurrage_tariffs') }}
),

tariffs as (
    select
        applies_to,
        scac_or_terminal,
        min(free_calendar_days) as free_calendar_days,
        min(currency) as currency,
        min(source) as source
    from tariff_bands
    group by applies_to, scac_or_terminal
),

with_tariffs as (
    select
        day_versions.*,
        coalesce(terminal_tariff.applies_to, carrier_tariff.applies_to) as tariff_applies_to,
        coalesce(terminal_tariff.scac_or_terminal, carrier_tariff.scac_or_terminal) as tariff_scac_or_terminal,
        coalesce(terminal_tariff.free_calendar_days, carrier_tariff.free_calendar_days) as tariff_free_calendar_days,
        coalesce(terminal_tariff.currency, carrier_tariff.currency) as estimated_currency,
        coalesce(terminal_tariff.source, carrier_tariff.source) as tariff_source
    from day_versions
    left join tariffs as terminal_tariff
        on terminal_tariff.applies_to = 'terminal'
        and terminal_tariff.scac_or_terminal = day_versions.pod_terminal_firms_code
        and day_versions.exposure_place = 'pod_terminal'
    left join tariffs as carrier_tariff
        on carrier_tariff.applies_to = 'carrier'
        and carrier_tariff.scac_or_terminal = day_versions.shipping_line_scac
),

counted as (
    select
        *,
        case when last_free_day_local is not null then
            greatest({{ days_between('last_free_day_local', 'local_date') }} + 1, 0)
        end as free_days_left,
        case when last_free_day_local is not null then
            greatest({{ days_between('local_date', 'last_free_day_local') }}, 0)
        end as days_past_last_free_day,
        case when tariff_applies_to is not null then
            greatest({{ days_between('local_date',
                'coalesce(last_free_day_local, arrival_date + tariff_free_calendar_days)') }}, 0)
        end as estimated_chargeable_days,
        tracking_state <> 'tracking'
            and (tracking_ended_at is null or {{ local_date('tracking_ended_at', 'time_zone') }} <= local_date)
            as tracking_ended,
        left_at is null
            and (terminal_checked_at is null
                or {{ hours_between(
                    'least(current_timestamp, cast(local_date + 1 as timestamp) at time zone time_zone)',
                    'terminal_checked_at') }} > {{ var('terminal_data_max_age_hours', 48) }})
            as terminal_data_stale
    from with_tariffs
)

select
    container_id,
    local_date,
    container_number,
    shipment_id,
    shipping_line_scac,
    exposure_place,
    pod_terminal_id,
    pod_terminal_firms_code,
    time_zone,
    local_today,
    day_number,
    arrived_at,
    left_at,
    last_free_day_local,
    free_days_left,
    days_past_last_free_day,
    case when not charges_seen_after_day then version_available_for_pickup end as available_for_pickup,
    case when not charges_seen_after_day then version_holds end as holds,
    case when not charges_seen_after_day then version_blocking_hold_names end as blocking_hold_names,
    case when not charges_seen_after_day then version_blocking_hold_count end as blocking_hold_count,
    case when not charges_seen_after_day then version_fees end as fees,
    case when not charges_seen_after_day then version_fees_currency end as fees_currency,
    case when not charges_seen_after_day then version_fees_total end as fees_total,
    charges_seen_at,
    charges_seen_after_day,
    estimated_chargeable_days,
    (
        select sum(bands.rate_per_day * greatest(
            least(counted.estimated_chargeable_days,
                coalesce(bands.to_chargeable_day, counted.estimated_chargeable_days))
            - bands.from_chargeable_day + 1, 0))
        from tariff_bands as bands
        where bands.applies_to = counted.tariff_applies_to
            and bands.scac_or_terminal = counted.tariff_scac_or_terminal
    ) as estimated_accrued_amount,
    estimated_currency,
    case when tariff_applies_to is not null then
        'estimate: demurrage_tariffs ' || tariff_applies_to || ' ' || tariff_scac_or_terminal || ' ('
        || tariff_source || ')'
    end as estimate_basis,
    not (tracking_ended or terminal_data_stale) as trusted,
    nullif(concat_ws(', ',
        case when tracking_ended then tracking_state end,
        case when terminal_data_stale then 'terminal_data_stale' end), '') as untrusted_reason
from counted
