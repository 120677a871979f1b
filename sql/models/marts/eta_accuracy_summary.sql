-- eta_accuracy_summary: ETA accuracy (eta_accuracy) aggregated by carrier, lane, vessel and month.
-- Grain: one row per dimension (`carrier`: the SCAC, `lane`: POL -> POD or POD -> inland destination,
-- `vessel`: the POD arrival's vessel, `month`: the arrival's UTC month as YYYY-MM) per value per arrival
-- kind (`port_of_discharge`, `inland_destination`; an inland arrival has no vessel, so no `vessel` row) per
-- lead time. `arrivals` counts every arrived leg; `arrivals_with_eta` those with an ETA known at the lead
-- time, which alone the measures read: `mean_absolute_error_hours` = mean |eta_error_hours|, `bias_hours`
-- = mean eta_error_hours (positive: ETAs later than the arrivals), `share_within_1_day` = the share with
-- |error| <= 24 h (0..1), null when none was known; `mean_revisions` = the mean number of ETA revisions
-- seen before the arrival, over the legs with at least one ETA seen.
-- Key: dimension, dimension_value, arrival, lead_time_days

with accuracy as (
    select * from {{ ref('eta_accuracy') }}
),

by_dimension as (
    select 'carrier' as dimension, carrier_scac as dimension_value, * from accuracy
    union all
    select 'lane' as dimension, lane as dimension_value, * from accuracy
    union all
    select 'vessel' as dimension, vessel as dimension_value, * from accuracy
    where vessel is not null
    union all
    select 'month' as dimension, left(cast(arrival_month as varchar), 7) as dimension_value, * from accuracy
)

select
    dimension,
    dimension_value,
    arrival,
    lead_time_days,
    count(*) as arrivals,
    count(eta_error_hours) as arrivals_with_eta,
    avg(abs(eta_error_hours)) as mean_absolute_error_hours,
    avg(eta_error_hours) as bias_hours,
    cast(avg(cast(within_one_day as integer)) as {{ ot_type('double') }}) as share_within_1_day,
    cast(avg(eta_revisions_before_arrival) as {{ ot_type('double') }}) as mean_revisions
from by_dimension
group by dimension, dimension_value, arrival, lead_time_days
