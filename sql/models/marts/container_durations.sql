-- container_durations: how long each container took between two of its milestones (transit, dwell,
-- detention), each a complete pair of actual events, for percentiles by terminal, carrier and lane.
-- Grain: one row per container per measure (per transshipment hub for `transshipment_dwell`).
-- Read from the container's transport events that were not invalidated (stg_transport_events): they carry
-- the place, the terminal and the transshipments, which the container's own timestamps (stg_containers)
-- lack; where both exist they agree (the full-out, discharge and empty-return instants). Of a milestone
-- reported twice without an invalidation, the latest reported (`created_at`) counts.
-- Measures (`started_at` -> `ended_at`):
-- `port_to_port`: vessel departed at the POL -> vessel arrived at the POD;
-- `transshipment_dwell`: transshipment arrived -> transshipment departed at a hub (`sequence` 1, 2, ... in
-- arrival order; a hub called twice counts once);
-- `discharge_to_rail_departure`: vessel discharged -> rail departed, at the POD, for a container on rail;
-- `rail_transit`: rail departed at the POD -> rail unloaded at the inland ramp (inland_legs'
-- `rail_transit_hours`);
-- `discharge_to_available`, `available_to_full_out`, `terminal_dwell` (discharge -> full out): at the
-- terminal where the container is picked up, from its unloading there: the POD terminal (vessel
-- discharged), or for a container on rail the inland ramp (rail unloaded), where it is available and goes
-- out full; the POD part of a rail container's stay is `discharge_to_rail_departure`;
-- `detention_clock`: full out -> empty returned (`empty_in`), the time the consignee holds the box.
-- `terminal_id`, `location_locode`: where the dwell happens (the pickup terminal for `detention_clock`,
-- where its clock starts); a transit has no terminal and its location is where it ends.
-- `hours` = `ended_at` - `started_at` in hours (macro hours_between: a double rounded to 2 decimals). Only
-- pairs with both ends actual; a pair whose end precedes its start (a carrier's error) stays, negative.
-- `carrier_scac` is the shipment's line; `lane` its POL and POD (`POL -> POD` by UN/LOCODE, macro lane_label).
-- Key: container_id, measure, sequence

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

{% set transport = 'container.transport.' %}

with events as (
    select
        *,
        row_number() over (
            partition by
                container_id,
                event_name,
                case when event_name like '{{ transport }}transshipment%' then location_locode end
            order by created_at desc, event_id desc
        ) as report_rank
    from {{ ref('stg_transport_events') }}
    where not is_invalidated and event_name like '{{ transport }}%'
        {{ changed_entities_only('container_id', 'container', 'and') }}
),

latest as (
    select * from events where report_rank = 1
),

shipments as (
    select * from {{ ref('stg_shipments') }}
),

{#- one column per milestone (its instant) and one per place needed: [column, event, attribute] -#}
{% set milestone_columns = [
    ['pol_departed_at', 'vessel_departed', 'event_at'],
    ['pod_arrived_at', 'vessel_arrived', 'event_at'],
    ['pod_locode', 'vessel_arrived', 'location_locode'],
    ['pod_discharged_at', 'vessel_discharged', 'event_at'],
    ['pod_discharge_terminal_id', 'vessel_discharged', 'terminal_id'],
    ['pod_discharge_locode', 'vessel_discharged', 'location_locode'],
    ['rail_departed_at', 'rail_departed', 'event_at'],
    ['rail_unloaded_at', 'rail_unloaded', 'event_at'],
    ['rail_unloaded_locode', 'rail_unloaded', 'location_locode'],
    ['available_at', 'available', 'event_at'],
    ['available_terminal_id', 'available', 'terminal_id'],
    ['full_out_at', 'full_out', 'event_at'],
    ['full_out_terminal_id', 'full_out', 'terminal_id'],
    ['full_out_locode', 'full_out', 'location_locode'],
    ['empty_returned_at', 'empty_in', 'event_at']
] %}

milestones as (
    select
        container_id,
        {%- for column, event, attribute in milestone_columns %}
        max(case when event_name = '{{ transport }}{{ event }}' then {{ attribute }} end) as {{ column }},
        {%- endfor %}
        max(case when event_name like '{{ transport }}rail%' then 1 else 0 end) = 1 as is_on_rail
    from latest
    group by container_id
),

pickup as (
    select
        *,
        case when is_on_rail then rail_unloaded_at else pod_discharged_at end as unloaded_at,
        coalesce(
            full_out_terminal_id,
            available_terminal_id,
            case when not is_on_rail then pod_discharge_terminal_id end
        ) as pickup_terminal_id,
        coalesce(full_out_locode, case when is_on_rail then rail_unloaded_locode else pod_discharge_locode end)
            as pickup_locode
    from milestones
),

{#- [measure, started_at, ended_at, terminal_id, location_locode] over one row per container -#}
{% set container_measures = [
    ['port_to_port', 'pol_departed_at', 'pod_arrived_at', 'null', 'pod_locode'],
    ['discharge_to_rail_departure', 'pod_discharged_at', 'rail_departed_at', 'pod_discharge_terminal_id',
        'pod_discharge_locode'],
    ['rail_transit', 'rail_departed_at', 'rail_unloaded_at', 'null', 'rail_unloaded_locode'],
    ['discharge_to_available', 'unloaded_at', 'available_at', 'pickup_terminal_id', 'pickup_locode'],
    ['available_to_full_out', 'available_at', 'full_out_at', 'pickup_terminal_id', 'pickup_locode'],
    ['terminal_dwell', 'unloaded_at', 'full_out_at', 'pickup_terminal_id', 'pickup_locode'],
    ['detention_clock', 'full_out_at', 'empty_returned_at', 'pickup_terminal_id', 'pickup_locode']
] %}

transshipment_arrivals as (
    select
        container_id,
        location_locode,
        terminal_id,
        event_at as arrived_at,
        row_number() over (partition by container_id order by event_at, location_locode) as sequence
    from latest
    where event_name = '{{ transport }}transshipment_arrived'
),

pairs as (
    {%- for measure, started_at, ended_at, terminal_id, location_locode in container_measures %}
    select
        container_id,
        '{{ measure }}' as measure,
        1 as sequence,
        {{ started_at }} as started_at,
        {{ ended_at }} as ended_at,
        cast({{ terminal_id }} as varchar) as terminal_id,
        {{ location_locode }} as location_locode
    from pickup
    union all
    {%- endfor %}
    select
        arrivals.container_id,
        'transshipment_dwell' as measure,
        arrivals.sequence,
        arrivals.arrived_at as started_at,
        departures.event_at as ended_at,
        coalesce(arrivals.terminal_id, departures.terminal_id) as terminal_id,
        arrivals.location_locode
    from transshipment_arrivals as arrivals
    inner join latest as departures
        on arrivals.container_id = departures.container_id
        and arrivals.location_locode = departures.location_locode
        and departures.event_name = '{{ transport }}transshipment_departed'
)

select
    pairs.container_id,
    containers.container_number,
    containers.shipment_id,
    pairs.measure,
    pairs.sequence,
    pairs.started_at,
    pairs.ended_at,
    {{ hours_between('pairs.ended_at', 'pairs.started_at') }} as hours,
    pairs.terminal_id,
    pairs.location_locode,
    shipments.shipping_line_scac as carrier_scac,
    shipments.port_of_lading_locode as pol_locode,
    shipments.port_of_discharge_locode as pod_locode,
    {{ lane_label('shipments.port_of_lading_locode', 'shipments.port_of_discharge_locode') }} as lane
from pairs
inner join {{ ref('stg_containers') }} as containers
    on pairs.container_id = containers.container_id
left join shipments
    on containers.shipment_id = shipments.shipment_id
where pairs.started_at is not null and pairs.ended_at is not null
{{ changed_entities_only('pairs.container_id', 'container', 'and') }}
