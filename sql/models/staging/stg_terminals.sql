-- stg_terminals: terminals named by shipments, containers and events, as a clean typed projection.
-- Grain: one row per terminal.
-- Key: terminal_id

with source as (
    {{ contract_source('terminals', [
        ['id', 'varchar'],
        ['name', 'varchar'],
        ['nickname', 'varchar'],
        ['firms_code', 'varchar'],
        ['smdg_code', 'varchar'],
        ['city', 'varchar'],
        ['state_abbr', 'varchar'],
        ['country', 'varchar'],
        ['port_id', 'varchar']
    ]) }}
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
