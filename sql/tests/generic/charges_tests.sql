{#- Every non-null `column_name` lies between `min_value` and `max_value` (either may be omitted): a range. -#}
{% test between(model, column_name, min_value=none, max_value=none) %}
select {{ column_name }}
from {{ model }}
where {{ column_name }} is not null
    and ({% if min_value is not none %}{{ column_name }} < {{ min_value }}{% else %}false{% endif %}
        or {% if max_value is not none %}{{ column_name }} > {{ max_value }}{% else %}false{% endif %})
{% endtest %}


{#- Every row satisfies `condition` (a boolean SQL expression over its columns; null fails). -#}
{% test every_row(model, condition) %}
select *
from {{ model }}
where not coalesce({{ condition }}, false)
{% endtest %}
