"""Several accounts in one Dagster deployment: each account is a partition of every asset holding its data.

Turn it on before the code location loads (the webserver, the daemon and every run worker read it):

    OCEAN_TRACKING_ACCOUNTS=emea,apac
    SOURCES__OCEAN_TRACKING__ACCOUNTS__EMEA__API_KEY=...   # or api_key under [sources.ocean_tracking.accounts.emea]
    SOURCES__OCEAN_TRACKING__ACCOUNTS__APAC__API_KEY=...   # in .dlt/secrets.toml; never the shared key

Names are lower-case letters, digits and `_` (they become schema names); a malformed or repeated name fails
loading with one line. Unset, there is one account and nothing is partitioned: the definitions are exactly
the one-account ones (`SOURCES__OCEAN_TRACKING__API_KEY`, dataset `ocean_tracking`, models in `analytics`).

With accounts, `account_partitions` (a `StaticPartitionsDefinition` of the names) partitions the ingest tables,
the dbt models and their tests, the map files and the ingest checks (partitioned asset checks are a preview
feature of Dagster 1.13, which says so in one warning when the code location loads). The asset keys do not change
(`ocean_tracking/shipments`, `analytics/container_status`); partition `emea` is the account `emea`:
- its key (its own variable or secrets table; other settings fall back to the shared section), and so its own
  rate budget: the limiter is keyed by the key's fingerprint;
- its raw tables in `ocean_tracking_emea`, its models in `analytics_emea`, its GeoParquet
  `<data_dir>/map_features_emea.parquet`, its PNG maps under `<data_dir>/maps_emea/`, its webhook journal
  `webhook_journal_emea.sqlite` (`pipelines.settings`);
- schedules and sensors request one run per account (partition key and the tag `ocean_tracking/account`), and
  a sensor evaluates each account on its own: one account's error is logged and the others are still served;
- the write-back jobs take the account in their op config (`account: emea`).
The lake's maintenance stays one unpartitioned asset: one lake holds every account.

One account's failure never fails another's: a run is one partition, so one account. A backfill of several
accounts is one run per account (no backfill policy: the default, one run a partition).

Two runs of one account never overlap, wherever they were launched (schedule, sensor, UI, backfill, automation):
dagster.yaml limits the run queue to one run in progress per value of `dagster/partition`, the tag Dagster puts
on every run of a partition (the account tag is only on the runs our schedules and sensors request, so it
alone would let a UI launch or a backfill through). Other accounts' runs go ahead. A second run of an account
waits in the queue, never fails for the first; outside Dagster the dataset's sync lock does the same
(`pipelines.sync.load_account`). With several accounts on one host, raise the `ocean_tracking` pool's limit
(`concurrency.pools.default_limit`) to the number of accounts, or the one slot runs them one after another;
the lake's writer lock still commits one at a time.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

import dagster as dg

from pipelines.settings import ACCOUNTS_ENV, Account

if TYPE_CHECKING:
    from collections.abc import Callable

# On every run our schedules and sensors request for an account: filter runs by account in the UI with it.
ACCOUNT_TAG = "ocean_tracking/account"
# Dagster's own tag on every run of a partition, whoever launched it: the queue's per-account limit key.
PARTITION_TAG = "dagster/partition"
SINGLE_ACCOUNT = Account()  # the one account of a setup without accounts (and every default argument)


def _account_partitions() -> dg.StaticPartitionsDefinition | None:
    """The configured accounts as static partitions, or None without OCEAN_TRACKING_ACCOUNTS."""
    if not os.environ.get(ACCOUNTS_ENV, "").strip():
        return None  # the one-account default: pipelines.api.config (and dlt with it) stays unimported
    from pipelines.api import configured_accounts

    return dg.StaticPartitionsDefinition([str(account.name) for account in configured_accounts()])


account_partitions = _account_partitions()


def accounts() -> list[Account]:
    """The accounts this code location serves: one per partition, or the single account without partitions."""
    if account_partitions is None:
        return [SINGLE_ACCOUNT]
    return [Account(name) for name in account_partitions.get_partition_keys()]


def account_of(context: dg.AssetExecutionContext | dg.AssetCheckExecutionContext | dg.OpExecutionContext) -> Account:
    """The account a run step works for: its partition key, else (nothing partitioned) the single account."""
    if not context.has_partition_key:
        return SINGLE_ACCOUNT
    from pipelines.api import account_named

    return account_named(context.partition_key)


def account_from_config(name: str) -> Account:
    """The account an op's config names (`account`); empty is the single account, and is refused when several
    are configured, since a write must go to one account on purpose."""
    if not name:
        if account_partitions is not None:
            raise dg.Failure(description=f"Say which account in the op config `account`: one of "
                                         f"{', '.join(account_partitions.get_partition_keys())}.", allow_retries=False)
        return SINGLE_ACCOUNT
    from pipelines.api import account_named

    return account_named(name)


def for_account(request: dg.RunRequest, account: Account) -> dg.RunRequest:
    """`request` as a run of `account`: its partition, its account tag and a run key of its own. The single
    account's request is returned as it is."""
    if account.name is None:
        return request
    run_key = f"{account.name}-{request.run_key}" if request.run_key else None
    return request.with_replaced_attrs(partition_key=account.name, run_key=run_key,
                                       tags={**request.tags, ACCOUNT_TAG: account.name})


def account_runs_filter(account: Account) -> dict[str, str]:
    """Run tags that pick the runs of `account` (empty for the single account: all runs are its runs)."""
    return {} if account.name is None else {PARTITION_TAG: account.name}


def per_account(
    context: dg.SensorEvaluationContext | dg.ScheduleEvaluationContext,
    evaluate: Callable[[Account], dg.RunRequest | dg.SkipReason],
) -> dg.RunRequest | dg.SkipReason | list[dg.RunRequest]:
    """Evaluate a schedule or sensor for each account: the single account's answer as it is; with accounts,
    every account's run request (`for_account`), or one skip reason naming each account's. An error of one
    account is logged in one line and the others are still evaluated; only when every account failed does the
    tick fail, with the first error."""
    if account_partitions is None:
        return evaluate(SINGLE_ACCOUNT)
    requests: list[dg.RunRequest] = []
    reasons: list[str] = []
    errors: list[Exception] = []
    for account in accounts():
        try:
            answer = evaluate(account)
        except Exception as error:  # one account's trouble must not stop the others
            context.log.error(f"{account.label}: {type(error).__name__}: {error}")
            reasons.append(f"{account.name}: failed ({type(error).__name__})")
            errors.append(error)
            continue
        if isinstance(answer, dg.RunRequest):
            requests.append(for_account(answer, account))
        else:
            reasons.append(f"{account.name}: {answer.skip_message}")
    if requests:
        return requests
    if len(errors) == len(reasons):
        raise errors[0]
    return dg.SkipReason("; ".join(reasons))
