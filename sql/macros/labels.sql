{#- The labels the performance models group by (a lane, a month), written once for all of them. -#}

{#- A lane: `FROM -> TO` by UN/LOCODE, `?` for a port the service did not name. -#}
{% macro lane_label(from_locode, to_locode) -%}
    coalesce({{ from_locode }}, '?') || ' -> ' || coalesce({{ to_locode }}, '?')
{%- endmacro %}

{#- The month an instant falls in, in UTC: the month's first day (a date). -#}
{% macro utc_month(timestamp) -%}
    cast(date_trunc('month', {{ local_date(timestamp, "'UTC'") }}) as date)
{%- endmacro %}
