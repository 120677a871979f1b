"""The webhook secret and the delivery signature.

The service signs every delivery: `X-T49-Webhook-Signature` is the lowercase hex HMAC-SHA256 of the raw
request body, keyed with the webhook's `secret` (returned once, when the webhook is created). The secret is
resolved like the API key (`pipelines.api.config`): `SOURCES__OCEAN_TRACKING__WEBHOOK_SECRET`, else
`webhook_secret` under `[sources.ocean_tracking]` in `.dlt/secrets.toml`; a named account's only from its own
`SOURCES__OCEAN_TRACKING__ACCOUNTS__<NAME>__WEBHOOK_SECRET` or `[sources.ocean_tracking.accounts.<name>]` (its own
webhook, its own secret). It is held in `WebhookSecret`, which never shows it in a repr, a log line or an error.
"""

from __future__ import annotations

import hashlib
import hmac
from typing import Any

from pipelines.api.config import ApiKey, lookup_setting
from pipelines.errors import ConfigurationError
from pipelines.settings import WEBHOOK_SECRET_KEY, Account


class WebhookSecret(ApiKey):
    """The webhook's HMAC key; masks itself like the API key (`reveal()` is for signing only)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return f"WebhookSecret(sha256:{self.fingerprint})"

    __str__ = __repr__


def validate_webhook_secret(raw: Any, account: Account | None = None) -> WebhookSecret:
    """Check the secret's shape (a non-empty string without surrounding whitespace); never echo it. Messages
    say where `account`'s secret is set."""
    account = account or Account()
    where = f"Set {account.setting_help(WEBHOOK_SECRET_KEY)}"
    if isinstance(raw, ApiKey):
        raw = raw.reveal()
    if raw is None or raw == "":
        owner, option = ("", "") if account.name is None else (f" of {account.label}", f" --account {account.name}")
        raise ConfigurationError(
            f"The webhook secret{owner} is missing or empty. {where} to the secret the service returned when the "
            f"webhook was created (`python -m pipelines webhooks register{option}` stores it)."
        )
    if not isinstance(raw, str):
        raise ConfigurationError(f"The webhook secret must be a string, got {type(raw).__name__}. {where}.")
    if raw != raw.strip():
        raise ConfigurationError(
            f"The webhook secret has leading or trailing whitespace (often a copied newline). {where} to the "
            "secret alone."
        )
    return WebhookSecret(raw)


def load_webhook_secret(secret: str | None = None, account: Account | None = None) -> WebhookSecret:
    """The webhook secret of `account` (default: the single account): `secret` when given, else the dlt way
    (environment, then .dlt/secrets.toml; a named account's own setting only, never the shared one)."""
    raw = secret if secret is not None else lookup_setting(WEBHOOK_SECRET_KEY, secret=True, account=account)
    return validate_webhook_secret(raw, account)


def signature(body: bytes, secret: WebhookSecret | str) -> str:
    """The signature the service sends for `body`: lowercase hex HMAC-SHA256 keyed with the secret."""
    key = secret.reveal() if isinstance(secret, ApiKey) else secret
    return hmac.new(key.encode("utf-8"), body, hashlib.sha256).hexdigest()


def valid_signature(body: bytes, received: str | None, secret: WebhookSecret | str) -> bool:
    """Whether `received` (the header's value) signs `body`, compared in constant time."""
    if not received:
        return False
    expected = signature(body, secret).encode("ascii")
    return hmac.compare_digest(expected, received.strip().lower().encode("latin-1", errors="replace"))
