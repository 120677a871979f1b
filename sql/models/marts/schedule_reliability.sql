-- schedule_reliability: the share of arrivals on time by the Sea-Intelligence rule (Global Liner
-- Performance (GLP) report: on time within one calendar day either side of the schedule; reliability = on
-- time / all arrivals compared), per carrier, lane and month, against each schedule basis of
-- schedule_reliability_arrivals (`original_eta`: the carrier's first published ETA; `eta_at_departure`:
-- the ETA seen valid when the vessel left the POL). The unit is a shipment's arrival at its port of
-- discharge.
-- Grain: one row per schedule basis per carrier (SCAC) per lane (POL -> POD) per arrival month (UTC).
-- `arrivals` = `arrivals_compared` + `arrivals_excluded_no_schedule` (no schedule on that basis: counted,
-- never dropped); `arrivals_compared` = early + on time + late; `reliability` = arrivals_on_time /
-- arrivals_compared (0..1, null when none compared); `mean_delay_days_of_late` = the mean delay in days of
-- the late arrivals (Sea-Intelligence's "average delay of late vessel arrivals"), null when none was late.
-- Key: schedule_basis, carrier_scac, lane, arrival_month

with arrivals as (
    select * from {{ ref('schedule_reliability_arrivals') }}
)

select
    schedule_basis,
    carrier_scac,
    lane,
    arrival_month,
    count(*) as arrivals,
    count(scheduled_at) as arrivals_compared,
    count(*) - count(scheduled_at) as arrivals_excluded_no_schedule,
    count(case when arrival_status = 'early' then 1 end) as arrivals_early,
    count(case when arrival_status = 'on_time' then 1 end) as arrivals_on_time,
    count(case when arrival_status = 'late' then 1 end) as arrivals_late,
    cast(count(case when arrival_status = 'on_time' then 1 end) as {{ ot_type('double') }})
        / nullif(count(scheduled_at), 0) as reliability,
    avg(case when arrival_status = 'late' then delay_days end) as mean_delay_days_of_late
from arrivals
group by schedule_basis, carrier_scac, lane, arrival_month
