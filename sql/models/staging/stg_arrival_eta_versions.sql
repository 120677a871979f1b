-- stg_arrival_eta_versions: every ETA the syncs have seen for each arrival the service dates: a shipment's
-- arrival at its port of discharge (`arrival` = `port_of_discharge`, `pod_eta_at`) and, for a shipment going
-- inland, at its inland destination (`inland_destination`, `destination_eta_at`).
-- Grain: one row per shipment per arrival per ETA version: consecutive SCD2 versions
-- (stg_shipment_eta_versions) whose ETA for that arrival did not change, because another date changed, are
-- one version. `valid_from` is when a sync first saw the ETA (the service's clock), `valid_to` when a sync
-- first saw the next one (null for the current ETA). An inland destination has rows only for shipments
-- with an inland date in some version. A transshipment's ETA has no history here: the route map's port
-- ETAs are merged, not versioned.
-- Key: shipment_id, arrival, eta_version

with versions as (
    select * from {{ ref('stg_shipment_eta_versions') }}
),

inland_shipments as (
    select shipment_id
    from versions
    group by shipment_id
    having bool_or(destination_eta_at is not null or destination_ata_at is not null)
),

arrival_versions as (
    select shipment_id, 'port_of_discharge' as arrival, valid_from, valid_to, pod_eta_at as eta_at
    from versions
    union all
    select
        versions.shipment_id, 'inland_destination' as arrival, valid_from, valid_to, destination_eta_at as eta_at
    from versions
    inner join inland_shipments
        on versions.shipment_id = inland_shipments.shipment_id
),

flagged as (
    select
        *,
        case
            when lag(eta_at) over by_time is not distinct from eta_at
                and row_number() over by_time > 1
                then 0
            else 1
        end as is_change
    from arrival_versions
    window by_time as (partition by shipment_id, arrival order by valid_from nulls first)
),

numbered as (
    select
        *,
        (sum(is_change) over (
            partition by shipment_id, arrival order by valid_from nulls first rows unbounded preceding
        ))::integer as eta_version
    from flagged
)

select
    shipment_id,
    arrival,
    eta_version,
    {{ any_value('eta_at') }} as eta_at,
    min(valid_from) as valid_from,
    -- the current version has no valid_to; keep it open
    case when bool_or(valid_to is null) then null else max(valid_to) end as valid_to
from numbered
group by shipment_id, arrival, eta_version
