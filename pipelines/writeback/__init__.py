"""Write-back: create tracking requests, patch ref_numbers, upload documents, each journaled in DuckDB.

Modules: `store` (the `writeback` schema: outcomes, upload journal, audit log), `inputs` (CSV / DuckDB
table / manifest readers and local validation), `lookups` (shipping lines, parties, warehouse ids),
`tracking_requests`, `ref_numbers`, `documents` (the three actions) and `cli` (subcommands).
"""
