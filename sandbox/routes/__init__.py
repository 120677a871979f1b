"""All sandbox routes, grouped by module."""

from __future__ import annotations

from starlette.routing import BaseRoute

from .. import webapp
from . import control, documents, reference, shipments, tracking


def all_routes() -> list[BaseRoute]:
    """Every route of the app: /v2 API, storage, web app and control endpoints."""
    return [*tracking.ROUTES, *shipments.ROUTES, *reference.ROUTES, *documents.ROUTES, *webapp.ROUTES,
            *control.ROUTES]
