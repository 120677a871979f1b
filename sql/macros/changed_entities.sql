{#- Incremental marts: rebuild the rows of the containers (or shipments) a sync changed, not the whole table.

A mart whose grain is one container (or one shipment) and what hangs off it is `incremental` with the
`append` strategy (dbt's own, on every engine) and two hooks of this file:
- `replace_changed_entities(column, entity)`, a pre-hook: deletes the rows of every changed entity;
- `changed_entities_only(column, entity, keyword)`: keeps the rows of the changed entities only (`keyword` is
  `where`, or `and` after the select's own where), in each input CTE that holds an entity's rows (so that
  the joins, windows and geometry functions downstream see the changed entities only: DuckDB does not push
  the filter from the final select down through them, and voyage_legs at 10,000 shipments measured its
  lengths for every container otherwise) and at the end of the model's final select.
The delete, the insert and the commit message are one transaction: one lake snapshot a mart. A changed
entity that yields no row any more (a container no longer at sea) loses its rows, and so does an entity no
longer in its raw table.

Which entities changed: those with a raw row loaded after the last complete build, by the time each load
committed (`_dlt_loads.inserted_at` > `OCEAN_TRACKING_DBT_CHANGED_SINCE`, which the runner sets from its record:
`pipelines.warehouse.models.plan_build`, `build_environment`; an environment variable read only while
executing, not a var, which would make dbt parse the project again at every build), not by the load id, since a load interrupted and finished later
commits an older id. A container changed with its own row, its events, its map, its charge history, its
shipment or a vessel its map or events name; a shipment with its own row or its ETA history. A change to a
reference table every entity reads (terminals, ports, shipping lines) changes every entity. Without it (a full build, a subset
picked in Dagster) every entity has changed: the mart is replaced whole. A new release or new vars make the
runner pass `--full-refresh` instead, which builds the table afresh with its new columns. -#}

{#- Which entities changed is the same question for every incremental mart of a build (eleven of them, a delete
and an insert each): on the lake it is answered once, by the first incremental mart the build runs (a pre-hook
of every model outside its transaction, dbt_project.yml: inside it, DuckDB would refuse a write to a second
database), into a table of dbt's in-memory DuckDB database (gone with the build: no lake commit, no file), and
every mart reads that. Not measured apart: the soak's hourly syncs were not visibly faster for it alone. -#}
{% macro save_changed_entities() -%}
    {%- if target.name == 'ducklake' and changes_only() -%}
        {%- for entity in ['container', 'shipment'] -%}
            create table if not exists {{ saved_changed_entities(entity) }} as select distinct entity_id from ({{ changed_entity_ids_query(entity) }});
        {% endfor -%}
    {%- endif -%}
{%- endmacro %}


{#- The raw schema's tables into dbt's relation cache before any model runs (an on-run-start hook). dbt caches
the schemas of the project's models, not of its sources, so the first `load_relation` of a raw table inside a
model (the existence checks below, `contract_source`) lists the raw schema there, in a transaction dbt opens
and keeps open; the pre-hook above, which runs outside the model's transaction, then writes into it, and the
model's first write to the lake fails (a single transaction can only write to a single attached database). An
hourly build whose first node is an incremental mart met it. -#}
{% macro cache_raw_relations() -%}
    {%- if execute -%}
        {%- do adapter.get_relation(database=target.database, schema=var('raw_schema', 'ocean_tracking'), identifier='shipments') -%}
    {%- endif -%}
{%- endmacro %}


{% macro saved_changed_entities(entity) -%}
    memory.main.changed_{{ entity }}_ids
{%- endmacro %}


{% macro changed_entity_ids(entity) -%}
    {%- if target.name == 'ducklake' -%}
        select entity_id from {{ saved_changed_entities(entity) }}
    {%- else -%}
        {{ changed_entity_ids_query(entity) }}
    {%- endif -%}
{%- endmacro %}


{% macro changed_entity_ids_query(entity) -%}
    {%- set own = {
        'container': [('containers', 'id'), ('transport_events', 'container_id'), ('map_features', 'container_id'),
                      ('container_charge_history', 'container_id')],
        'shipment': [('shipments', 'id'), ('shipment_eta_history', 'shipment_id')],
    }[entity] -%}
    {%- set reference_tables = ['terminals', 'ports', 'shipping_lines'] -%}
    {%- set entities = source('ocean_tracking', entity ~ 's') -%}
    {%- set loads = api.Relation.create(database=entities.database, schema=entities.schema, identifier='_dlt_loads') -%}
    {%- set since -%} (select load_id from {{ loads }} where inserted_at > cast('{{ changed_since() }}' as {{ ot_type('timestamptz') }})) {%- endset -%}
    {%- set parts = [] -%}
    {%- for table, column in own if load_relation(source('ocean_tracking', table)) is not none -%}
        {%- do parts.append('select ' ~ column ~ ' as entity_id from ' ~ source('ocean_tracking', table) ~ ' where _dlt_load_id in ' ~ since) -%}
    {%- endfor -%}
    {%- if entity == 'container' -%}
        {%- do parts.append('select containers.id as entity_id from ' ~ entities ~ ' as containers inner join '
                            ~ source('ocean_tracking', 'shipments') ~ ' as shipments on containers.shipment_id = shipments.id'
                            ~ ' where shipments._dlt_load_id in ' ~ since) -%}
    {%- endif -%}
    {%- if entity == 'container' and load_relation(source('ocean_tracking', 'vessels')) is not none -%}
        {%- for table in ['map_features', 'transport_events'] if load_relation(source('ocean_tracking', table)) is not none -%}
            {%- do parts.append('select container_id as entity_id from ' ~ source('ocean_tracking', table)
                                ~ ' where vessel_id in (select id from ' ~ source('ocean_tracking', 'vessels')
                                ~ ' where _dlt_load_id in ' ~ since ~ ')') -%}
        {%- endfor -%}
    {%- endif -%}
    {%- for table in reference_tables if load_relation(source('ocean_tracking', table)) is not none -%}
        {%- do parts.append('select id as entity_id from ' ~ entities ~ ' where exists (select 1 from '
                            ~ source('ocean_tracking', table) ~ ' where _dlt_load_id in ' ~ since ~ ')') -%}
    {%- endfor -%}
    {%- if not parts -%}
        {%- do parts.append('select null as entity_id where 1 = 0') -%}
    {%- endif -%}
    {{ parts | join('\n    union\n    ') }}
{%- endmacro %}


{% macro changed_since() -%}
    {{ return(env_var('OCEAN_TRACKING_DBT_CHANGED_SINCE', '') if execute else '') }}
{%- endmacro %}


{% macro changes_only() -%}
    {{ return(is_incremental() and changed_since() != '') }}
{%- endmacro %}


{% macro replace_changed_entities(column, entity) -%}
    {%- if changes_only() -%}
        delete from {{ this }} where {{ column }} in ({{ changed_entity_ids(entity) }})
            or {{ column }} not in (select id from {{ source('ocean_tracking', entity ~ 's') }})
    {%- elif is_incremental() -%}
        delete from {{ this }}
    {%- endif -%}
{%- endmacro %}


{% macro changed_entities_only(column, entity, keyword='where') -%}
    {%- if changes_only() -%}
        {{ keyword }} {{ column }} in ({{ changed_entity_ids(entity) }})
    {%- endif -%}
{%- endmacro %}
