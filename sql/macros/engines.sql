{#- Where DuckDB and PostgreSQL (+ PostGIS) spell the same thing differently: one macro per thing,
`adapter.dispatch`ed; `default__` is the PostgreSQL spelling, `duckdb__` DuckDB's. -#}

{#- A JSON array of strings as a text array; null and missing read as an empty array. -#}
{% macro json_text_array(column) -%}
    {{ return(adapter.dispatch('json_text_array', 'ocean_tracking')(column)) }}
{%- endmacro %}
{% macro duckdb__json_text_array(column) -%}
    coalesce(cast({{ column }} as varchar[]), [])
{%- endmacro %}
{% macro default__json_text_array(column) -%}
    array(select jsonb_array_elements_text({{ column }}))
{%- endmacro %}

{#- A WKB column (dlt loads geometries as WKB, x = longitude) as a WGS84 geometry. -#}
{% macro geometry_from_wkb(column) -%}
    {{ return(adapter.dispatch('geometry_from_wkb', 'ocean_tracking')(column)) }}
{%- endmacro %}
{% macro duckdb__geometry_from_wkb(column) -%}
    st_geomfromwkb({{ column }})
{%- endmacro %}
{% macro default__geometry_from_wkb(column) -%}
    st_setsrid(st_geomfromwkb({{ column }}), 4326)
{%- endmacro %}

{#- The geodesic length of a lon/lat line in km (WGS84 spheroid). DuckDB spatial's spheroid functions
read x as latitude, so the GeoJSON coordinates are flipped first (JFK-LHR = 5,555 km). -#}
{% macro geodesic_length_km(geometry) -%}
    {{ return(adapter.dispatch('geodesic_length_km', 'ocean_tracking')(geometry)) }}
{%- endmacro %}
{% macro duckdb__geodesic_length_km(geometry) -%}
    st_length_spheroid(st_flipcoordinates({{ geometry }})) / 1000
{%- endmacro %}
{% macro default__geodesic_length_km(geometry) -%}
    st_length(cast({{ geometry }} as geography)) / 1000
{%- endmacro %}

{#- `later - earlier` in hours, rounded to 2 decimals (a double; null when either is null). -#}
{% macro hours_between(later, earlier) -%}
    {{ return(adapter.dispatch('hours_between', 'ocean_tracking')(later, earlier)) }}
{%- endmacro %}
{% macro duckdb__hours_between(later, earlier) -%}
    round(epoch({{ later }} - {{ earlier }}) / 3600, 2)
{%- endmacro %}
{% macro default__hours_between(later, earlier) -%}
    cast(round(cast(extract(epoch from ({{ later }} - {{ earlier }})) / 3600 as numeric), 2) as double precision)
{%- endmacro %}

{#- `later - earlier` in seconds, rounded to 3 decimals (a double; null when either is null). -#}
{% macro seconds_between(later, earlier) -%}
    {{ return(adapter.dispatch('seconds_between', 'ocean_tracking')(later, earlier)) }}
{%- endmacro %}
{% macro duckdb__seconds_between(later, earlier) -%}
    round(epoch({{ later }} - {{ earlier }}), 3)
{%- endmacro %}
{% macro default__seconds_between(later, earlier) -%}
    cast(round(cast(extract(epoch from ({{ later }} - {{ earlier }})) as numeric), 3) as double precision)
{%- endmacro %}

{#- Any one value of the group (the groups these are used on hold one). -#}
{% macro any_value(expression) -%}
    {{ return(adapter.dispatch('any_value', 'ocean_tracking')(expression)) }}
{%- endmacro %}
{% macro duckdb__any_value(expression) -%}
    any_value({{ expression }})
{%- endmacro %}
{% macro default__any_value(expression) -%}
    (array_agg({{ expression }}))[1]
{%- endmacro %}

{#- The value of `expression` on the row with the greatest `by` (rows with a null `by` ignored). -#}
{% macro arg_max(expression, by) -%}
    {{ return(adapter.dispatch('arg_max', 'ocean_tracking')(expression, by)) }}
{%- endmacro %}
{% macro duckdb__arg_max(expression, by) -%}
    arg_max({{ expression }}, {{ by }})
{%- endmacro %}
{% macro default__arg_max(expression, by) -%}
    (array_agg({{ expression }} order by {{ by }} desc) filter (where {{ by }} is not null))[1]
{%- endmacro %}

{#- The geometries of a group collected into one, in `order_by` order. -#}
{% macro collect_geometries(geometry, order_by) -%}
    {{ return(adapter.dispatch('collect_geometries', 'ocean_tracking')(geometry, order_by)) }}
{%- endmacro %}
{% macro duckdb__collect_geometries(geometry, order_by) -%}
    st_collect(list({{ geometry }} order by {{ order_by }}))
{%- endmacro %}
{% macro default__collect_geometries(geometry, order_by) -%}
    st_collect(array_agg({{ geometry }} order by {{ order_by }}))
{%- endmacro %}

{#- Two lines merged into one where they touch. -#}
{% macro merge_lines(first, second) -%}
    {{ return(adapter.dispatch('merge_lines', 'ocean_tracking')(first, second)) }}
{%- endmacro %}
{% macro duckdb__merge_lines(first, second) -%}
    st_linemerge(st_collect([{{ first }}, {{ second }}]))
{%- endmacro %}
{% macro default__merge_lines(first, second) -%}
    st_linemerge(st_collect({{ first }}, {{ second }}))
{%- endmacro %}

{#- A record of named fields (`[['name', expression], ...]`): a STRUCT on DuckDB, a jsonb object on PostgreSQL. -#}
{% macro record(fields) -%}
    {{ return(adapter.dispatch('record', 'ocean_tracking')(fields)) }}
{%- endmacro %}
{% macro duckdb__record(fields) -%}
    { {%- for name, expression in fields %}'{{ name }}': {{ expression }}{{ ", " if not loop.last }}{% endfor -%} }
{%- endmacro %}
{% macro default__record(fields) -%}
    jsonb_build_object({%- for name, expression in fields %}'{{ name }}', {{ expression }}{{ ", " if not loop.last }}{% endfor -%})
{%- endmacro %}

{#- An empty array of `type` (`text` or `record`), for coalescing an aggregate that found no rows. -#}
{% macro empty_array(type) -%}
    {{ return(adapter.dispatch('empty_array', 'ocean_tracking')(type)) }}
{%- endmacro %}
{% macro duckdb__empty_array(type) -%}
    []
{%- endmacro %}
{% macro default__empty_array(type) -%}
    cast(array[] as {{ 'jsonb' if type == 'record' else 'text' }}[])
{%- endmacro %}

{#- A string percent-encoded for a URL's query (RFC 3986: letters, digits and `-_.~` kept). -#}
{% macro url_encode(expression) -%}
    {{ return(adapter.dispatch('url_encode', 'ocean_tracking')(expression)) }}
{%- endmacro %}
{% macro duckdb__url_encode(expression) -%}
    url_encode({{ expression }})
{%- endmacro %}
{% macro default__url_encode(expression) -%}
    (select string_agg(
        case when chars.ch ~ '^[A-Za-z0-9_.~-]$' then chars.ch
        else regexp_replace(upper(encode(convert_to(chars.ch, 'UTF8'), 'hex')), '(..)', '%\1', 'g') end,
        '' order by chars.i)
     from regexp_split_to_table({{ expression }}, '') with ordinality as chars(ch, i))
{%- endmacro %}

{#- The configured `app_url` var as a SQL string literal, without a trailing slash. -#}
{% macro app_url() -%}
    '{{ (var("app_url") | string).rstrip("/") | replace("'", "''") }}'
{%- endmacro %}

{#- Whole days from the date `earlier` to the date `later` (negative when `later` is before it). -#}
{% macro days_between(later, earlier) -%}
    {{ return(adapter.dispatch('days_between', 'ocean_tracking')(later, earlier)) }}
{%- endmacro %}
{% macro duckdb__days_between(later, earlier) -%}
    datediff('day', {{ earlier }}, {{ later }})
{%- endmacro %}
{% macro default__days_between(later, earlier) -%}
    ({{ later }} - {{ earlier }})
{%- endmacro %}
{#- The continuous percentile of `expression` over the group (`fraction` 0.5 = median): linear interpolation
between the two nearest ranks, at rank 1 + fraction * (n - 1) (numpy.percentile's default, 'linear'). -#}
{% macro percentile_cont(fraction, expression) -%}
    {{ return(adapter.dispatch('percentile_cont', 'ocean_tracking')(fraction, expression)) }}
{%- endmacro %}
{% macro duckdb__percentile_cont(fraction, expression) -%}
    quantile_cont({{ expression }}, {{ fraction }})
{%- endmacro %}
{% macro default__percentile_cont(fraction, expression) -%}
    percentile_cont({{ fraction }}) within group (order by {{ expression }})
{%- endmacro %}

{#- `expression` rounded to `digits` decimals, as a double (PostgreSQL rounds only numerics). -#}
{% macro round_double(expression, digits) -%}
    {{ return(adapter.dispatch('round_double', 'ocean_tracking')(expression, digits)) }}
{%- endmacro %}
{% macro duckdb__round_double(expression, digits) -%}
    round({{ expression }}, {{ digits }})
{%- endmacro %}
{% macro default__round_double(expression, digits) -%}
    cast(round(cast({{ expression }} as numeric), {{ digits }}) as double precision)
{%- endmacro %}
