-- container_status: where each container stands now, and whether it can be picked up.
-- Grain: one row per container.
-- `ready_for_pickup` follows the service's readiness rule: `available_for_pickup` is true and no hold has
-- status `hold` (a `pending` hold does not block). Fees are totalled per currency; when the terminal
-- sends a `total` line, that line is the total (it already includes the other lines).
-- `last_free_day` is the API's LFD instant (UTC); `last_free_day_local` its date at the POD terminal, in
-- `last_free_day_time_zone`: the API's POD zone (the container's `pod_timezone`, else the shipment's),
-- else the vendored reference's (macro reference_terminals: the terminal by FIRMS code, else its port's);
-- a name the engine does not know counts as missing. When the API sent no zone at all, its timestamps are
-- the local wall-clock time written as UTC (API notes, timestamps), so the LFD's date is read as is and
-- the reference zone only says when today is there (container_free_time counts the days left).
-- `tracking_state` is the shipment's: `tracking`, `tracking_stopped` (the line stopped tracking it) or
-- `left_account` (the service no longer lists it); only `tracking` rows are live. An inland destination
-- reached by rail has its ETA/ATA in `inland_eta_at`/`inland_ata_at` (the leg itself: inland_legs).
-- `picked_up_at` is when it went out full for delivery: from its inland destination when it went there by
-- rail (`final_destination_full_out_at`), else from the POD terminal (`pod_full_out_at`).
-- Key: container_id

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with containers as (
    select * from {{ ref('stg_containers') }} {{ changed_entities_only('container_id', 'container') }}
),

shipments as (
    select * from {{ ref('stg_shipments') }}
),

terminals as (
    select * from {{ ref('stg_terminals') }}
),

time_zones as (
    select time_zone from {{ known_time_zones() }} as known
),

reference_terminals as (
    select firms_code, port_locode, time_zone from {{ reference_terminals() }} as reference
),

-- a port's zone, when its reference terminals agree on one
reference_ports as (
    select port_locode, min(time_zone) as time_zone
    from reference_terminals
    group by port_locode
    having count(distinct time_zone) = 1
),

pod_time_zones as (
    select
        containers.container_id,
        coalesce(containers.pod_timezone, shipments.pod_timezone) is not null as api_sent_zone,
        coalesce(container_zone.time_zone, shipment_zone.time_zone, terminal_zone.time_zone, port_zone.time_zone)
            as time_zone,
        case
            when container_zone.time_zone is not null then 'container'
            when shipment_zone.time_zone is not null then 'shipment'
            when terminal_zone.time_zone is not null then 'reference_terminal'
            when port_zone.time_zone is not null then 'reference_port'
        end as time_zone_source
    from containers
    left join shipments
        on containers.shipment_id = shipments.shipment_id
    left join terminals
        on terminals.terminal_id = coalesce(containers.pod_terminal_id, shipments.pod_terminal_id)
    left join reference_terminals
        on terminals.firms_code = reference_terminals.firms_code
    left join reference_ports
        on shipments.port_of_discharge_locode = reference_ports.port_locode
    left join time_zones as container_zone
        on containers.pod_timezone = container_zone.time_zone
    left join time_zones as shipment_zone
        on shipments.pod_timezone = shipment_zone.time_zone
    left join time_zones as terminal_zone
        on reference_terminals.time_zone = terminal_zone.time_zone
    left join time_zones as port_zone
        on reference_ports.time_zone = port_zone.time_zone
),

holds as (
    select
        container_dlt_id,
        array_agg(hold_name order by hold_index nulls first) filter (where is_blocking) as active_holds,
        count(*) filter (where is_blocking) as active_hold_count,
        array_agg(hold_name order by hold_index nulls first) filter (where not is_blocking) as pending_holds,
        array_agg({{ record([
            ['name', 'hold_name'], ['status', 'hold_status'], ['description', 'hold_description']
        ]) }} order by hold_index nulls first) as holds
    from {{ ref('stg_container_holds') }}
    group by container_dlt_id
),

fees_per_currency as (
    select
        container_dlt_id,
        currency_code,
        case
            when bool_or(fee_type = 'total') then sum(amount) filter (where fee_type = 'total')
            else sum(amount)
        end as total_amount
    from {{ ref('stg_container_fees') }}
    group by container_dlt_id, currency_code
),

fees as (
    select
        container_dlt_id,
        array_agg({{ record([['currency_code', 'currency_code'], ['amount', 'total_amount']]) }} order by currency_code nulls first) as fees_total_by_currency,
        count(*) as fee_currency_count
    from fees_per_currency
    group by container_dlt_id
),

fee_lines as (
    select
        container_dlt_id,
        array_agg({{ record([['type', 'fee_type'], ['amount', 'amount'], ['currency_code', 'currency_code']]) }} order by fee_index nulls first) as fees
    from {{ ref('stg_container_fees') }}
    group by container_dlt_id
)

select
    containers.container_id,
    containers.container_number,
    containers.shipment_id,
    shipments.bill_of_lading_number,
    shipments.shipping_line_scac,
    containers.current_status,
    containers.equipment_type,
    containers.equipment_length,
    shipments.port_of_discharge_locode as pod_locode,
    shipments.port_of_discharge_name as pod_name,
    coalesce(containers.pod_terminal_id, shipments.pod_terminal_id) as pod_terminal_id,
    terminals.terminal_name as pod_terminal_name,
    shipments.pod_eta_at,
    shipments.pod_ata_at,
    containers.pod_arrived_at,
    containers.pod_discharged_at,
    containers.pod_full_out_at,
    containers.empty_terminated_at,
    coalesce(containers.final_destination_full_out_at, containers.pod_full_out_at) as picked_up_at,
    containers.location_at_pod_terminal,
    containers.availability_known,
    containers.available_for_pickup,
    coalesce(holds.active_holds, {{ empty_array('text') }}) as active_holds,
    coalesce(holds.active_hold_count, 0) as active_hold_count,
    coalesce(holds.pending_holds, {{ empty_array('text') }}) as pending_holds,
    coalesce(holds.holds, {{ empty_array('record') }}) as holds,
    coalesce(fee_lines.fees, {{ empty_array('record') }}) as fees,
    coalesce(fees.fees_total_by_currency, {{ empty_array('record') }}) as fees_total_by_currency,
    coalesce(fees.fee_currency_count, 0) as fee_currency_count,
    containers.pickup_lfd as last_free_day,
    {{ local_date('containers.pickup_lfd',
                  "case when pod_time_zones.api_sent_zone then pod_time_zones.time_zone else 'UTC' end") }}
        as last_free_day_local,
    pod_time_zones.time_zone as last_free_day_time_zone,
    pod_time_zones.time_zone_source as last_free_day_time_zone_source,
    containers.pickup_lfd_line as last_free_day_line,
    containers.pickup_lfd_terminal as last_free_day_terminal,
    containers.pickup_appointment_at,
    coalesce(containers.available_for_pickup, false)
        and coalesce(holds.active_hold_count, 0) = 0 as ready_for_pickup,
    containers.terminal_checked_at,
    coalesce(shipments.tracking_state, 'tracking') as tracking_state,
    shipments.line_tracking_stopped_at as tracking_stopped_at,
    shipments.line_tracking_stopped_reason as tracking_stopped_reason,
    shipments.left_account_at,
    shipments.destination_locode,
    shipments.destination_name,
    containers.ind_eta_at as inland_eta_at,
    containers.ind_ata_at as inland_ata_at
from containers
left join shipments
    on containers.shipment_id = shipments.shipment_id
left join terminals
    on terminals.terminal_id = coalesce(containers.pod_terminal_id, shipments.pod_terminal_id)
left join pod_time_zones
    on containers.container_id = pod_time_zones.container_id
left join holds
    on containers.container_dlt_id = holds.container_dlt_id
left join fees
    on containers.container_dlt_id = fees.container_dlt_id
left join fee_lines
    on containers.container_dlt_id = fee_lines.container_dlt_id
{{ changed_entities_only('containers.container_id', 'container') }}
