"""The API settings, resolved the dlt way (`sources.ocean_tracking.*`) and validated before any request.

Environment variables `SOURCES__OCEAN_TRACKING__API_KEY`, `..._BASE_URL`, `..._APP_URL` (and the optional
knobs below) or `.dlt/secrets.toml` / `.dlt/config.toml` under `[sources.ocean_tracking]`; explicit arguments
win. The key is validated before any request and held in `ApiKey`, whose repr/str never shows it; the
limiter's URL (it may carry a database password) is held in `LimiterUrl`, which masks it the same way.

A setting under that section the product does not read (a typo, an old name) is not silently ignored: each
is named in one warning line, with the closest known name (`report_unknown_settings`), never its value.
Looked at: environment variables `SOURCES__OCEAN_TRACKING__<NAME>` and the keys of the section in every
`.dlt/*.toml` file dlt reads. Deeper keys (a nested section such as `SOURCES__OCEAN_TRACKING__<RESOURCE>__...`,
a `[sources.ocean_tracking.x]` table) belong to dlt's resource configuration and are left alone.
"""

from __future__ import annotations

import difflib
import hashlib
import logging
import os
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any
from urllib.parse import urlparse

import dlt
from dlt.common.configuration.providers.toml import SettingsTomlProvider, TomlProviderReadException

from pipelines.api.ratelimit import LimiterUrl
from pipelines.errors import ConfigurationError
from pipelines.settings import (
    ACCOUNTS_SECTION,
    CONFIG_SECTION,
    DEFAULT_APP_URL,
    DEFAULT_BASE_URL,
    DEFAULT_CUSTOM_FIELDS_EVERY_HOURS,
    ENV_PREFIX,
    LIMITER_PATH_ENV,
    LIMITER_URL_ENV,
    RATE_WINDOW_SECONDS,
    WEBHOOK_SECRET_KEY,
    Account,
)
from pipelines.settings import (
    limiter_path as default_limiter_path,
)

logger = logging.getLogger(__name__)


class ApiKey:
    """An API key that masks itself everywhere it could be printed, logged, pickled into events or stored."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The raw key, for the Authorization header only."""
        return self._value

    @property
    def fingerprint(self) -> str:
        """A stable, non-reversible id of the key (sha256 prefix), for rate-limit keys and logs."""
        return key_fingerprint(self._value)

    def __repr__(self) -> str:
        return f"ApiKey(sha256:{self.fingerprint})"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ApiKey) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def key_fingerprint(raw: str) -> str:
    """First 12 hex chars of sha256(key): identifies a key's rate budget without revealing it."""
    return hashlib.sha256(raw.encode("utf-8")).hexdigest()[:12]


def validate_api_key(raw: Any, account: Account | None = None) -> ApiKey:
    """Check the key's shape before any request; say what is wrong and what to do, never echo the key."""
    where = f"Set {(account or Account()).api_key_help}"
    if isinstance(raw, ApiKey):
        raw = raw.reveal()
    if raw is None or (isinstance(raw, str) and raw == ""):
        owner = "" if account is None or account.name is None else f" of {account.label}"
        raise ConfigurationError(f"The API key{owner} is missing or empty. {where} to the key from the developer portal.")
    if not isinstance(raw, str):
        raise ConfigurationError(f"The API key must be a string, got {type(raw).__name__}. {where}.")
    if raw != raw.strip():
        raise ConfigurationError(
            f"The API key has leading or trailing whitespace (often a copied newline). {where} to the key alone."
        )
    if len(raw) >= 2 and raw[0] == raw[-1] and raw[0] in "\"'":
        raise ConfigurationError(
            f"The API key is wrapped in quotes; the quotes would be sent as part of it. {where} without quotes."
        )
    first = raw.split()[0].lower() if raw.split() else ""
    if first in ("token", "bearer", "authorization:", "basic"):
        raise ConfigurationError(
            "The API key starts with an authorization scheme word; the client adds 'Token ' itself. "
            f"{where} to the bare key."
        )
    if any(ch.isspace() for ch in raw):
        raise ConfigurationError(f"The API key contains whitespace, so it is not a single key. {where}.")
    if any(ord(ch) < 32 or ord(ch) == 127 for ch in raw):
        raise ConfigurationError(f"The API key contains control characters. {where}.")
    return ApiKey(raw)


@dataclass(frozen=True)
class Settings:
    """Everything the client needs; immutable, safe to repr (the key masks itself).

    Retries (`pipelines.api.client`): a request gives up after `max_attempts`, or sooner when its next
    attempt, after the backoff sleep, could end past `request_deadline` seconds since the request began,
    counting `connect_timeout + read_timeout` for that attempt. Waits on the rate limiter and waits a 429's
    `Retry-After` asked for (each capped by `max_retry_delay`) are not counted. Backoff without Retry-After:
    `backoff_factor` s, then 2 x `backoff_factor` s, each plus up to `backoff_factor` s of jitter.

    Why these defaults:
    - A service that accepts and never answers: attempt 1 times out at 30 s, attempt 2 at about 62 s, and a
      third could end past 90 s (62 + 2 + 10 + 30), so the request fails at about 62 s and never after 90 s;
      the process start and dlt's setup add a few seconds, so `sync` fails well within 2 minutes.
    - Fast failures (5xx, resets, truncated bodies) leave 90 - 40 = 50 s for sleeping before the last
      attempt: 20 attempts on average (19 sleeps, about 47 s), at least 18 with the worst jitter.
    - The sandbox's `5xx` profile (rate r = 0.1) starts a burst of 1-3 consecutive 5xx (uniform) on a share
      r of the requests met outside a burst, and a request's retries run into the rest of its own burst. So
      the chance that n attempts in a row fail is g(n) = r * (g(n-1) + g(n-2) + g(n-3)) / 3, with
      g(0) = g(-1) = g(-2) = 1: g(5) = 3.9e-3, so about 90 % of 600-request syncs failed with the old 5
      attempts (measured: 3 of 4; 9 of 10 in bench/fault_survival.py); g(10) = 2.3e-5 (1.4 % of syncs);
      g(18) = 8.8e-9 (5e-6 of syncs); g(20) = 1.2e-9 (7e-7). Resets and truncated bodies come one at a time:
      r^18 per request.
    - 429s are an answer, not a hang: their waits do not spend the deadline, so a 60 s Retry-After is
      waited out as often as max_attempts allows; an exhausted 429 raises RateLimitedError.
    """

    api_key: ApiKey
    base_url: str = DEFAULT_BASE_URL
    app_url: str = DEFAULT_APP_URL
    connect_timeout: float = 10.0
    read_timeout: float = 30.0
    max_attempts: int = 20
    backoff_factor: float = 1.0
    max_retry_delay: float = 120.0
    request_deadline: float = 90.0
    rate_window_seconds: float = RATE_WINDOW_SECONDS
    rate_window_padding: float = 0.03
    limiter_path: Path = field(default_factory=default_limiter_path)
    #: the limiter's PostgreSQL log; None: the SQLite file `limiter_path` (a `sqlite:///` URL is stored there)
    limiter_url: LimiterUrl | None = None
    #: whose key this is: where its settings were read and where its data goes
    account: Account = field(default_factory=Account)
    #: how often a sync lists the account's custom fields, hours of the service's clock; 0: every sync
    #: (`pipelines.source.resources.custom_field_resources`)
    custom_fields_every_hours: float = DEFAULT_CUSTOM_FIELDS_EVERY_HOURS

    @property
    def limiter_location(self) -> LimiterUrl:
        """Where the rate limiter's log lives: the PostgreSQL URL, else the SQLite file `limiter_path`."""
        return self.limiter_url or LimiterUrl.sqlite(self.limiter_path)

    def with_overrides(self, **changes: Any) -> Settings:
        """A copy with some fields replaced (validated again). The limiter's place is one setting: changing
        `limiter_url` or `limiter_path` replaces it, otherwise it is kept."""
        current = dict(self.__dict__)
        if "limiter_url" in changes or "limiter_path" in changes:
            del current["limiter_url"], current["limiter_path"]
        elif self.limiter_url is not None:
            del current["limiter_path"]
        return load_settings(**{**current, **changes})


_OPTIONAL = {
    "connect_timeout": float,
    "read_timeout": float,
    "max_attempts": int,
    "backoff_factor": float,
    "max_retry_delay": float,
    "request_deadline": float,
    "rate_window_seconds": float,
    "rate_window_padding": float,
    "custom_fields_every_hours": float,
}
_LIMITER = ("limiter_url", "limiter_path")

# Arguments of the dlt source `ocean_tracking` (pipelines/source/resources.py): dlt injects them from this
# section too (`SOURCES__OCEAN_TRACKING__INCLUDE_MAPS`). tests/pipelines/test_settings.py keeps the list whole.
SOURCE_ARGUMENTS = ("client", "include_maps", "map_refresh_seconds", "tracking_requests_lag_seconds",
                    "shipment_documents", "loaded_event_ids", "scheduled_maps", "tracking_request_rows",
                    "applied_notifications", "yield_to")  # fmt: skip
#: every setting the product reads under [sources.ocean_tracking]
KNOWN_SETTINGS = frozenset({"api_key", "base_url", "app_url", WEBHOOK_SECRET_KEY, *_OPTIONAL, *_LIMITER,
                            *SOURCE_ARGUMENTS, ACCOUNTS_SECTION})  # fmt: skip
# Settings that belong to one account and are never taken from the shared section for another.
ACCOUNT_ONLY_SETTINGS = frozenset({"api_key", WEBHOOK_SECRET_KEY})
_reported: set[str] = set()


def lookup_setting(name: str, secret: bool = False, account: Account | None = None) -> Any:
    """A setting of the `[sources.ocean_tracking]` section the dlt way (environment, then `.dlt/` TOML files);
    `secret` reads secrets (the API key, the webhook secret). For a named account its own table
    `[sources.ocean_tracking.accounts.<name>]` comes first, then the shared section, except for the key and
    the webhook secret, which only its own table gives. A malformed TOML file is one line saying so."""
    provider = dlt.secrets if secret else dlt.config
    sections = [CONFIG_SECTION]
    if account is not None and account.name is not None:
        sections = [account.config_section] if name in ACCOUNT_ONLY_SETTINGS else [account.config_section, CONFIG_SECTION]
    try:
        for section in sections:
            value = provider.get(f"{section}.{name}")
            if value is not None:
                return value
        return None
    except TomlProviderReadException as error:
        raise ConfigurationError(malformed_config_message(error)) from None


def malformed_config_message(error: TomlProviderReadException) -> str:
    """One line naming the malformed TOML file and what its parser said (with line and column)."""
    present = [path for path in error.full_paths if os.path.isfile(path)]
    where = ", ".join(present) or error.file_name
    reason = str(error).split("\n", 1)[-1].strip()
    return f"{where} is malformed: {reason}. Fix the file (it is TOML) or remove it."


def unknown_settings(known: Collection[str]) -> list[str]:
    """One line for each setting of the section not in `known`: its name, where it is set, the closest
    known name (difflib); never its value. Raises dlt's TomlProviderReadException on a malformed file."""
    found: list[str] = []
    for variable in sorted(os.environ):
        name = variable[len(ENV_PREFIX):].lower() if variable.startswith(ENV_PREFIX) else ""
        if name and "__" not in name and name not in known:
            meant = closest(name, known)
            hint = f" (did you mean {ENV_PREFIX}{meant.upper()}?)" if meant else ""
            found.append(f"Unknown setting {variable}{hint}; it is ignored.")
    sections = CONFIG_SECTION.split(".")
    for provider in dlt.config.config_providers:
        if not isinstance(provider, SettingsTomlProvider):
            continue
        table, _ = provider.get_value(sections[-1], dict, None, *sections[:-1])
        for name, value in table.items() if isinstance(table, dict) else ():
            if isinstance(value, dict) or name in known:
                continue
            where = provider.get_value_location(name, None, *sections) or provider.name
            meant = closest(name, known)
            hint = f" (did you mean {meant}?)" if meant else ""
            found.append(f"Unknown setting {name} under [{CONFIG_SECTION}] in {where}{hint}; it is ignored.")
    return found


def closest(name: str, known: Collection[str]) -> str | None:
    """The known name nearest to `name` (difflib's ratio at least 0.6), or None."""
    matches = difflib.get_close_matches(name, sorted(known), n=1, cutoff=0.6)
    return matches[0] if matches else None


def report_unknown_settings() -> None:
    """Log each line of `unknown_settings` as a warning, once a process (settings are loaded many times)."""
    try:
        lines = unknown_settings(KNOWN_SETTINGS)
    except TomlProviderReadException as error:
        raise ConfigurationError(malformed_config_message(error)) from None
    for line in lines:
        if line not in _reported:
            _reported.add(line)
            logger.warning(line)


def _resolve_limiter(overrides: dict[str, Any], account: Account) -> dict[str, Any]:
    """Where the limiter's log lives, as Settings fields. Given arguments win; else the dlt config. `limiter_url`
    and the older `limiter_path` (a SQLite file) name one place: both set must agree."""
    url, path = overrides.get("limiter_url"), overrides.get("limiter_path")
    if url is None and path is None:
        url, path = lookup_setting("limiter_url", account=account), lookup_setting("limiter_path", account=account)
    if url is None and path is None:
        return {}
    parsed = LimiterUrl(url) if url is not None else None
    if path is not None:
        if not isinstance(path, str | os.PathLike) or not str(path).strip():
            raise ConfigurationError(f"{CONFIG_SECTION}.limiter_path must be the path of a SQLite file.")
        if parsed is not None and parsed != LimiterUrl.sqlite(path):
            raise ConfigurationError(
                f"{LIMITER_URL_ENV} and {LIMITER_PATH_ENV} are both set and name different places for the rate "
                f"limiter; set only {LIMITER_URL_ENV} (limiter_url under [{CONFIG_SECTION}])."
            )
        return {"limiter_path": Path(path), "limiter_url": None}
    assert parsed is not None
    if parsed.kind == "sqlite":
        return {"limiter_path": parsed.path, "limiter_url": None}
    return {"limiter_url": parsed}


def _check_url(name: str, url: Any) -> str:
    if not isinstance(url, str) or not url.strip():
        raise ConfigurationError(f"{name} must be an http(s) URL, got {type(url).__name__}.")
    parsed = urlparse(url.strip())
    if parsed.scheme not in ("http", "https") or not parsed.netloc:
        raise ConfigurationError(
            f"{name} must be an absolute http(s) URL such as {DEFAULT_BASE_URL}; got one without scheme or host."
        )
    return url.strip().rstrip("/")


def load_settings(
    api_key: str | ApiKey | None = None,
    base_url: str | None = None,
    app_url: str | None = None,
    *,
    account: Account | None = None,
    **overrides: Any,
) -> Settings:
    """Resolve settings: explicit arguments, else dlt config/secrets, else defaults; validate the key. A named
    `account` reads its own table first (`lookup_setting`). Settings under [sources.ocean_tracking] the product
    does not read are reported (`report_unknown_settings`)."""
    report_unknown_settings()
    account = account or Account()
    raw_key = api_key if api_key is not None else lookup_setting("api_key", secret=True, account=account)
    key = validate_api_key(raw_key, account)
    base = _check_url("base_url", base_url or lookup_setting("base_url", account=account) or DEFAULT_BASE_URL)
    app = _check_url("app_url", app_url or lookup_setting("app_url", account=account) or DEFAULT_APP_URL)
    unknown = set(overrides) - set(_OPTIONAL) - set(_LIMITER)
    if unknown:
        raise ConfigurationError(f"Unknown settings: {', '.join(sorted(unknown))}.")
    values: dict[str, Any] = _resolve_limiter(overrides, account)
    for name, cast in _OPTIONAL.items():
        value = overrides.get(name)
        if value is None:
            value = lookup_setting(name, account=account)
        if value is None:
            continue
        try:
            values[name] = cast(value)
        except (TypeError, ValueError) as exc:
            raise ConfigurationError(f"{CONFIG_SECTION}.{name} must be a {cast.__name__}.") from exc
    settings = replace(Settings(api_key=key, base_url=base, app_url=app, account=account), **values)
    if settings.max_attempts < 1:
        raise ConfigurationError("max_attempts must be at least 1.")
    if min(settings.connect_timeout, settings.read_timeout, settings.request_deadline) <= 0:
        raise ConfigurationError("connect_timeout, read_timeout and request_deadline must be positive (seconds).")
    if settings.rate_window_seconds <= 0:
        raise ConfigurationError("rate_window_seconds must be positive.")
    if settings.custom_fields_every_hours < 0:
        raise ConfigurationError(f"custom_fields_every_hours must be 0 or more hours (0 lists custom fields every "
                                 f"sync); set {account.setting_help('custom_fields_every_hours')} accordingly.")
    return settings
