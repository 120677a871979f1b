-- container_free_time: each container's last free day at its POD terminal and the days of free time left,
-- counted from the date it is now at the terminal.
-- Grain: one row per container (container_status's rows).
-- A view, not a table: `days_until_last_free_day` depends on today's date at the terminal, so it is
-- computed when queried; a table would go stale at the terminal's next midnight (the same afternoon, UTC,
-- for a terminal in Asia). The LFD and its local date are container_status's, built with it.
-- `days_until_last_free_day` is 0 on the last free day and negative after it; null without an LFD or a
-- time zone. `local_today` is the terminal's date it was counted from.
-- Key: container_id

{{ config(materialized='view') }}

select
    container_id,
    container_number,
    shipment_id,
    bill_of_lading_number,
    pod_terminal_id,
    pod_terminal_name,
    current_status,
    pod_full_out_at,
    ready_for_pickup,
    last_free_day,
    last_free_day_local,
    last_free_day_time_zone,
    last_free_day_time_zone_source,
    {{ local_date('current_timestamp', 'last_free_day_time_zone') }} as local_today,
    {{ days_until('last_free_day_local', 'last_free_day_time_zone') }} as days_until_last_free_day
from {{ ref('container_status') }}
