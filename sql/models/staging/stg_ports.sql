-- stg_ports: ports named by shipments, terminals and events, with their location and time zone.
-- Grain: one row per port.
-- Key: port_id

with source as (
    {{ contract_source('ports', [
        ['id', 'varchar'],
        ['name', 'varchar'],
        ['code', 'varchar'],
        ['city', 'varchar'],
        ['state_abbr', 'varchar'],
        ['country_code', 'varchar'],
        ['time_zone', 'varchar'],
        ['latitude', 'double'],
        ['longitude', 'double']
    ]) }}
)

select
    id as port_id,
    name as port_name,
    code as port_locode,
    city,
    state_abbr,
    country_code,
    time_zone,
    latitude,
    longitude
from source
