{#- One row per combination of `columns`, none of them null: a model's grain (its `Key:`). -#}
{% test unique_key(model, columns) %}
select {{ columns | join(', ') }}, count(*) as rows_with_key
from {{ model }}
group by {{ columns | join(', ') }}
having count(*) > 1 or {% for column in columns %}{{ column }} is null{{ " or " if not loop.last }}{% endfor %}
{% endtest %}


{#- As many rows as `compare_to` (a model, or a raw table that may not exist yet: then 0 rows). A staging
model is a projection of its raw table; container_status has one row per container. -#}
{% test same_row_count(model, compare_to) %}
{%- set relation = adapter.get_relation(database=compare_to.database, schema=compare_to.schema, identifier=compare_to.identifier) if execute else compare_to -%}
with counts as (
    select
        (select count(*) from {{ model }}) as model_rows,
        {% if relation is none -%} 0 {%- else -%} (select count(*) from {{ compare_to }}) {%- endif %} as compared_rows
)
select * from counts where model_rows <> compared_rows
{% endtest %}


{#- Has rows whenever `driver` (the model driving its grain) has rows: a mart is not silently empty. -#}
{% test not_empty_when(model, driver) %}
with counts as (
    select (select count(*) from {{ model }}) as model_rows, (select count(*) from {{ driver }}) as driver_rows
)
select * from counts where model_rows = 0 and driver_rows > 0
{% endtest %}
