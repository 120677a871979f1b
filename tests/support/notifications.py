"""Notification bodies as the service sends them, for the webhook tests."""

from __future__ import annotations

import json
import uuid
from typing import Any


def notification(
    ident: str | None = None,
    *,
    event: str = "container.updated",
    created_at: str | None = "2026-05-11T18:30:00Z",
    reference: tuple[str, str] | None = ("container_updated_event", "e8f1976c-0089-4b98-96ae-90aa87fbdfee"),
) -> dict[str, Any]:
    """A webhook_notification document (the vendor's envelope, payloads.mdx)."""
    attributes: dict[str, Any] = {"event": event, "delivery_status": "pending"}
    if created_at is not None:
        attributes["created_at"] = created_at
    relationships: dict[str, Any] = {"webhook": {"data": {"id": "8a5ffa8f", "type": "webhook"}}}
    if reference is not None:
        relationships["reference_object"] = {"data": {"type": reference[0], "id": reference[1]}}
    return {
        "data": {"id": ident or str(uuid.uuid4()), "type": "webhook_notification", "attributes": attributes,
                 "relationships": relationships},
        "included": [],
    }


def body(document: dict[str, Any]) -> bytes:
    """The raw bytes of a delivery."""
    return json.dumps(document).encode("utf-8")
