"""The only HTTP client of the service: Token auth, the host-wide rate limiter, retries, JSON:API errors and
documents, and the API settings they read (`client`, `ratelimit`, `retry`, `jsonapi`, `config`).

Here, which accounts one deployment follows: the names in $OCEAN_TRACKING_ACCOUNTS, each an `Account`
(`pipelines.settings`). Not in `config` because the Dagster code location reads them while it loads, and
loading must not import dlt (`config` reads settings through dlt); this module imports only `settings` and
`errors`.
"""

from __future__ import annotations

import os

from pipelines.errors import ConfigurationError
from pipelines.settings import ACCOUNT_NAME_PATTERN, ACCOUNTS_ENV, Account


def configured_accounts() -> list[Account]:
    """The accounts one deployment follows: the names in $OCEAN_TRACKING_ACCOUNTS (comma-separated), else
    the single account of [sources.ocean_tracking]. A malformed or repeated name is one line."""
    raw = os.environ.get(ACCOUNTS_ENV, "").strip()
    if not raw:
        return [Account()]
    names = [name.strip() for name in raw.split(",") if name.strip()]
    for name in names:
        if not ACCOUNT_NAME_PATTERN.fullmatch(name):
            raise ConfigurationError(
                f"{ACCOUNTS_ENV} names an account {name!r}: names are lower-case letters, digits and _ "
                "(starting with a letter, at most 30), because they become schema names.")
    if len(set(names)) != len(names):
        raise ConfigurationError(f"{ACCOUNTS_ENV} names an account twice; each account once.")
    return [Account(name) for name in names]


def account_named(name: str | None) -> Account:
    """The configured account called `name` (None: the single account when no accounts are configured);
    one line naming the configured ones when there is none by that name."""
    accounts = configured_accounts()
    if name is None:
        if accounts == [Account()]:
            return Account()
        raise ConfigurationError(f"{ACCOUNTS_ENV} names several accounts: say which one (--account "
                                 f"{' | '.join(str(a.name) for a in accounts)}).")
    for account in accounts:
        if account.name == name:
            return account
    configured = ", ".join(str(a.name) for a in accounts if a.name) or "none"
    raise ConfigurationError(f"No account {name!r} is configured ({ACCOUNTS_ENV}: {configured}).")
