"""ocean-tracking-elt: extract an ocean-tracking account with dlt, load it, model it, write back to it.

Rooms: `api` (the HTTP client), `extract` (the dlt source), `geo` (geometry and maps), `warehouse`
(destinations, tables, models), `writeback` (changes to the account), `sync` (the one load path),
`cli` (the command line), `settings` (every name and default). See docs/architecture.md.
"""
