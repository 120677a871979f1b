{#- The contract of a raw table: every column a staging model reads, typed, whatever dlt has created so far.

dlt creates a column only once it has seen a non-null value, and a child table only once some row has
one. `contract_source('containers', [['id', 'varchar'], ...])` selects each listed column from
`source('ocean_tracking', table)` cast to its type; a column the table does not have yet reads as a typed
null, and a table that does not exist yet reads as no rows (typed), so the model builds empty instead of
failing. Types are the portable names of `ot_type`. Introspection runs only at execution (`execute`). -#}
{% macro contract_source(table, columns) -%}
    {%- set src = source('ocean_tracking', table) -%}
    {%- set relation = adapter.get_relation(database=src.database, schema=src.schema, identifier=src.identifier) if execute else none -%}
    {%- if execute and relation is none -%}
        {{ log(model.name ~ ": " ~ src.schema ~ "." ~ table ~ " does not exist yet; read as empty", info=true) }}
    {%- endif -%}
    {%- set present = [] -%}
    {%- if relation is not none -%}
        {%- for column in adapter.get_columns_in_relation(relation) -%}
            {%- do present.append(column.name | lower) -%}
        {%- endfor -%}
    {%- endif %}
    select
    {%- for name, type in columns %}
        {% if name | lower in present -%}
            cast({{ adapter.quote(name) }} as {{ ot_type(type) }})
        {%- else -%}
            cast(null as {{ ot_type(type) }})
        {%- endif %} as {{ adapter.quote(name) }}{{ "," if not loop.last }}
    {%- endfor %}
    {% if relation is not none -%}
    from {{ src }}
    {%- else -%}
    where 1 = 0
    {%- endif %}
{%- endmacro %}


{#- A portable type name (varchar, bigint, integer, double, boolean, timestamptz, json, blob) in the
engine's spelling. -#}
{% macro ot_type(name) -%}
    {{ return(adapter.dispatch('ot_type', 'ocean_tracking')(name)) }}
{%- endmacro %}

{% macro default__ot_type(name) -%}
    {{ {'double': 'double precision', 'json': 'jsonb', 'blob': 'bytea'}.get(name, name) }}
{%- endmacro %}

{% macro duckdb__ot_type(name) -%}
    {{ name }}
{%- endmacro %}
