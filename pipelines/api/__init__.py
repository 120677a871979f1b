"""The only HTTP client of the service: Token auth, the host-wide rate limiter, retries, JSON:API errors and
documents, and the API settings they read."""
