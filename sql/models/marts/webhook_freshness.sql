-- webhook_freshness: how far this account's warehouse is behind the service, through the webhooks: the last
-- notification applied, its lag (from the service creating it to its change being queryable here), and the last
-- hour's lags. Each account's models schema holds its own. A quiet hour is not stale: `last_lag_seconds` stays
-- the lag of the last change there was.
-- Grain: one row (none before the first notification is applied).
-- Key: last_notification_id

with applied as (
    select * from {{ ref('stg_notifications_applied') }}
    where queryable_at is not null
),

-- of the last load's notifications, the one the service made last
last_applied as (
    select * from applied
    order by queryable_at desc, created_at desc, notification_id desc
    limit 1
),

last_hour as (
    select lag_seconds from applied
    where queryable_at >= current_timestamp - interval '1 hour'
)

select
    queryable_at as last_applied_at,
    notification_id as last_notification_id,
    event as last_event,
    created_at as last_created_at,
    lag_seconds as last_lag_seconds,
    (select count(*) from last_hour) as applied_last_hour,
    (select {{ round_double(percentile_cont(0.5, 'lag_seconds'), 1) }} from last_hour) as lag_p50_last_hour_seconds,
    (select {{ round_double(percentile_cont(0.95, 'lag_seconds'), 1) }} from last_hour) as lag_p95_last_hour_seconds,
    (select max(lag_seconds) from last_hour) as lag_max_last_hour_seconds
from last_applied
