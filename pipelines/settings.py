"""Every name the product is configured by, defined once: environment variables, config sections,
default paths, URLs, dataset and schema names, page size and rate budget.

Everything else imports from here. Paths are functions, not constants, because they follow the
environment at the moment they are asked for (the demo and the tests point a process at another
folder after import). The values a user sets are read the dlt way (environment variables, then
`.dlt/secrets.toml` and `.dlt/config.toml`): `pipelines.api.config` resolves and validates the API
settings, `pipelines.warehouse` the destinations.

Every environment variable a user may set is declared with `setting(name, what, default)`: its one-line
description and its default in words live beside its name, and README.md's settings table is rendered
from them (`python scripts/settings_table.py --write`; tests/test_readme.py fails when the two differ).
"""

from __future__ import annotations

import os
import re
import tempfile
import uuid
from dataclasses import dataclass
from datetime import timedelta
from pathlib import Path


@dataclass(frozen=True)
class Setting:
    """A setting a user may give, as README.md's settings table shows it: the environment variable, what
    applies when it is unset (in words) and what it does, in one line each."""

    name: str
    default: str
    what: str


#: every documented setting, in the order README.md's table lists them (the order they are defined in here)
SETTINGS: list[Setting] = []


def setting(name: str, what: str, default: str = "unset") -> str:
    """Declare the environment variable `name` with its description and default for README.md's settings
    table, and return the name: a setting is named and documented in one statement."""
    SETTINGS.append(Setting(name, default, what))
    return name


# ---- the service -------------------------------------------------------------------------------------
SOURCE_NAME = "ocean_tracking"
CONFIG_SECTION = f"sources.{SOURCE_NAME}"  # [sources.ocean_tracking] in .dlt/secrets.toml
ENV_PREFIX = "SOURCES__OCEAN_TRACKING__"
DEFAULT_BASE_URL = "https://api.terminal49.com/v2"
DEFAULT_APP_URL = "https://app.terminal49.com"
PAGE_SIZE = 100  # the service's maximum page size
REQUESTS_PER_MINUTE = 100  # the service's budget per account, in a rolling window
RATE_WINDOW_SECONDS = 60.0
API_KEY_ENV = setting(f"{ENV_PREFIX}API_KEY", "the account's API key, from the developer portal (a secret: "
                      "never on a command line)", default="required to sync")  # fmt: skip
BASE_URL_ENV = setting(f"{ENV_PREFIX}BASE_URL", "the API (a sandbox's URL to try things locally)",
                       default=f"`{DEFAULT_BASE_URL}`")  # fmt: skip
APP_URL_ENV = setting(f"{ENV_PREFIX}APP_URL", "the web app the `deep_links` model links to",
                      default=f"`{DEFAULT_APP_URL}`")  # fmt: skip
RATE_WINDOW_ENV = setting(f"{ENV_PREFIX}RATE_WINDOW_SECONDS", "the service's rolling window for its "
                          f"{REQUESTS_PER_MINUTE} requests, seconds", default=f"{RATE_WINDOW_SECONDS:g}")  # fmt: skip
DEFAULT_CUSTOM_FIELDS_EVERY_HOURS = 24.0  # custom fields change by hand, rarely; listing them costs a page per 100
CUSTOM_FIELDS_EVERY_ENV = setting(f"{ENV_PREFIX}CUSTOM_FIELDS_EVERY_HOURS", "how often a sync lists the custom fields "
                                  "and their definitions, hours of the service's clock (0: every sync; per account "
                                  "too, `..._ACCOUNTS__<NAME>__...`)",
                                  default=f"{DEFAULT_CUSTOM_FIELDS_EVERY_HOURS:g}")  # fmt: skip
API_KEY_HELP = f"{API_KEY_ENV} (or api_key under [{CONFIG_SECTION}] in .dlt/secrets.toml)"
WEBHOOK_SECRET_KEY = "webhook_secret"  # the HMAC key of webhook deliveries, a secret like the API key
WEBHOOK_SECRET_ENV = setting(f"{ENV_PREFIX}WEBHOOK_SECRET", "the secret webhook deliveries are signed with "
                             "(a secret)", default="the one `webhooks register` stored")  # fmt: skip
DEFAULT_SECRETS_FILE = ".dlt/secrets.toml"

# ---- the warehouse -----------------------------------------------------------------------------------
DATASET_NAME = SOURCE_NAME  # raw tables
ANALYTICS_SCHEMA = "analytics"  # the SQL models
WRITEBACK_SCHEMA = "writeback"  # write-back outcomes and audit log
LAKE_NAME = "lake"  # the DuckLake's name: the catalog it is attached as (`lake.ocean_tracking.containers`)
# The schemas that are implementation, not for analysts, beside a dataset or a models schema: dlt's merge
# staging (`_ocean_tracking_staging`, dlt's `staging_dataset_name_layout`) and the staging models
# (`_analytics_staging`). The leading underscore marks them internal, as dlt's own `_dlt_*` tables are, and
# keeps them apart from every name an account owns (`ocean_tracking_<account>`, `analytics_<account>`).
INTERNAL_STAGING_LAYOUT = "_%s_staging"
DEFAULT_DESTINATION = "ducklake"  # the embedded default: analysts read while the schedule writes
DESTINATION_ENV = setting("OCEAN_TRACKING_DESTINATION", "where the CLI, write-back and Dagster load: `ducklake`, "
                          "`duckdb` (one file), `filesystem`, `postgres` or another dlt destination",
                          default=f"`{DEFAULT_DESTINATION}`")  # fmt: skip
# dlt's own keys for its `ducklake` destination: the catalog and the data path are configuration.
DUCKLAKE_CATALOG_ENV = setting("DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG", "the lake's catalog: a SQLite file "
                               "or `postgresql://...` (the lake across hosts)",
                               default="`sqlite:///<data dir>/ducklake/catalog.sqlite`")  # fmt: skip
DUCKLAKE_STORAGE_ENV = setting("DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__BUCKET_URL", "the lake's Parquet "
                               "files: a folder or `s3://...`", default="`<data dir>/ducklake/files`")  # fmt: skip
# The PostgreSQL schema a server catalog lives in (dlt's default: the lake's name), and the config sections of
# the lake's object storage (its `..._STORAGE__CREDENTIALS__*`), both dlt's own keys.
DUCKLAKE_METADATA_SCHEMA_KEY = "destination.ducklake.credentials.metadata_schema"
DUCKLAKE_STORAGE_SECTIONS = ("destination", "ducklake", "credentials", "storage")

# ---- several accounts in one deployment -----------------------------------------------------------------
# Unset: one account, configured under [sources.ocean_tracking], loaded into the names above. Set to names
# (`emea,apac`): each account's key is `SOURCES__OCEAN_TRACKING__ACCOUNTS__<NAME>__API_KEY` (api_key under
# [sources.ocean_tracking.accounts.<name>]; never the shared section's key), any other setting of the section
# may be overridden there, and its data goes to a dataset and a models schema of its own (and so a dlt
# pipeline of its own: the pipeline is named after its dataset, `pipelines.warehouse.destinations`).
ACCOUNTS_ENV = setting("OCEAN_TRACKING_ACCOUNTS", "several accounts by name (`emea,apac`): each its own key, "
                       "dataset and models schema; Dagster partitions by account", default="unset: one account")  # fmt: skip
ACCOUNTS_SECTION = "accounts"
ACCOUNT_NAME_PATTERN = re.compile(r"[a-z][a-z0-9_]{0,29}")


@dataclass(frozen=True)
class Account:
    """One account of the service and the names its data lives under. `name` None is the single account of
    a one-account setup, whose names are the defaults (`ocean_tracking`, `analytics`), so an existing
    warehouse keeps its tables; a named account gets `ocean_tracking_<name>` and `analytics_<name>`."""

    name: str | None = None

    def suffixed(self, base: str) -> str:
        """`base` for the single account, `<base>_<name>` for a named one: the one rule every name an account
        owns follows (schemas, folders, files)."""
        return base if self.name is None else f"{base}_{self.name}"

    def own_file(self, path: Path) -> Path:
        """The account's own file beside `path`: `path` itself for the single account, `<stem>_<name><suffix>`
        for a named one (its journals, its GeoParquet)."""
        return path.with_name(self.suffixed(path.stem) + path.suffix)

    @property
    def dataset_name(self) -> str:
        """The schema of the account's raw tables."""
        return self.suffixed(DATASET_NAME)

    @property
    def analytics_schema(self) -> str:
        """The schema the account's models are built into."""
        return self.suffixed(ANALYTICS_SCHEMA)

    @property
    def writeback_schema(self) -> str:
        """The warehouse schema the account's write-back outcomes and audit log are published into."""
        return self.suffixed(WRITEBACK_SCHEMA)

    @property
    def config_section(self) -> str:
        """Where the account's own settings are read: its table under [sources.ocean_tracking.accounts]."""
        return CONFIG_SECTION if self.name is None else f"{CONFIG_SECTION}.{ACCOUNTS_SECTION}.{self.name}"

    def setting_env(self, key: str) -> str:
        """The environment variable of the account's setting `key` (named in messages, never its value):
        `SOURCES__OCEAN_TRACKING__<KEY>` for the single account, `..._ACCOUNTS__<NAME>__<KEY>` for a named one."""
        scope = "" if self.name is None else f"{ACCOUNTS_SECTION.upper()}__{self.name.upper()}__"
        return f"{ENV_PREFIX}{scope}{key.upper()}"

    def setting_help(self, key: str) -> str:
        """Where the account's setting `key` is set, for messages: its variable, or the key in its table."""
        return f"{self.setting_env(key)} (or {key} under [{self.config_section}] in {DEFAULT_SECRETS_FILE})"

    @property
    def api_key_env(self) -> str:
        """The environment variable holding the account's key (named in messages, never its value)."""
        return self.setting_env("api_key")

    @property
    def api_key_help(self) -> str:
        """Where the account's key is set, for messages (`API_KEY_HELP` for the single account)."""
        return self.setting_help("api_key")

    @property
    def label(self) -> str:
        """How messages name the account."""
        return "the account" if self.name is None else f"account {self.name}"


setting(Account("<name>").api_key_env, f"a named account's key (its other settings fall back to `{ENV_PREFIX}*`)",
        default=f"required to sync it; never `{API_KEY_ENV}`")  # fmt: skip
setting(Account("<name>").setting_env(WEBHOOK_SECRET_KEY), "a named account's webhook secret (a secret)",
        default=f"the one `webhooks register --account` stored; never `{WEBHOOK_SECRET_ENV}`")  # fmt: skip

# ---- local files -------------------------------------------------------------------------------------
DEFAULT_DATA_DIR = "data"
# Not `ocean_tracking.duckdb`: a DuckDB file named like the dataset makes `ocean_tracking.<table>`
# ambiguous (catalog or schema?) to the binder, and dlt fails its DDL.
DUCKDB_FILE_NAME = "warehouse.duckdb"
DEFAULT_FRESHNESS_HOURS = 26.0  # the daily full sync plus slack for a retried or queued run
DEFAULT_LAKE_RETENTION_DAYS = 30.0  # how far back time travel reaches once maintenance has run
DEFAULT_LOCK_TIMEOUT_SECONDS = 120.0
DEFAULT_CLEANUP_GRACE_MINUTES = 60.0  # how long a file the lake let go stays for the sessions still reading it
DEFAULT_EVERY_TEST_HOURS = 24.0  # how often a build on the lake runs every dbt test, the staging views' too
DATA_DIR_ENV = setting("OCEAN_TRACKING_DATA_DIR", "the folder of the lake, the GeoParquet, the maps and the "
                       "journals", default=f"`{DEFAULT_DATA_DIR}` (in the working directory)")  # fmt: skip
DUCKDB_ENV = setting("OCEAN_TRACKING_DUCKDB", "the warehouse file when the destination is `duckdb`",
                     default=f"`<data dir>/{DUCKDB_FILE_NAME}`")  # fmt: skip
PIPELINES_DIR_ENV = setting("OCEAN_TRACKING_PIPELINES_DIR", "dlt's working folders (pending load packages)",
                            default="dlt's (`~/.dlt/pipelines`); under Dagster `.dagster/dlt_pipelines`")  # fmt: skip
FRESHNESS_HOURS_ENV = setting("OCEAN_TRACKING_FRESHNESS_HOURS", "how old the last load may be before the "
                              "freshness check fails, hours", default=f"{DEFAULT_FRESHNESS_HOURS:g}")  # fmt: skip
WRITEBACK_JOURNAL_ENV = setting("OCEAN_TRACKING_WRITEBACK_JOURNAL", "the write-back journal: a SQLite file, or a "
                                "`postgresql://` URL shared by several hosts (a secret then)",
                                default="`<data dir>/writeback_journal.sqlite`")  # fmt: skip
WEBHOOK_JOURNAL_ENV = setting("OCEAN_TRACKING_WEBHOOK_JOURNAL", "the webhook notification journal: a SQLite file, "
                              "or a `postgresql://` URL shared by several hosts (a secret then)",
                              default="`<data dir>/webhook_journal.sqlite`")  # fmt: skip
LAKE_RETENTION_ENV = setting("OCEAN_TRACKING_LAKE_RETENTION_DAYS", "how many days of snapshots (time travel) "
                             "maintenance keeps", default=f"{DEFAULT_LAKE_RETENTION_DAYS:g}")  # fmt: skip
CLEANUP_GRACE_ENV = setting("OCEAN_TRACKING_CLEANUP_GRACE_MINUTES", "how long a data file no snapshot needs any more "
                            "stays on disk for the sessions that may still read it, minutes",
                            default=f"{DEFAULT_CLEANUP_GRACE_MINUTES:g}")  # fmt: skip
EVERY_TEST_HOURS_ENV = setting("OCEAN_TRACKING_EVERY_TEST_HOURS", "how often a build on the lake runs every dbt "
                               "test (the others test the raw tables and the structure of the marts they rebuild), hours; "
                               "0: every build",
                               default=f"{DEFAULT_EVERY_TEST_HOURS:g}")  # fmt: skip
# The DuckDB file's loader `memory_limit` unless configured. A load into the file keeps every block it writes
# (each table twice: dlt's staging copy and the merged one) in DuckDB's buffer pool, which only gives them back
# at its limit, 80 % of RAM: a first load of 10k shipments held 850 MiB, 10x the data 4x the memory. With this
# limit DuckDB writes them out and evicts them (measured with DuckDB 1.5.5, the load alone: 10k shipments +133
# MiB, +195 at 128MB, 1k +96 at either; a first sync of 10k shipments 1.34x a 1k one's, 1.49-1.50x at 128MB).
# The lake writes Parquet files, not blocks of its own, and needs none.
DUCKDB_FILE_LOADER_MEMORY_LIMIT = "64MB"
# DuckDB's memory for the load into the embedded warehouse (unset: the lake DuckDB's own, 80 % of RAM; the file
# the limit above)
LOADER_MEMORY_LIMIT_ENV = setting("OCEAN_TRACKING_LOADER_MEMORY_LIMIT", "DuckDB's `memory_limit` while a sync "
                                  "loads (e.g. `2GB`)", default="the lake: DuckDB's, 80 % of RAM; the DuckDB "
                                  f"file: {DUCKDB_FILE_LOADER_MEMORY_LIMIT}")  # fmt: skip
LOCK_TIMEOUT_ENV = setting("OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS", "how long a writer waits for the warehouse's "
                           "or a journal's lock, seconds", default=f"{DEFAULT_LOCK_TIMEOUT_SECONDS:g}")  # fmt: skip
DUCKLAKE_DIR_NAME = "ducklake"  # catalog.sqlite and files/
GEOPARQUET_FILE_NAME = "map_features.parquet"
WRITEBACK_JOURNAL_FILE_NAME = "writeback_journal.sqlite"
WEBHOOK_JOURNAL_FILE_NAME = "webhook_journal.sqlite"
MAPS_DIR_NAME = "maps"  # routes/<container>.png and overview.png


def data_dir() -> Path:
    """Where outputs go: $OCEAN_TRACKING_DATA_DIR, else `data` (relative to the working directory)."""
    return Path(os.environ.get(DATA_DIR_ENV) or DEFAULT_DATA_DIR)


def duckdb_path() -> Path:
    """The warehouse file: $OCEAN_TRACKING_DUCKDB, else `<data_dir>/warehouse.duckdb`."""
    configured = os.environ.get(DUCKDB_ENV)
    return Path(configured) if configured else data_dir() / DUCKDB_FILE_NAME


def default_destination() -> str:
    """Where a sync loads unless told otherwise: $OCEAN_TRACKING_DESTINATION, else the DuckLake."""
    return os.environ.get(DESTINATION_ENV) or DEFAULT_DESTINATION


def ducklake_catalog_path(base: Path | None = None) -> Path:
    """The DuckLake's default SQLite catalog: `<data_dir>/ducklake/catalog.sqlite` (`base` for the data dir)."""
    return (base or data_dir()) / DUCKLAKE_DIR_NAME / "catalog.sqlite"


def ducklake_data_path(base: Path | None = None) -> Path:
    """The DuckLake's default data folder (Parquet files): `<data_dir>/ducklake/files` (`base` for the data dir)."""
    return (base or data_dir()) / DUCKLAKE_DIR_NAME / "files"


def lake_url() -> Path:
    """The Parquet/Delta lake folder of the `filesystem` destination: `<data_dir>/lake`."""
    return data_dir() / "lake"


def geoparquet_path(account: Account | None = None) -> Path:
    """The GeoParquet export of the map features: `<data_dir>/map_features.parquet`, or
    `map_features_<account>.parquet` for a named account."""
    return (account or Account()).own_file(data_dir() / GEOPARQUET_FILE_NAME)


def maps_dir() -> Path:
    """The rendered maps: `<data_dir>/maps` (`routes/<container>.png`, `overview.png`)."""
    return data_dir() / MAPS_DIR_NAME


def _journal_url(env: str) -> str | None:
    """The journal setting `env` when it is a PostgreSQL URL (`postgresql://` or `postgres://`), else None."""
    configured = (os.environ.get(env) or "").strip()
    return configured if configured.lower().startswith(("postgresql://", "postgres://")) else None


def writeback_journal_path(warehouse: Path | None = None, account: Account | None = None) -> Path:
    """The write-back journal's SQLite file (WAL): $OCEAN_TRACKING_WRITEBACK_JOURNAL, else
    `writeback_journal.sqlite` beside the warehouse file (`<data_dir>` when none is given). Its own file,
    so a batch never holds the analysts' warehouse. A named account has its own
    (`writeback_journal_<account>.sqlite`, or the setting's name with that suffix): the journal is its
    exactly-once record, and another account's identical row is not done yet. When the setting is a
    PostgreSQL URL the journal is there (`writeback_journal_location`) and this is only where a SQLite one
    would be: no file is used."""
    configured = os.environ.get(WRITEBACK_JOURNAL_ENV)
    if configured and _journal_url(WRITEBACK_JOURNAL_ENV) is None:
        path = Path(configured)
    else:
        path = (warehouse.parent if warehouse is not None else data_dir()) / WRITEBACK_JOURNAL_FILE_NAME
    return (account or Account()).own_file(path)


def writeback_journal_location(warehouse: Path | None = None, account: Account | None = None) -> str | Path:
    """Where the write-back journal lives: the PostgreSQL URL $OCEAN_TRACKING_WRITEBACK_JOURNAL names
    (`postgresql://user:password@host:port/database`: one journal for every host, as on Kubernetes where each
    run is its own pod; each account has its own schema there, see `pipelines.journals.writes.WritebackStore`),
    else the account's SQLite file `writeback_journal_path(warehouse, account)`. The URL is a secret (it
    holds a password): hand it to `pipelines.journals.writes.WritebackStore`, never to a log."""
    return _journal_url(WRITEBACK_JOURNAL_ENV) or writeback_journal_path(warehouse, account)


def webhook_journal_path(account: Account | None = None) -> Path:
    """The webhook notification journal's SQLite file (WAL): $OCEAN_TRACKING_WEBHOOK_JOURNAL, else
    `<data_dir>/webhook_journal.sqlite`. Its own file, so the receiver never holds the analysts' warehouse.
    A named account has its own (`webhook_journal_<account>.sqlite`, or the setting's name with that suffix):
    its own subscription, secret and receiver. When the setting is a PostgreSQL URL the journal is there
    (`webhook_journal_location`) and this is only where a SQLite one would be: no file is used."""
    configured = os.environ.get(WEBHOOK_JOURNAL_ENV)
    use_setting = configured and _journal_url(WEBHOOK_JOURNAL_ENV) is None
    path = Path(configured) if use_setting else data_dir() / WEBHOOK_JOURNAL_FILE_NAME
    return (account or Account()).own_file(path)


def webhook_journal_location(account: Account | None = None) -> str | Path:
    """Where the webhook notification journal lives: the PostgreSQL URL $OCEAN_TRACKING_WEBHOOK_JOURNAL names
    (one journal for the receiver's pod and every run's pod; each account has its own schema there, see
    `pipelines.journals.NotificationJournal`), else the account's SQLite file `webhook_journal_path`.
    The URL is a secret (it holds a password): never log it."""
    return _journal_url(WEBHOOK_JOURNAL_ENV) or webhook_journal_path(account)


def lock_timeout_seconds() -> float:
    """How long to wait for a lock another process holds (warehouse, journal) before giving up."""
    return float(os.environ.get(LOCK_TIMEOUT_ENV) or DEFAULT_LOCK_TIMEOUT_SECONDS)


def lake_retention_days() -> float:
    """How long the lake keeps old snapshots (time travel) before maintenance expires them."""
    return float(os.environ.get(LAKE_RETENTION_ENV) or DEFAULT_LAKE_RETENTION_DAYS)


def cleanup_grace() -> timedelta:
    """How long the lake keeps a file it let go (an expired snapshot's, a merge's replaced one) before deleting it:
    longer than any session that began before it was let go still reads."""
    return timedelta(minutes=float(os.environ.get(CLEANUP_GRACE_ENV) or DEFAULT_CLEANUP_GRACE_MINUTES))


def every_test_interval() -> timedelta:
    """How long a build on the lake may go on testing only the marts it rebuilt before one runs every test."""
    return timedelta(hours=float(os.environ.get(EVERY_TEST_HOURS_ENV) or DEFAULT_EVERY_TEST_HOURS))


def loader_memory_limit(default: str | None = None) -> str | None:
    """DuckDB's `memory_limit` while a sync loads the embedded warehouse: the configured one (e.g. `2GB` in
    a container with little memory), else `default` (None leaves DuckDB's). No small default for the lake:
    its merges do not all spill, and at 128 MB a full load of 10k shipments (and of 100k without maps) ran
    out of memory instead (measured with DuckDB 1.5.5)."""
    return os.environ.get(LOADER_MEMORY_LIMIT_ENV) or default


def pipelines_dir(default: Path) -> Path:
    """dlt's working folders: $OCEAN_TRACKING_PIPELINES_DIR, else `default`."""
    configured = os.environ.get(PIPELINES_DIR_ENV)
    return Path(configured) if configured else default


# Where the rate limiter's log lives: `sqlite:///abs/path.sqlite` (one host) or
# `postgresql://user:password@host:port/database` (every host spending the key); `limiter_path` is the
# older SQLite-only setting. Both are read under [sources.ocean_tracking] the dlt way.
LIMITER_URL_KEY = "limiter_url"
LIMITER_URL_ENV = setting(f"{ENV_PREFIX}LIMITER_URL", "where the rate limiter's log lives: `sqlite:///...` (one "
                          "host) or `postgresql://...` (every host spending the key; a secret)",
                          default="a SQLite file in the temp dir")  # fmt: skip
LIMITER_PATH_ENV = setting(f"{ENV_PREFIX}LIMITER_PATH", f"the older spelling of `{LIMITER_URL_KEY}`: the "
                           "limiter's SQLite file", default="a SQLite file in the temp dir")  # fmt: skip


def limiter_path() -> Path:
    """The host-wide rate limiter's SQLite file, shared by every process on the host."""
    return Path(tempfile.gettempdir()) / SOURCE_NAME / "ratelimit.sqlite"


def own_spill_directory() -> str:
    """A new folder name in the temp directory for one in-memory DuckDB to spill into (DuckDB creates it on the
    first spill and removes it on close): DuckDB's default, `.tmp` in the working directory under the same file
    names in every database, crashes two that spill at once (`pipelines/compat.py` says how it was measured)."""
    return str(Path(tempfile.gettempdir()) / f"duckdb-spill-{os.getpid()}-{uuid.uuid4().hex[:12]}")


def limiter_url() -> str:
    """The rate limiter's default log as a URL: the SQLite file `limiter_path()`."""
    return f"sqlite:///{limiter_path().absolute().as_posix().lstrip('/')}"


# ---- alerts (assets/alerts.py): run and asset-check failures posted outside the UI ----------------------
# Both sensors start RUNNING only when a webhook URL or an SMTP host is set when the code location loads.
# The values are read when an alert is sent; the webhook URL (it may carry a token) and the SMTP password
# are secrets: never logged, never in an event, redacted from error messages.
DEFAULT_ALERT_TIMEOUT_SECONDS = 5.0  # three attempts on two channels stay within a sensor tick (60 s)
ALERT_WEBHOOK_URL_ENV = setting("OCEAN_TRACKING_ALERT_WEBHOOK_URL", "failed runs and checks are POSTed here as "
                                "JSON (a secret: it may carry a token)", default="unset: no webhook")  # fmt: skip
ALERT_UI_URL_ENV = setting("OCEAN_TRACKING_ALERT_UI_URL", "the Dagster UI's base URL, for a link to the run in "
                           "each alert")  # fmt: skip
ALERT_TIMEOUT_ENV = setting("OCEAN_TRACKING_ALERT_TIMEOUT_SECONDS", "per attempt, webhook and SMTP alike, "
                            "seconds", default=f"{DEFAULT_ALERT_TIMEOUT_SECONDS:g}")  # fmt: skip
ALERT_SMTP_HOST_ENV = setting("OCEAN_TRACKING_ALERT_SMTP_HOST", "alerts by e-mail through this SMTP server",
                              default="unset: no e-mail")  # fmt: skip
ALERT_SMTP_PORT_ENV = setting("OCEAN_TRACKING_ALERT_SMTP_PORT", "the SMTP server's port",
                              default="465 for `ssl`, 587 for `starttls`, 25 for `none`")  # fmt: skip
ALERT_SMTP_SECURITY_ENV = setting("OCEAN_TRACKING_ALERT_SMTP_SECURITY", "`starttls`, `ssl` or `none`",
                                  default="`starttls`")  # fmt: skip
ALERT_SMTP_USER_ENV = setting("OCEAN_TRACKING_ALERT_SMTP_USER", "the SMTP login (logs in only when set)")
ALERT_SMTP_PASSWORD_ENV = setting("OCEAN_TRACKING_ALERT_SMTP_PASSWORD", "the SMTP password (a secret)")
ALERT_EMAIL_FROM_ENV = setting("OCEAN_TRACKING_ALERT_EMAIL_FROM", "the alerts' sender",
                               default="the SMTP user, else a localhost address")  # fmt: skip
ALERT_EMAIL_TO_ENV = setting("OCEAN_TRACKING_ALERT_EMAIL_TO", "the alerts' recipients, comma-separated")
ALERT_ATTEMPTS = 3  # per message and channel; a channel that failed them all rests a minute (assets.alerts)

# ---- webhooks (pipelines/webhooks): the receiver of the service's notifications ---------------------------
WEBHOOK_HOST = "127.0.0.1"  # loopback by default: a reverse proxy terminates TLS in front of it
WEBHOOK_PORT = 8765
WEBHOOK_PATH = "/webhooks/terminal49"
WEBHOOK_MAX_BODY_BYTES = 1024 * 1024  # larger deliveries are refused (413) before they are read whole
WEBHOOK_HEARTBEAT_SECONDS = 10.0  # how often a running receiver says so in its journal
WEBHOOK_SIGNATURE_HEADER = "X-T49-Webhook-Signature"
