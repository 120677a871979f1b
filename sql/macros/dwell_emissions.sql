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
