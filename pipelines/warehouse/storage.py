"""The lake's data path in object storage (S3 and S3-compatible servers): the DuckDB secret our own
connections need to read and write it, built from the same dlt configuration dlt's loader uses.

dlt's `ducklake` destination reads the storage's credentials from its own keys
(`DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__CREDENTIALS__AWS_ACCESS_KEY_ID`, `..._AWS_SECRET_ACCESS_KEY`,
`..._ENDPOINT_URL`, `..._REGION_NAME`, or the same in `.dlt/*.toml`) and turns them into a DuckDB
`CREATE SECRET (TYPE S3, ...)` on every connection it opens. Every other connection to the lake (readers,
models, maintenance, the analysts' session, write-back publishing) resolves the same keys with dlt's own
configuration resolver and builds the secret with dlt's own builder, so one configuration drives both and
the two can never disagree (endpoint without its scheme, path-style URLs, SSL from the endpoint's scheme).
The secret is temporary (in the connection's memory, never persisted) and never appears in a log or an
error: a failure is one line with the key and secret blanked out.
"""

from __future__ import annotations

from urllib.parse import urlsplit

import duckdb

from pipelines.errors import ConfigurationError, redact
from pipelines.settings import DUCKLAKE_STORAGE_SECTIONS

SECRET_NAME = "lake_storage"


def is_remote(path: str | None) -> bool:
    """True for an object-store URL (`s3://...`), False for a local folder (or `file://`)."""
    return bool(path) and "://" in path and urlsplit(path).scheme not in ("", "file")


def storage_credentials(bucket_url: str):
    """The storage credentials dlt's loader would use for `bucket_url`, resolved by dlt from its own keys
    (`AwsCredentials` for `s3://`, ...)."""
    from dlt.common.configuration import resolve_configuration
    from dlt.common.configuration.exceptions import ConfigFieldMissingException
    from dlt.common.storages.configuration import FilesystemConfiguration

    try:
        config = resolve_configuration(FilesystemConfiguration(bucket_url=bucket_url), sections=DUCKLAKE_STORAGE_SECTIONS)
    except ConfigFieldMissingException as error:
        missing = ", ".join(error.fields)
        raise ConfigurationError(
            f"The lake's data path {bucket_url} needs storage credentials ({missing}): set "
            "DESTINATION__DUCKLAKE__CREDENTIALS__STORAGE__CREDENTIALS__AWS_ACCESS_KEY_ID, ..._AWS_SECRET_ACCESS_KEY, "
            "..._ENDPOINT_URL and ..._REGION_NAME (or the same in .dlt/secrets.toml)."
        ) from None
    return config.credentials


def _secret_values(credentials) -> list[str]:
    """The credential values that must never be shown (keys, secrets, tokens)."""
    names = ("aws_secret_access_key", "aws_session_token", "aws_access_key_id", "azure_storage_account_key",
             "azure_storage_sas_token", "private_key", "client_secret")  # fmt: skip
    return [str(value) for name in names if (value := getattr(credentials, name, None))]


def storage_secret_statements(data_path: str) -> tuple[list[str], list[str]]:
    """The `CREATE SECRET` statements (temporary, scoped to `data_path`) that let a DuckDB session read and
    write the lake's files in object storage, exactly as dlt's loader builds them
    (`DuckDbSqlClient._build_secret_statements`), and the secret values in them (to keep out of messages)."""
    from dlt.destinations.impl.duckdb.sql_client import DuckDbSqlClient

    credentials = storage_credentials(data_path)
    statements = DuckDbSqlClient._build_secret_statements(data_path, credentials, SECRET_NAME, "", False)
    if not statements:
        scheme = urlsplit(data_path).scheme
        raise ConfigurationError(
            f"DuckDB cannot reach the lake's data path {data_path} with a secret ({scheme}:// is not supported "
            "here): use s3:// (any S3-compatible server) for the lake's files."
        )
    return [statement.strip() for statement in statements], _secret_values(credentials)


def create_storage_secret(con: duckdb.DuckDBPyConnection, data_path: str) -> None:
    """Create on `con` the secret for the lake's files in object storage (`storage_secret_statements`); a
    failure is one line with the credentials blanked out."""
    statements, secrets = storage_secret_statements(data_path)
    for statement in statements:
        try:
            con.execute(statement)
        except duckdb.Error as error:
            reason = redact(str(error).strip().splitlines()[0], *secrets)
            raise ConfigurationError(
                f"Could not create the DuckDB secret for the lake's data path {data_path}: {reason}"
            ) from None
