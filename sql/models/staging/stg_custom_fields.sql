-- stg_custom_fields: custom field values with their definition (slug, label, data type), one per entity
-- and field. `value` is the JSON value as the service sends it (string, number, boolean, list or object);
-- `display_value` its formatted text. The entity is a shipment, a container or a tracking request
-- (`entity_type`); a value the user deleted is gone from the source table too.
-- Grain: one row per custom field value.
-- Key: custom_field_id

with fields as (
    {{ contract_source('custom_fields', [
        ['id', 'varchar'],
        ['api_slug', 'varchar'],
        ['value', 'json'],
        ['display_value', 'varchar'],
        ['entity_id', 'varchar'],
        ['entity_type', 'varchar'],
        ['definition_id', 'varchar']
    ]) }}
),

definitions as (
    {{ contract_source('custom_field_definitions', [
        ['id', 'varchar'],
        ['api_slug', 'varchar'],
        ['display_name', 'varchar'],
        ['data_type', 'varchar'],
        ['entity_type', 'varchar']
    ]) }}
)

select
    fields.id as custom_field_id,
    fields.entity_type,
    fields.entity_id,
    case when fields.entity_type = 'shipment' then fields.entity_id end as shipment_id,
    case when fields.entity_type = 'container' then fields.entity_id end as container_id,
    case when fields.entity_type = 'tracking_request' then fields.entity_id end as tracking_request_id,
    fields.definition_id,
    coalesce(fields.api_slug, definitions.api_slug) as api_slug,
    definitions.display_name,
    definitions.data_type,
    fields.value,
    fields.display_value
from fields
left join definitions
    on fields.definition_id = definitions.id
