{#- The message of the lake commit a model's build makes (DuckLake keeps it with the snapshot:
`snapshots().commit_message`), a pre-hook of every model (dbt_project.yml): the var `commit_message` the
runner passes (`pipelines.warehouse.models.build_models`: the sync it builds for), then the model. Only on the
lake (`ducklake` target) and only inside the model's transaction, where DuckLake keeps it; nothing elsewhere. -#}
{% macro lake_commit_message() -%}
    {%- if target.name == 'ducklake' and var('commit_message', '') -%}
        call {{ target.database }}.set_commit_message('ocean-tracking', '{{ (var("commit_message") ~ ": " ~ this.identifier) | replace("'", "''") }}')
    {%- endif -%}
{%- endmacro %}
