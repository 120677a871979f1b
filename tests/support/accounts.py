"""Several accounts in the tests: two named accounts of one sandbox and a CLI process's environment for them."""

from __future__ import annotations

from tests.support.sandboxes import FULL_KEY
from tests.support.syncs import cli_env

OTHER_ACCOUNT_KEY = "sbx_test_accounts_other_3c9d21"  # the sandbox's account-2 (`account_keys=[(OTHER_ACCOUNT_KEY,)]`)
# Two named accounts: emea reads the sandbox's primary account, apac its account-2.
ACCOUNTS = {"OCEAN_TRACKING_ACCOUNTS": "emea,apac",
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY": FULL_KEY,
            "SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY": OTHER_ACCOUNT_KEY}


def accounts_env(server, workdir, **extra: str) -> dict[str, str]:
    """The environment of a CLI process with the two `ACCOUNTS` configured (no shared key)."""
    env = cli_env(server.base_url, workdir, **ACCOUNTS, **extra)
    del env["SOURCES__OCEAN_TRACKING__API_KEY"]  # with accounts configured, only their own keys exist
    return env
