"""API-key authentication: `Authorization: Token <key>` only, keys mapped to an account and entitlements.

Keys are never logged or exposed: everything outside this module sees a short SHA-256 fingerprint.
"""

from __future__ import annotations

import hashlib
import hmac
from dataclasses import dataclass

ROUTING = "routing_data"
REFRESH = "refresh"
FULL = frozenset({ROUTING, REFRESH})
NO_ROUTING = frozenset({REFRESH})

UNAUTHORIZED_DETAIL = "The API key could not be verified. Send it as 'Authorization: Token <API_KEY>'."


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the world account it reads and what it is entitled to."""

    fingerprint: str
    account: str
    entitlements: frozenset[str]


def fingerprint(key: str) -> str:
    """A stable, non-reversible short id for a key (stats and logs use this, never the key)."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


class KeyRing:
    """The sandbox's keys: full keys map to the "primary" account, no-routing keys to "basic"."""

    def __init__(self, full: list[str], no_routing: list[str], revoked: list[str]) -> None:
        self._keys: dict[str, Principal] = {}
        for k in full:
            self._keys[k] = Principal(fingerprint(k), "primary", FULL)
        for k in no_routing:
            self._keys[k] = Principal(fingerprint(k), "basic", NO_ROUTING)
        for k in revoked:
            self._keys.pop(k, None)

    def authenticate(self, header: str | None) -> Principal | None:
        """Return the principal for an exact `Token <key>` header, else None (missing, Bearer, quoted,
        padded, truncated, revoked or unknown keys all fail the same way, as the live service does)."""
        if not header or not header.startswith("Token "):
            return None
        key = header[len("Token "):]
        for known, principal in self._keys.items():
            if hmac.compare_digest(known.encode(), key.encode()):
                return principal
        return None
