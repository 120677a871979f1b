{#- A model's `schema` config is its schema as is (`analytics`), not dbt's `<target schema>_<schema>`. -#}
{% macro generate_schema_name(custom_schema_name, node) -%}
    {{ (custom_schema_name or target.schema) | trim }}
{%- endmacro %}
