-- transit_dwell_percentiles: the median (p50) and 90th percentile (p90) of each of container_durations'
-- measures, by terminal, place, carrier and lane, and over all containers.
-- Grain: one row per measure per dimension (`all`, `terminal`, `location`, `carrier`, `lane`) per value of
-- that dimension (`terminal_id`, `location_locode`, `carrier_scac`, `lane`; `all` for `all`); durations
-- whose dimension is unknown (null) are left out of that dimension.
-- Percentiles are continuous (macro percentile_cont: linear interpolation between the two nearest ranks,
-- at rank 1 + p * (n - 1), as numpy.percentile's default and PostgreSQL's percentile_cont); over the
-- durations' `hours`, and rounded to 2 decimals (doubles), as `mean_hours` is.
-- Key: measure, dimension, dimension_value

{% set dimensions = [
    ['all', "'all'"],
    ['terminal', 'terminal_id'],
    ['location', 'location_locode'],
    ['carrier', 'carrier_scac'],
    ['lane', 'lane']
] %}

with durations as (
    select * from {{ ref('container_durations') }}
),

by_dimension as (
    {%- for dimension, column in dimensions %}
    select
        measure,
        '{{ dimension }}' as dimension,
        {{ column }} as dimension_value,
        hours
    from durations
    where {{ column }} is not null
    {{- "\n    union all" if not loop.last }}
    {%- endfor %}
)

select
    measure,
    dimension,
    dimension_value,
    count(*) as observations,
    {{ round_double(percentile_cont(0.5, 'hours'), 2) }} as p50_hours,
    {{ round_double(percentile_cont(0.9, 'hours'), 2) }} as p90_hours,
    -- averaged as decimals: a sum of doubles depends on the order the rows are read in (an incremental
    -- container_durations keeps another order than a full build), and its last digit can tip the rounding
    {{ round_double('avg(cast(hours as decimal(18, 6)))', 2) }} as mean_hours
from by_dimension
group by measure, dimension, dimension_value
