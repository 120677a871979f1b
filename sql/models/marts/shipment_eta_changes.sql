-- shipment_eta_changes: every change of a shipment's port-of-discharge ETA over time, as seen by the syncs.
-- Grain: one row per shipment per POD ETA version (consecutive SCD2 versions whose `pod_eta_at` did not
-- change, because another date changed, are merged into one). `valid_to` is null for the current ETA.
-- `eta_change_hours` is the delta versus the previous version (positive = later, i.e. a delay);
-- `eta_vs_original_hours` the delta versus the carrier's first ETA (`pod_original_eta_at`). Deltas are
-- hours, not INTERVALs: Parquet (the lake's files) and most warehouses cannot store a negative interval.
-- Built from the raw dlt table `shipment_eta_history` (every version of all six dates), whose name it
-- once had too.
-- Key: shipment_id, eta_version

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('shipment_id', 'shipment') }}") }}  -- rebuilt for the shipments a sync changed (macros/changed_entities.sql)

with eta_versions as (
    select shipment_id, eta_version, eta_at as pod_eta_at, valid_from, valid_to
    from {{ ref('stg_arrival_eta_versions') }}
    where arrival = 'port_of_discharge' {{ changed_entities_only('shipment_id', 'shipment', 'and') }}
),

with_previous as (
    select
        *,
        lag(pod_eta_at) over (partition by shipment_id order by eta_version nulls first) as previous_pod_eta_at,
        (count(*) over (partition by shipment_id))::integer as eta_version_count
    from eta_versions
),

shipments as (
    select * from {{ ref('stg_shipments') }} {{ changed_entities_only('shipment_id', 'shipment') }}
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
{{ changed_entities_only('with_previous.shipment_id', 'shipment') }}
