{#- The message of the lake commit a model's build makes (DuckLake keeps it with the snapshot:
`snapshots().commit_message`), a pre-hook of every model (dbt_project.yml): the message the runner sets
for the build (`OCEAN_TRACKING_DBT_COMMIT_MESSAGE`, `pipelines.warehouse.models.build_environment`: the sync
it builds for), then the model. Only on the lake (`ducklake` target) and only inside the model's transaction,
where DuckLake keeps it; nothing elsewhere. Read only while executing: a value read while parsing would make
dbt parse the model again at every build. -#}
{% macro lake_commit_message() -%}
    {%- set message = env_var('OCEAN_TRACKING_DBT_COMMIT_MESSAGE', '') if execute else '' -%}
    {%- if target.name == 'ducklake' and message -%}
        call {{ target.database }}.set_commit_message('ocean-tracking', '{{ (message ~ ": " ~ this.identifier) | replace("'", "''") }}')
    {%- endif -%}
{%- endmacro %}
