-- stg_terminals: terminals named by shipments, containers and events, as a clean typed projection.
-- Grain: one row per terminal.
-- Key: terminal_id

create or replace table analytics.stg_terminals as

with contract as (
    select
        null::varchar as id,
        null::varchar as name,
        null::varchar as nickname,
        null::varchar as firms_code,
        null::varchar as smdg_code,
        null::varchar as city,
        null::varchar as state_abbr,
        null::varchar as country,
        null::varchar as port_id
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.terminals
)

select
    id as terminal_id,
    name as terminal_name,
    nickname as terminal_nickname,
    firms_code,
    smdg_code,
    city,
    state_abbr,
    country,
    port_id
from source
