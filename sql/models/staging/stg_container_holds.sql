-- stg_container_holds: holds reported by the POD terminal (`holds_at_pod_terminal`), one per name.
-- Grain: one row per hold per container. A cleared hold leaves the array, so every row is a hold the
-- terminal reports now: status `hold` (blocks pickup) or `pending`.
-- Key: container_dlt_id, hold_index

with source as (
    -- the child table exists only once some container had a hold; until then this reads as empty
    {{ contract_source('containers__holds_at_pod_terminal', [
        ['_dlt_parent_id', 'varchar'],
        ['_dlt_list_idx', 'bigint'],
        ['name', 'varchar'],
        ['status', 'varchar'],
        ['description', 'varchar']
    ]) }}
)

select
    _dlt_parent_id as container_dlt_id,
    _dlt_list_idx as hold_index,
    name as hold_name,
    lower(status) as hold_status,
    description as hold_description,
    lower(status) = 'hold' as is_blocking
from source
