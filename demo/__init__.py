"""The one-command demo: the sandbox and the Dagster job together (`python -m demo`)."""
