-- stg_notifications_applied: the webhook notifications a targeted refresh applied, with when the service created
-- each, when it arrived here, and when the load that applied it committed (`_dlt_loads.inserted_at`: the change
-- it names was queryable from then on).
-- Grain: one row per notification.
-- Key: notification_id

{%- set raw = source('ocean_tracking', 'notifications_applied') %}
{%- set dlt_loads = api.Relation.create(database=raw.database, schema=raw.schema, identifier='_dlt_loads') %}

with source as (
    {{ contract_source('notifications_applied', [
        ['id', 'varchar'],
        ['event', 'varchar'],
        ['created_at', 'timestamptz'],
        ['received_at', 'timestamptz'],
        ['reference_type', 'varchar'],
        ['reference_id', 'varchar'],
        ['_dlt_load_id', 'varchar']
    ]) }}
)

select
    source.id as notification_id,
    source.event,
    source.reference_type,
    source.reference_id,
    source.created_at,
    source.received_at,
    loads.inserted_at as queryable_at,
    {{ seconds_between('loads.inserted_at', 'source.created_at') }} as lag_seconds
from source
left join {{ dlt_loads }} as loads on loads.load_id = source._dlt_load_id
