"""All sandbox routes, grouped by module."""

from __future__ import annotations

from starlette.routing import BaseRoute

from .. import webapp
from . import (
    control,
    custom_fields,
    documents,
    raw_events,
    reference,
    search,
    shipments,
    tracking,
    vessels,
    webhooks,
)


def all_routes() -> list[BaseRoute]:
    """Every route of the app: /v2 API, storage, web app and control endpoints."""
    return [*tracking.ROUTES, *shipments.ROUTES, *reference.ROUTES, *documents.ROUTES,
            *search.ROUTES, *raw_events.ROUTES, *vessels.ROUTES, *custom_fields.ROUTES, *webhooks.ROUTES,
            *webapp.ROUTES,
            *control.ROUTES]
