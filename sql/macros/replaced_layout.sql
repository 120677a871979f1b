{#- What earlier layouts of the warehouse left behind that the models no longer write there, dropped after
every run (`on-run-end` in dbt_project.yml) so analysts do not step around it, on DuckDB, the DuckLake and
PostgreSQL alike:
- a model built in the models schema that now lives in another (the staging models, once beside the marts
  in `analytics`, now in `_analytics_staging`);
- a model renamed: `shipment_eta_history`, the name of the raw dlt table it is built from, is now
  `shipment_eta_changes`;
- dlt's merge staging dataset under dlt's default name, `<raw schema>_staging` (now `_<raw schema>_staging`,
  `pipelines.settings.INTERNAL_STAGING_LAYOUT`), unless it is a dataset of its own (it has `_dlt_loads`: a
  raw dataset is never dropped). -#}
{% macro drop_replaced_layout() -%}
    {%- if execute -%}
        {%- set models_schema = var('analytics_schema', 'analytics') -%}
        {%- set raw_schema = var('raw_schema', 'ocean_tracking') -%}
        {%- set moved = [] -%}
        {%- for node in graph.nodes.values() if node.resource_type == 'model' and node.schema != models_schema -%}
            {%- do moved.append(node.name) -%}
        {%- endfor -%}
        {%- for name in moved + ['shipment_eta_history'] -%}
            {%- set relation = adapter.get_relation(database=target.database, schema=models_schema, identifier=name) -%}
            {%- if relation is not none -%}
                {%- do log('dropping ' ~ relation ~ ' (replaced by the current layout)', info=true) -%}
                {%- do adapter.drop_relation(relation) -%}
            {%- endif -%}
        {%- endfor -%}
        {%- set old_staging = raw_schema ~ '_staging' -%}
        {%- if adapter.check_schema_exists(target.database, old_staging)
              and adapter.get_relation(database=target.database, schema=old_staging, identifier='_dlt_loads') is none -%}
            {%- do log('dropping schema ' ~ old_staging ~ " (dlt's staging, now _" ~ raw_schema ~ '_staging)', info=true) -%}
            {%- do adapter.drop_schema(api.Relation.create(database=target.database, schema=old_staging)) -%}
        {%- endif -%}
    {%- endif -%}
{%- endmacro %}
