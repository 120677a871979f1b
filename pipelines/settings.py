"""Every name the product is configured by, defined once: environment variables, config sections,
default paths, URLs, dataset and schema names, page size and rate budget.

Everything else imports from here. Paths are functions, not constants, because they follow the
environment at the moment they are asked for (the demo and the tests point a process at another
folder after import). The values a user sets are read the dlt way (environment variables, then
`.dlt/secrets.toml` and `.dlt/config.toml`): `pipelines.api.config` resolves and validates the API
settings, `pipelines.warehouse` the destinations.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

# ---- the service -------------------------------------------------------------------------------------
SOURCE_NAME = "ocean_tracking"
CONFIG_SECTION = f"sources.{SOURCE_NAME}"  # [sources.ocean_tracking] in .dlt/secrets.toml
ENV_PREFIX = "SOURCES__OCEAN_TRACKING__"
API_KEY_ENV = f"{ENV_PREFIX}API_KEY"
BASE_URL_ENV = f"{ENV_PREFIX}BASE_URL"
APP_URL_ENV = f"{ENV_PREFIX}APP_URL"
RATE_WINDOW_ENV = f"{ENV_PREFIX}RATE_WINDOW_SECONDS"
API_KEY_HELP = f"{API_KEY_ENV} (or api_key under [{CONFIG_SECTION}] in .dlt/secrets.toml)"
WEBHOOK_SECRET_KEY = "webhook_secret"  # the HMAC key of webhook deliveries, a secret like the API key
WEBHOOK_SECRET_ENV = f"{ENV_PREFIX}WEBHOOK_SECRET"
WEBHOOK_SECRET_HELP = f"{WEBHOOK_SECRET_ENV} (or {WEBHOOK_SECRET_KEY} under [{CONFIG_SECTION}] in .dlt/secrets.toml)"
DEFAULT_SECRETS_FILE = ".dlt/secrets.toml"

DEFAULT_BASE_URL = "https://api.terminal49.com/v2"
DEFAULT_APP_URL = "https://app.terminal49.com"
PAGE_SIZE = 100  # the service's maximum page size
REQUESTS_PER_MINUTE = 100  # the service's budget per account, in a rolling window
RATE_WINDOW_SECONDS = 60.0

# ---- the warehouse -----------------------------------------------------------------------------------
PIPELINE_NAME = SOURCE_NAME
DATASET_NAME = SOURCE_NAME  # raw tables
ANALYTICS_SCHEMA = "analytics"  # the SQL models
WRITEBACK_SCHEMA = "writeback"  # write-back outcomes and audit log
LAKE_NAME = "lake"  # the DuckLake's name: the catalog it is attached as (`lake.ocean_tracking.containers`)
DESTINATION_ENV = "OCEAN_TRACKING_DESTINATION"
DEFAULT_DESTINATION = "ducklake"  # the embedded default: analysts read while the schedule writes
# dlt's own keys for its `ducklake` destination: the catalog and the data path are configuration.
DUCKLAKE_CATALOG_ENV = "DESTINATION__DUCKLAKE__CREDENTIALS__CATALOG"
DUCKLAKE_STORAGE_ENV = "DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__BUCKET_URL"
# The PostgreSQL schema a server catalog lives in (dlt's default: the lake's name), and the config sections of
# the lake's object storage (its `..._STORAGE__CREDENTIALS__*`), both dlt's own keys.
DUCKLAKE_METADATA_SCHEMA_KEY = "destination.ducklake.credentials.metadata_schema"
DUCKLAKE_STORAGE_SECTIONS = ("destination", "ducklake", "credentials", "storage")

# ---- local files -------------------------------------------------------------------------------------
DATA_DIR_ENV = "OCEAN_TRACKING_DATA_DIR"
DUCKDB_ENV = "OCEAN_TRACKING_DUCKDB"
PIPELINES_DIR_ENV = "OCEAN_TRACKING_PIPELINES_DIR"
FRESHNESS_HOURS_ENV = "OCEAN_TRACKING_FRESHNESS_HOURS"
WRITEBACK_JOURNAL_ENV = "OCEAN_TRACKING_WRITEBACK_JOURNAL"
WEBHOOK_JOURNAL_ENV = "OCEAN_TRACKING_WEBHOOK_JOURNAL"
LAKE_RETENTION_ENV = "OCEAN_TRACKING_LAKE_RETENTION_DAYS"
DEFAULT_LAKE_RETENTION_DAYS = 30.0  # how far back time travel reaches once maintenance has run
# DuckDB's memory for the load into the embedded warehouse (unset: DuckDB's own default, 80 % of RAM)
LOADER_MEMORY_LIMIT_ENV = "OCEAN_TRACKING_LOADER_MEMORY_LIMIT"
LOCK_TIMEOUT_ENV = "OCEAN_TRACKING_LOCK_TIMEOUT_SECONDS"
DEFAULT_LOCK_TIMEOUT_SECONDS = 120.0
DEFAULT_DATA_DIR = "data"
# Not `ocean_tracking.duckdb`: a DuckDB file named like the dataset makes `ocean_tracking.<table>`
# ambiguous (catalog or schema?) to the binder, and dlt fails its DDL.
DUCKDB_FILE_NAME = "warehouse.duckdb"
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


def geoparquet_path() -> Path:
    """The GeoParquet export of the map features: `<data_dir>/map_features.parquet`."""
    return data_dir() / GEOPARQUET_FILE_NAME


def maps_dir() -> Path:
    """The rendered maps: `<data_dir>/maps` (`routes/<container>.png`, `overview.png`)."""
    return data_dir() / MAPS_DIR_NAME


def writeback_journal_path(warehouse: Path | None = None) -> Path:
    """The write-back journal (SQLite, WAL): $OCEAN_TRACKING_WRITEBACK_JOURNAL, else
    `writeback_journal.sqlite` beside the warehouse file (`<data_dir>` when none is given). Its own file,
    so a batch never holds the analysts' warehouse."""
    configured = os.environ.get(WRITEBACK_JOURNAL_ENV)
    if configured:
        return Path(configured)
    return (warehouse.parent if warehouse is not None else data_dir()) / WRITEBACK_JOURNAL_FILE_NAME


def webhook_journal_path() -> Path:
    """The webhook notification journal (SQLite, WAL): $OCEAN_TRACKING_WEBHOOK_JOURNAL, else
    `<data_dir>/webhook_journal.sqlite`. Its own file, so the receiver never holds the analysts' warehouse."""
    configured = os.environ.get(WEBHOOK_JOURNAL_ENV)
    return Path(configured) if configured else data_dir() / WEBHOOK_JOURNAL_FILE_NAME


def lock_timeout_seconds() -> float:
    """How long to wait for a lock another process holds (warehouse, journal) before giving up."""
    return float(os.environ.get(LOCK_TIMEOUT_ENV) or DEFAULT_LOCK_TIMEOUT_SECONDS)


def lake_retention_days() -> float:
    """How long the lake keeps old snapshots (time travel) before maintenance expires them."""
    return float(os.environ.get(LAKE_RETENTION_ENV) or DEFAULT_LAKE_RETENTION_DAYS)


def loader_memory_limit() -> str | None:
    """DuckDB's `memory_limit` while a sync loads the embedded warehouse, when set (e.g. `2GB` in a
    container with little memory); None leaves DuckDB's default. No small default: the lake's merges do
    not all spill, and at 128 MB a full load of 10k shipments (and of 100k without maps) ran out of
    memory instead (measured with DuckDB 1.5.5)."""
    return os.environ.get(LOADER_MEMORY_LIMIT_ENV) or None


def pipelines_dir(default: Path) -> Path:
    """dlt's working folders: $OCEAN_TRACKING_PIPELINES_DIR, else `default`."""
    configured = os.environ.get(PIPELINES_DIR_ENV)
    return Path(configured) if configured else default


# Where the rate limiter's log lives: `sqlite:///abs/path.sqlite` (one host) or
# `postgresql://user:password@host:port/database` (every host spending the key); `limiter_path` is the
# older SQLite-only setting. Both are read under [sources.ocean_tracking] the dlt way.
LIMITER_URL_KEY = "limiter_url"
LIMITER_URL_ENV = f"{ENV_PREFIX}LIMITER_URL"
LIMITER_PATH_KEY = "limiter_path"
LIMITER_PATH_ENV = f"{ENV_PREFIX}LIMITER_PATH"


def limiter_path() -> Path:
    """The host-wide rate limiter's SQLite file, shared by every process on the host."""
    return Path(tempfile.gettempdir()) / SOURCE_NAME / "ratelimit.sqlite"


def limiter_url() -> str:
    """The rate limiter's default log as a URL: the SQLite file `limiter_path()`."""
    return f"sqlite:///{limiter_path().absolute().as_posix().lstrip('/')}"


# ---- alerts (assets/alerts.py): run and asset-check failures posted outside the UI ----------------------
# Both sensors start RUNNING only when a webhook URL or an SMTP host is set when the code location loads.
# The values are read when an alert is sent; the webhook URL (it may carry a token) and the SMTP password
# are secrets: never logged, never in an event, redacted from error messages.
ALERT_WEBHOOK_URL_ENV = "OCEAN_TRACKING_ALERT_WEBHOOK_URL"  # JSON is POSTed here
ALERT_UI_URL_ENV = "OCEAN_TRACKING_ALERT_UI_URL"  # the Dagster UI's base URL, for a link to the run
ALERT_TIMEOUT_ENV = "OCEAN_TRACKING_ALERT_TIMEOUT_SECONDS"  # per attempt, webhook and SMTP alike
ALERT_SMTP_HOST_ENV = "OCEAN_TRACKING_ALERT_SMTP_HOST"
ALERT_SMTP_PORT_ENV = "OCEAN_TRACKING_ALERT_SMTP_PORT"  # default: 465 for ssl, 587 for starttls, 25 for none
ALERT_SMTP_SECURITY_ENV = "OCEAN_TRACKING_ALERT_SMTP_SECURITY"  # starttls (default), ssl or none
ALERT_SMTP_USER_ENV = "OCEAN_TRACKING_ALERT_SMTP_USER"  # log in only when set
ALERT_SMTP_PASSWORD_ENV = "OCEAN_TRACKING_ALERT_SMTP_PASSWORD"
ALERT_EMAIL_FROM_ENV = "OCEAN_TRACKING_ALERT_EMAIL_FROM"  # default: the SMTP user, else a localhost one
ALERT_EMAIL_TO_ENV = "OCEAN_TRACKING_ALERT_EMAIL_TO"  # comma-separated recipients
DEFAULT_ALERT_TIMEOUT_SECONDS = 5.0  # three attempts on two channels stay within a sensor tick (60 s)
ALERT_ATTEMPTS = 3  # per message and channel; a channel that failed them all rests a minute (assets.alerts)

# ---- webhooks (pipelines/webhooks): the receiver of the service's notifications ---------------------------
WEBHOOK_HOST = "127.0.0.1"  # loopback by default: a reverse proxy terminates TLS in front of it
WEBHOOK_PORT = 8765
WEBHOOK_PATH = "/webhooks/terminal49"
WEBHOOK_MAX_BODY_BYTES = 1024 * 1024  # larger deliveries are refused (413) before they are read whole
WEBHOOK_HEARTBEAT_SECONDS = 10.0  # how often a running receiver says so in its journal
WEBHOOK_SIGNATURE_HEADER = "X-T49-Webhook-Signature"
WEBHOOK_DELIVERED_STATUSES = (200, 201, 202, 204)  # the only answers the service counts as delivered
