-- shipment_eta_changes: every change of a shipment's port-of-discharge ETA over time, as seen by the syncs.
-- Grain: one row per shipment per POD ETA version (consecutive SCD2 versions whose `pod_eta_at` did not
-- change, because another date changed, are merged into one). `valid_to` is null for the current ETA.
-- `eta_change_hours` is the delta versus the previous version (positive = later, i.e. a delay);
-- `eta_vs_original_hours` the delta versus the carrier's first ETA (`pod_original_eta_at`). Deltas are
-- hours, not INTERVALs: Parquet (the lake's files) and most warehouses cannot store a negative interval.
-- Built from the raw dlt table `shipment_eta_history` (every version of all six dates), whose name it
-- once had too.
-- Key: shipment_id, eta_version

with versions as (
    select * from {{ ref('stg_shipment_eta_versions') }}
),

flagged as (
    select
        *,
        case
            when lag(pod_eta_at) over by_time is not distinct from pod_eta_at
                and row_number() over by_time > 1
                then 0
            else 1
        end as is_change
    from versions
    window by_time as (partition by shipment_id order by valid_from nulls first)
),

numbered as (
    select
        *,
        (sum(is_change) over (partition by shipment_id order by valid_from nulls first rows unbounded preceding))::integer as eta_version
    from flagged
),

eta_versions as (
    select
        shipment_id,
        eta_version,
        {{ any_value('pod_eta_at') }} as pod_eta_at,
        min(valid_from) as valid_from,
        -- the current version has no valid_to; keep it open
        case when bool_or(valid_to is null) then null else max(valid_to) end as valid_to
    from numbered
    group by shipment_id, eta_version
),

with_previous as (
    select
        *,
        lag(pod_eta_at) over (partition by shipment_id order by eta_version nulls first) as previous_pod_eta_at,
        (count(*) over (partition by shipment_id))::integer as eta_version_count
    from eta_versions
),

shipments as (
    select * from {{ ref('stg_shipments') }}
)

select
    with_previous.shipment_id,
    shipments.bill_of_lading_number,
    with_previous.eta_version,
    with_previous.eta_version_count,
    with_previous.valid_from,
    with_previous.valid_to,
    with_previous.valid_to is null as is_current,
    with_previous.pod_eta_at,
    with_previous.previous_pod_eta_at,
    {{ hours_between('with_previous.pod_eta_at', 'with_previous.previous_pod_eta_at') }} as eta_change_hours,
    shipments.pod_original_eta_at,
    {{ hours_between('with_previous.pod_eta_at', 'shipments.pod_original_eta_at') }} as eta_vs_original_hours
from with_previous
left join shipments
    on with_previous.shipment_id = shipments.shipment_id
