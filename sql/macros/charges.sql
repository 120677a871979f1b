{#- The zones a container's dates are in, as a relation (container_id, pod_time_zone, pod_read_zone,
inland_time_zone, inland_read_zone), for the charge models (container_charge_versions, demurrage_exposure).
`*_time_zone` is where the place is (when today is there): the POD's is container_status's
`last_free_day_time_zone`; the inland ramp's the API's `final_destination_timezone` when the engine knows
it, else the POD's. `*_read_zone` is the zone the service's own timestamps (LFDs, discharge, pickup) are
read in, as container_status reads the LFD: the zone the API sent, else UTC (without a zone, the API's
timestamps are the local wall-clock time written as UTC). -#}
{% macro charge_time_zones() -%}
    (
        select
            status.container_id,
            status.last_free_day_time_zone as pod_time_zone,
            case
                when status.last_free_day_time_zone_source in ('container', 'shipment')
                    then status.last_free_day_time_zone
                else 'UTC'
            end as pod_read_zone,
            coalesce(inland_zone.time_zone, status.last_free_day_time_zone) as inland_time_zone,
            coalesce(inland_zone.time_zone, 'UTC') as inland_read_zone
        from {{ ref('container_status') }} as status
        left join {{ ref('stg_containers') }} as containers
            on status.container_id = containers.container_id
        left join (select time_zone from {{ known_time_zones() }} as known) as inland_zone
            on containers.final_destination_timezone = inland_zone.time_zone
    )
{%- endmacro %}

{#- The whole numbers 0 to `last` (an integer expression, maybe correlated: join it `lateral`) as rows of a
relation with the one column `day_number`; none when `last` is negative. DuckDB's generate_series in a
select list is a list (unnested here), PostgreSQL's a set of rows; a column list on the alias
(`as t(day_number)`) would read the same on both but does not transpile to BigQuery. -#}
{% macro day_numbers(last) -%}
    {{ return(adapter.dispatch('day_numbers', 'ocean_tracking')(last)) }}
{%- endmacro %}
{% macro duckdb__day_numbers(last) -%}
    (select cast(unnest(generate_series(0, {{ last }})) as integer) as day_number)
{%- endmacro %}
{% macro default__day_numbers(last) -%}
    (select cast(generate_series(0, {{ last }}) as integer) as day_number)
{%- endmacro %}
