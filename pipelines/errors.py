"""Errors raised by the pipeline's HTTP client and parsers.

`ApiError` carries what the service said (the JSON:API error objects) plus the method and URL path of the
request. It never carries headers, the query string or the API key, so it is safe to log, to show in
Dagster events and to store.
"""

from __future__ import annotations

import json
import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import quote, unquote

from pipelines.settings import API_KEY_HELP, BASE_URL_ENV, DEFAULT_BASE_URL


class PipelineError(Exception):
    """Base of every error this package raises on purpose."""


class ConfigurationError(PipelineError):
    """Settings are missing or malformed; raised before any request is sent."""


class DestinationUnreachableError(PipelineError):
    """The destination's server (PostgreSQL, ...) refused or timed out the connection: its host and port are
    named, never its password."""


@dataclass(frozen=True)
class ErrorObject:
    """One entry of a JSON:API `errors` array."""

    status: str | None = None
    title: str | None = None
    detail: str | None = None
    code: str | None = None
    pointer: str | None = None
    parameter: str | None = None

    def describe(self) -> str:
        """One line: where (pointer/parameter), then detail or title, then code."""
        where = self.pointer or (f"parameter {self.parameter}" if self.parameter else None)
        text = self.detail or self.title or "no detail given"
        parts = [f"{where}: {text}" if where else text]
        if self.code:
            parts.append(f"(code {self.code})")
        return " ".join(parts)


class ApiError(PipelineError):
    """The service answered with an error, or an unusable response, after any retries."""

    default_hint = ""

    def __init__(
        self,
        message: str,
        *,
        status: int | None = None,
        method: str | None = None,
        path: str | None = None,
        errors: Sequence[ErrorObject] = (),
        hint: str | None = None,
    ) -> None:
        self.status = status
        self.method = method
        self.path = path
        self.errors = list(errors)
        self.hint = self.default_hint if hint is None else hint
        self.message = message
        super().__init__(self._render())

    @property
    def error(self) -> ErrorObject | None:
        """The first error object, for callers that expect a single one."""
        return self.errors[0] if self.errors else None

    def _render(self) -> str:
        where = " ".join(p for p in (self.method, self.path) if p)
        status = f"HTTP {self.status}" if self.status else ""
        head = ": ".join(p for p in (" ".join(p for p in (where, status) if p), self.message) if p)
        lines = [head]
        lines += [f"  - {e.describe()}" for e in self.errors]
        if self.hint:
            lines.append(self.hint)
        return "\n".join(lines)


def rejected_key_hint(key_help: str = API_KEY_HELP) -> str:
    """What to do about a rejected key set where `key_help` says (an account's own variable when named)."""
    return (
        f"The API key was rejected (missing, revoked, truncated or mistyped). Check the value of {key_help}: it "
        "must be the raw key, without quotes, spaces or a 'Token'/'Bearer' prefix. A lost key cannot be shown "
        "again; create a new one in the developer portal."
    )


class AuthenticationError(ApiError):
    """401: the API key was rejected."""

    default_hint = rejected_key_hint()


class AuthorizationError(ApiError):
    """403: the key is valid but not allowed to do this."""


class FeatureNotEnabledError(AuthorizationError):
    """403 on a paid feature (routing data) the account has no entitlement for."""

    default_hint = "This is a paid feature (e.g. container route maps); the account needs the entitlement."


class NotFoundError(ApiError):
    """404 with a JSON:API body: the resource does not exist (or is not visible to this account)."""


class ValidationError(ApiError):
    """400/422: the request was refused; each error object names the offending pointer or parameter."""


class RateLimitedError(ApiError):
    """429 after every retry was used up."""

    def __init__(self, message: str, *, retry_after: float | None = None, **kwargs: Any) -> None:
        self.retry_after = retry_after
        super().__init__(message, **kwargs)


class UpstreamError(ApiError):
    """5xx after every retry was used up."""


class MalformedResponseError(ApiError):
    """The body is not a usable JSON:API document (truncated, not JSON, HTML, wrong shape)."""


class TransportError(ApiError):
    """No HTTP response at all: connection refused/reset, timeout, after every retry was used up."""


class NoResponseError(TransportError):
    """The last attempt timed out (connect or read) when the attempts or the request deadline ran out: the
    service is down or hung.

    Its own type because it says something about the service, not about one request: whoever isolates
    per-item failures can stop the whole run instead of waiting out the deadline once per item."""


class WriteOutcomeUnknownError(TransportError):
    """A non-idempotent write failed in transit: the service may or may not have applied it."""

    default_hint = (
        "The request may have reached the service before the connection failed, so the write may or may "
        "not have happened. Check the current state (e.g. list the tracking requests) before sending it "
        "again, or retry with retry_safe=True only if a duplicate is harmless."
    )


def transport_error(
    kind: str, *, timed_out: bool, attempts: int, seconds: float, host: str, method: str, path: str
) -> TransportError:
    """The error for a request that got no HTTP response after its retries (`kind`: the last exception's
    class name, or what `pipelines.api.retry.lasting_failure` called it), in one line saying what happened and
    what to do: timeouts are NoResponseError (the service is not answering), a failed TLS handshake a
    TransportError about the scheme or certificate, anything else (refused, reset, DNS) a TransportError about
    reaching the host. `host` is the host alone: never a query string, never the key."""
    if timed_out:
        return NoResponseError(
            f"no response within {seconds:.0f} s ({attempts} attempt(s), {kind}): the service is not answering; "
            f"check that {host} is up, or try again later",
            method=method, path=path,
        )
    if kind.startswith("TLS"):  # pipelines.api.retry.TLS_FAILED: the scheme or the certificate, not the network
        return TransportError(
            f"{kind} with {host} ({attempts} attempt(s)): check that it serves https (for a server speaking plain "
            "http, give an http:// base URL) and that this machine trusts its certificate",
            method=method, path=path,
        )
    return TransportError(
        f"could not get a response ({kind}) after {attempts} attempt(s) in {seconds:.0f} s; check that {host} "
        "is reachable from this machine, or try again later",
        method=method, path=path,
    )


_FEATURE_WORDS = re.compile(r"not enabled|feature|entitle|subscription|plan", re.IGNORECASE)


def parse_error_objects(document: Any) -> list[ErrorObject]:
    """Read a JSON:API `{errors: [...]}` document into ErrorObjects; tolerant of any shape."""
    if not isinstance(document, Mapping):
        return []
    raw = document.get("errors")
    if isinstance(raw, Mapping):
        raw = [raw]
    if not isinstance(raw, list):
        return []
    out = []
    for item in raw:
        if not isinstance(item, Mapping):
            continue
        source = item.get("source") if isinstance(item.get("source"), Mapping) else {}
        out.append(
            ErrorObject(
                status=_str_or_none(item.get("status")),
                title=_str_or_none(item.get("title")),
                detail=_str_or_none(item.get("detail")),
                code=_str_or_none(item.get("code")),
                pointer=_str_or_none(source.get("pointer")),
                parameter=_str_or_none(source.get("parameter")),
            )
        )
    return out


def _str_or_none(value: Any) -> str | None:
    return None if value is None else str(value)


def describe_body(body: bytes, content_type: str | None) -> str:
    """Say in words what an unusable body was, without echoing it wholesale."""
    text = body[:512].decode("utf-8", errors="replace").lstrip().lower()
    ctype = (content_type or "").split(";")[0].strip() or "no content type"
    if not body:
        return f"an empty body ({ctype})"
    if text.startswith(("<!doctype html", "<html")) or "text/html" in ctype:
        return "an HTML page instead of JSON:API"
    return f"{len(body)} bytes of {ctype} that are not valid JSON (truncated or not JSON)"


def error_from_response(
    status: int, body: bytes, content_type: str | None, *, method: str, path: str, retry_after: float | None = None,
    key_help: str = API_KEY_HELP,
) -> ApiError:
    """Map an HTTP error response to the matching ApiError subclass (the vendor SDK's mapping); a 401 says to
    check the key where `key_help` says it is set."""
    document: Any = None
    try:
        document = json.loads(body) if body else None
    except ValueError:
        document = None
    errors = parse_error_objects(document)
    where = {"status": status, "method": method, "path": path, "errors": errors}

    if document is None and status == 404:
        what = describe_body(body, content_type)
        return MalformedResponseError(
            f"{what}: the route does not exist on this server",
            hint=f"Check that the base URL ends in /v2 (e.g. {DEFAULT_BASE_URL}) "
            f"({BASE_URL_ENV}) and that the path is right.",
            **where,
        )
    title = errors[0].title if errors else None
    if status == 401:
        return AuthenticationError(title or "Unauthorized", hint=rejected_key_hint(key_help), **where)
    if status == 403:
        text = " ".join(f"{e.title or ''} {e.detail or ''}" for e in errors)
        cls = FeatureNotEnabledError if _FEATURE_WORDS.search(text) or "map_geojson" in path else AuthorizationError
        return cls(title or "Forbidden", **where)
    if status == 404:
        return NotFoundError(title or "Not Found", **where)
    if status in (400, 422):
        return ValidationError(title or "The request was refused", **where)
    if status == 429:
        return RateLimitedError(
            (title or "Too Many Requests") + " (retries exhausted)", retry_after=retry_after, **where
        )
    if status >= 500:
        return UpstreamError((title or "Server error") + " (retries exhausted)", **where)
    if document is None and body:
        return MalformedResponseError(describe_body(body, content_type), **where)
    return ApiError(title or f"Unexpected HTTP status {status}", **where)


class InputError(PipelineError):
    """An input file or table cannot be used as given (unreadable, not a CSV, wrong columns, malformed
    lines, formula-like values); raised before any request is sent. The message is one line: where (file,
    line, column), what is wrong, and what to do."""


class ModelBuildError(PipelineError):
    """A dbt build of the analytics models failed: one line naming the model or test and what failed."""


def redact(text: str, *secrets: str | None) -> str:
    """`text` with every given secret (a password, a storage key) replaced by `***`, in the forms a driver may
    echo it: as given, URL-decoded and URL-encoded. The one helper every error message about a connection uses."""
    for secret in secrets:
        if secret:
            for form in sorted({secret, unquote(secret), quote(unquote(secret), safe="")}, key=len, reverse=True):
                text = text.replace(form, "***")
    return text
