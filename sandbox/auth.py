"""API-key authentication: `Authorization: Token <key>` only, keys mapped to an account, entitlements and
a rate budget.

Keys are never logged or exposed: everything outside this module sees a short SHA-256 fingerprint, or the
name of the key's account.
"""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Sequence
from dataclasses import dataclass

ROUTING = "routing_data"
REFRESH = "refresh"
FULL = frozenset({ROUTING, REFRESH})
NO_ROUTING = frozenset({REFRESH})

UNAUTHORIZED_DETAIL = "The API key could not be verified. Send it as 'Authorization: Token <API_KEY>'."


@dataclass(frozen=True)
class Principal:
    """An authenticated caller: the world account it reads, what it is entitled to, and the rate budget
    it spends (`budget`: the account's name for the keys of an extra account, shared as on the live
    service; the key's own fingerprint for --api-key and --api-key-no-routing keys, as the sandbox always
    counted them)."""

    fingerprint: str
    account: str
    entitlements: frozenset[str]
    budget: str


def fingerprint(key: str) -> str:
    """A stable, non-reversible short id for a key (stats and logs use this, never the key)."""
    return "key_" + hashlib.sha256(key.encode()).hexdigest()[:12]


def extra_account_name(position: int) -> str:
    """The name of the extra account at `position` (0-based) among the `--account-key` groups: account-2,
    account-3, ... ("primary" being the first). Names follow the order, never the keys."""
    return f"account-{position + 2}"


class KeyRing:
    """The sandbox's keys: full keys map to the "primary" account, no-routing keys to "basic", and each
    group of `accounts` (the --account-key values) to an extra full account of its own."""

    def __init__(self, full: list[str], no_routing: list[str], revoked: list[str],
                 accounts: Sequence[Sequence[str]] = ()) -> None:
        """Map every key to its principal; ValueError (never naming the key) when a key of an extra
        account is also given to another account."""
        self._keys: dict[str, Principal] = {}
        for k in full:
            self._keys[k] = Principal(fingerprint(k), "primary", FULL, fingerprint(k))
        for k in no_routing:
            self._keys[k] = Principal(fingerprint(k), "basic", NO_ROUTING, fingerprint(k))
        self.extra_accounts = [extra_account_name(i) for i in range(len(accounts))]
        for name, group in zip(self.extra_accounts, accounts, strict=True):
            for k in group:
                if k in self._keys:
                    raise ValueError(f"a key of {name} is given more than once; a key reads one account only")
                self._keys[k] = Principal(fingerprint(k), name, FULL, name)
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
