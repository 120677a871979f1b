"""The receiving side of the service's webhooks.

`journal`: every signed notification, kept durably (its own SQLite file, WAL) before the sender is told it
arrived, then consumed in order. `receiver`: the HTTP endpoint that verifies and journals deliveries.
`signing`: the webhook secret (resolved the dlt way, never shown) and the signature check.
`registration`: creating or updating the webhook on the service and storing its secret. `cli`: the
`python -m pipelines webhooks ...` commands.
"""
