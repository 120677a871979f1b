"""Settings under [sources.ocean_tracking] that nothing reads (a typo, an old name), found so they can be
reported instead of silently ignored: `pipelines.api.config.report_unknown_settings` logs them.

Looked at: environment variables `SOURCES__OCEAN_TRACKING__<NAME>` and the keys of the section in every
`.dlt/*.toml` file dlt reads. Deeper keys (a nested section such as `SOURCES__OCEAN_TRACKING__<RESOURCE>__...`,
a `[sources.ocean_tracking.x]` table) belong to dlt's resource configuration and are left alone.
"""

from __future__ import annotations

import difflib
import os
from collections.abc import Collection

import dlt
from dlt.common.configuration.providers.toml import SettingsTomlProvider

from pipelines.settings import CONFIG_SECTION, ENV_PREFIX


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
