-- port_calls: the ports on each container's route (port of lading, transshipments, port of discharge)
-- with the carrier's estimated and actual times, from the route map's `port` features.
-- Grain: one row per port call per container (`ports_sequence` 1 = POL ... `ports_total` = POD).
-- Key: container_id, ports_sequence

{{ config(materialized='incremental', incremental_strategy='append',
          pre_hook="{{ replace_changed_entities('container_id', 'container') }}") }}  -- rebuilt for the containers a sync changed (macros/changed_entities.sql)

with ports as (
    select * from {{ ref('stg_map_features') }}
    where feature_type = 'port' {{ changed_entities_only('container_id', 'container', 'and') }}
),

containers as (
    select * from {{ ref('stg_containers') }} {{ changed_entities_only('container_id', 'container') }}
)

select
    ports.container_id,
    containers.container_number,
    containers.shipment_id,
    ports.ports_sequence,
    ports.ports_total,
    ports.label,
    case
        when ports.label = 'POL' then 'port_of_lading'
        when ports.label = 'POD' then 'port_of_discharge'
        when ports.label like 'TS%' then 'transshipment'
    end as port_role,
    ports.location_id as port_id,
    ports.port_name,
    ports.state_abbr,
    ports.country_code,
    ports.time_zone,
    ports.inbound_eta_at as eta_at,
    ports.inbound_ata_at as ata_at,
    ports.outbound_etd_at as etd_at,
    ports.outbound_atd_at as atd_at,
    case
        when ports.outbound_atd_at is not null then 'departed'
        when ports.inbound_ata_at is not null then 'arrived'
        else 'expected'
    end as call_status,
    {{ hours_between('ports.outbound_atd_at', 'ports.inbound_ata_at') }} as dwell_hours,
    st_x(ports.geometry) as longitude,
    st_y(ports.geometry) as latitude,
    ports.geometry,
    ports.updated_at
from ports
left join containers
    on ports.container_id = containers.container_id
{{ changed_entities_only('ports.container_id', 'container') }}
