{#- Local dates: the calendar date an instant falls on at a place, from the place's IANA time zone.
DuckDB (ICU) and PostgreSQL spell these the same, in standard SQL: `timestamptz at time zone 'Zone/Name'`
is the wall-clock time there, daylight saving included, so no dispatch (`days_between` is dispatched). -#}

{#- The date the instant `timestamp` (a timestamptz) falls on in `time_zone` (an IANA name); null when
either is null. -#}
{% macro local_date(timestamp, time_zone) -%}
    cast(({{ timestamp }}) at time zone ({{ time_zone }}) as date)
{%- endmacro %}

{#- Whole days from today in `time_zone` (the date it is at `now` there) to the date `day`: 0 on the day
itself, negative after it. `now` is the query's time unless a test passes a literal. -#}
{% macro days_until(day, time_zone, now='current_timestamp') -%}
    {{ days_between(day, local_date(now, time_zone)) }}
{%- endmacro %}

{#- The IANA time zone names this engine knows, as a relation with one column `time_zone`. A name it does
not know would fail every query that converts with it (DuckDB and PostgreSQL raise), so models join
names through this and read an unknown one as missing. -#}
{% macro known_time_zones() -%}
    (select distinct name as time_zone from pg_timezone_names())
{%- endmacro %}
