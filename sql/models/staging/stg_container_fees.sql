-- stg_container_fees: fees reported by the POD terminal (`fees_at_pod_terminal`).
-- Grain: one row per fee line per container. `type` is demurrage, exam, extended_dwell_time, other or
-- total; a `total` line already sums the others (see container_status).
-- Key: container_dlt_id, fee_index

with source as (
    -- the child table exists only once some container had a fee; until then this reads as empty
    -- dlt's variant column: `amount` was typed bigint by whole amounts, a later 12.5 lands here
    {{ contract_source('containers__fees_at_pod_terminal', [
        ['_dlt_parent_id', 'varchar'],
        ['_dlt_list_idx', 'bigint'],
        ['type', 'varchar'],
        ['amount', 'double'],
        ['amount__v_double', 'double'],
        ['currency_code', 'varchar']
    ]) }}
)

select
    _dlt_parent_id as container_dlt_id,
    _dlt_list_idx as fee_index,
    type as fee_type,
    coalesce(amount__v_double, amount)::decimal(18, 2) as amount,
    upper(currency_code) as currency_code
from source
