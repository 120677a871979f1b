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


{#- A raw table's primary key: never null, and unique over the rows matching `where` (SCD2: the current
versions). A table dlt has not created yet passes (on PostgreSQL a table appears with its first row). -#}
{% test raw_primary_key(model, columns, only_where='true') %}
{%- set relation = adapter.get_relation(database=model.database, schema=model.schema, identifier=model.identifier) if execute else model -%}
{%- if relation is none %}
select null as missing_table where 1 = 0
{%- else %}
select {{ columns | join(', ') }}, count(*) as rows_with_key
from {{ model }}
where {{ only_where }}
group by {{ columns | join(', ') }}
having count(*) > 1 or {% for column in columns %}{{ column }} is null{{ " or " if not loop.last }}{% endfor %}
{%- endif %}
{% endtest %}


{#- Every non-null `column_name` of the raw table (on the rows matching `where`, for a polymorphic column)
names a row of `field` in the raw table `to_table` (same schema). The parent is named, not `source()`d, so the
test depends on its own table only and dagster-dbt attaches it to that table's asset as a check. Passes while
either table does not exist yet. -#}
{% test raw_reference(model, column_name, to_table, field='id', only_where='true') %}
{%- set child = adapter.get_relation(database=model.database, schema=model.schema, identifier=model.identifier) if execute else none -%}
{%- set parent = adapter.get_relation(database=model.database, schema=model.schema, identifier=to_table) if execute else none -%}
{%- if child is none or parent is none %}
select null as orphan_id where 1 = 0
{%- else %}
select c.{{ column_name }} as orphan_id
from {{ model }} as c
where c.{{ column_name }} is not null and ({{ only_where }})
  and not exists (select 1 from {{ parent }} as p where p.{{ field }} = c.{{ column_name }})
{%- endif %}
{% endtest %}

{#- Every non-null `column_name` lies in [min_value, max_value] (either bound may be omitted). -#}
{% test between(model, column_name, min_value=none, max_value=none) %}
select {{ column_name }}
from {{ model }}
where {{ column_name }} is not null
    and (
        {%- if min_value is not none %} {{ column_name }} < {{ min_value }}{% else %} false{% endif %}
        or {%- if max_value is not none %} {{ column_name }} > {{ max_value }}{% else %} false{% endif %}
    )
{% endtest %}
