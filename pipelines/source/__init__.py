"""The `ocean_tracking` dlt source, laid out as a dlt verified source: `resources` (the source and its
resources), `tables` (the raw tables' registry and the API's documented columns), `bookkeeping` (the fetch
log and sync issues the resources write beside their rows), `pages` (a page of shipments, and what a
complete listing no longer holds) and `map_schedule` (which route maps are due, and the refresh budget).

Nothing is imported here: the Dagster code location reads `tables` and `map_schedule` when it loads, without
dlt."""
