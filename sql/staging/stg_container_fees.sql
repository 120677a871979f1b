-- stg_container_fees: fees reported by the POD terminal (`fees_at_pod_terminal`).
-- Grain: one row per fee line per container. `type` is demurrage, exam, extended_dwell_time, other or
-- total; a `total` line already sums the others (see container_status).
-- Key: container_dlt_id, fee_index

create or replace table analytics.stg_container_fees as

with contract as (
    -- the child table exists only once some container had a fee; until then this reads as empty
    select
        null::varchar as _dlt_parent_id,
        null::bigint as _dlt_list_idx,
        null::varchar as type,
        null::double as amount,
        -- dlt's variant column: `amount` was typed bigint by whole amounts, a later 12.5 lands here
        null::double as amount__v_double,
        null::varchar as currency_code
    where false
),

source as (
    select * from contract
    union all by name
    select * from ocean_tracking.containers__fees_at_pod_terminal
)

select
    _dlt_parent_id as container_dlt_id,
    _dlt_list_idx as fee_index,
    type as fee_type,
    coalesce(amount__v_double, amount)::decimal(18, 2) as amount,
    upper(currency_code) as currency_code
from source
