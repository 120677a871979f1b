-- container_free_time: each container's last free day at its POD terminal and the days of free time left,
-- counted from the date it is now at the terminal.
-- Grain: one row per container (container_status's rows).
-- A view, not a table: `days_until_last_free_day` depends on today's date at the terminal, so it is
-- computed when queried; a table would go stale at the terminal's next midnight (the same afternoon, UTC,
-- for a terminal in Asia). The LFD and its local date are container_status's, built with it.
-- `days_until_last_free_day` is 0 on the last free day and negative after it; null without an LFD or a
-- time zone, and null once the free time no longer runs (`free_time_running` false: the container was
-- picked up or returned empty, by its timestamps or its status), so ordering by it lists the containers
-- whose free time runs out first, not those returned long ago. `local_today` is the terminal's date it
-- was counted from.
-- Key: container_id

{{ config(materialized='view') }}

with containers as (
    select
        *,
        picked_up_at is null
            and empty_terminated_at is null
            and coalesce(current_status, '') not in ('picked_up', 'delivered', 'dropped', 'empty_returned')
            as free_time_running
    from {{ ref('container_status') }}
)

select
    container_id,
    container_number,
    shipment_id,
    bill_of_lading_number,
    pod_terminal_id,
    pod_terminal_name,
    current_status,
    pod_full_out_at,
    picked_up_at,
    empty_terminated_at,
    ready_for_pickup,
    free_time_running,
    last_free_day,
    last_free_day_local,
    last_free_day_time_zone,
    last_free_day_time_zone_source,
    {{ local_date('current_timestamp', 'last_free_day_time_zone') }} as local_today,
    case when free_time_running then {{ days_until('last_free_day_local', 'last_free_day_time_zone') }} end
        as days_until_last_free_day
from containers
