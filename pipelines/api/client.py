"""The one HTTP client for extraction and write-back: Token auth, proactive limiter, retries, error mapping.

Built on dlt's `dlt.sources.helpers.requests.Client` (thread-local sessions, pooled adapter, timeouts) and
its retry pieces (`retry_if_predicate`, `wait_exponential_retry_after`, which parses `Retry-After` as seconds
or an HTTP date). dlt's stock client already retries 429, 5xx and connection errors, honouring
`Retry-After`, for every method. Two things are changed by hand in `_make_session`: (1) the limiter runs
inside the retried `send`, so *every attempt*, retries included, draws from the shared budget (urllib3-level
retries would bypass it; dlt's adapter has them off); (2) the retry decision depends on the method: dlt
retries POST on 5xx/connection errors, which could create a tracking request twice, so here a POST is
retried only on 429 (refused, nothing written), when the connection was never opened, or when the caller
passes `retry_safe=True`. Jitter is added to the backoff (`_Backoff`); retries stop at `max_attempts` or when
the next attempt could end past `request_deadline` (`RetryingClient._stop`), so a hung service fails in time.
dlt's `RESTClient` is not used: its `paginate` raises plain `HTTPError` from a response hook, which the
error mapping here (typed JSON:API errors, the key masked) could not tell apart.

Why the limiter is our own and not pyrate-limiter's: see `pipelines.api.ratelimit`.
"""

from __future__ import annotations

import json
import logging
import threading
import time
from collections import defaultdict
from collections.abc import Iterator, Mapping
from contextlib import contextmanager
from datetime import datetime
from email.utils import parsedate_to_datetime
from typing import IO, Any
from urllib.parse import urljoin, urlparse, urlunparse

import requests
from dlt.sources.helpers.requests.retry import wait_exponential_retry_after
from dlt.sources.helpers.requests.session import Session
from requests.auth import AuthBase
from requests.exceptions import ChunkedEncodingError, ContentDecodingError, Timeout

from pipelines.api.config import ApiKey, Settings, load_settings
from pipelines.api.ratelimit import SlidingWindowLimiter, bucket_for
from pipelines.api.retry import RetryingClient, excuse, lasting_failure, never_sent, parsed_body
from pipelines.compat import rewind_body_if_read
from pipelines.errors import (
    ApiError,
    MalformedResponseError,
    WriteOutcomeUnknownError,
    describe_body,
    error_from_response,
    transport_error,
)

logger = logging.getLogger(__name__)

JSONAPI = "application/vnd.api+json"
IDEMPOTENT = frozenset({"GET", "HEAD", "OPTIONS", "PUT", "PATCH", "DELETE"})
EXTERNAL = "external"


class TokenAuth(AuthBase):
    """`Authorization: Token <key>`, only for requests to the API's own origin; masks itself in repr.

    A plain requests `AuthBase` rather than dlt's `AuthConfigBase`: the latter is a configspec dataclass
    whose generated repr/fields would hold the raw key; settings are resolved in `pipelines.api.config`.
    """

    def __init__(self, api_key: ApiKey, origin: str) -> None:
        self._key = api_key
        self._origin = origin

    def __call__(self, request: requests.PreparedRequest) -> requests.PreparedRequest:
        if _origin(request.url or "") == self._origin:
            request.headers["Authorization"] = f"Token {self._key.reveal()}"
        else:
            request.headers.pop("Authorization", None)
        return request

    def __repr__(self) -> str:
        return f"TokenAuth({self._key!r}, origin={self._origin!r})"


def _origin(url: str) -> str:
    parsed = urlparse(url)
    return f"{parsed.scheme.lower()}://{parsed.netloc.lower()}"


class _Stats:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.requests: dict[str, int] = defaultdict(int)
        self.wait_seconds: dict[str, float] = defaultdict(float)
        self.retries = 0
        self.responses_429 = 0
        self.retry_sleep_seconds = 0.0

    def as_dict(self) -> dict[str, Any]:
        with self.lock:
            return {"requests": dict(self.requests), "retries": self.retries, "responses_429": self.responses_429,
                    "wait_seconds": dict(self.wait_seconds), "retry_sleep_seconds": self.retry_sleep_seconds}


class OceanTrackingClient:
    """Client for the tracking API (JSON:API v2) and for direct uploads to storage.

    Every API attempt waits on the host-wide limiter for its bucket, then is sent with Token auth; errors
    come back as `pipelines.errors.ApiError` subclasses after retries.
    """

    def __init__(
        self, settings: Settings | None = None, *, limiter: SlidingWindowLimiter | None = None, max_connections: int = 10
    ) -> None:
        self.settings = settings or load_settings()
        self.base_url = self.settings.base_url.rstrip("/")
        self._origin = _origin(self.base_url)
        self._base_path = urlparse(self.base_url).path.rstrip("/")
        self._owns_limiter = limiter is None  # a limiter handed in is its owner's to close
        self.limiter = limiter or SlidingWindowLimiter(
            self.settings.api_key.fingerprint,
            url=self.settings.limiter_location,
            window_seconds=self.settings.rate_window_seconds,
            padding=self.settings.rate_window_padding,
        )
        self._auth = TokenAuth(self.settings.api_key, self._origin)
        self._stats = _Stats()
        self._server_date: datetime | None = None
        self._http = RetryingClient(self._attempt, self.settings, self._stats, max_connections)
        self._rebase_warned = False
        self._attempt_cap = threading.local()

    def __repr__(self) -> str:
        return f"OceanTrackingClient(base_url={self.base_url!r}, key={self.settings.api_key!r})"

    def __enter__(self) -> OceanTrackingClient:
        return self

    def __exit__(self, *exc: object) -> None:
        """Close the HTTP session and, when the client made it, the rate limiter's log (its SQLite file is then
        whole on disk, not waiting for the garbage collector to close it)."""
        self.close()
        if self._owns_limiter:
            self.limiter.close()

    def close(self) -> None:
        """Close the calling thread's HTTP session (connections of other threads close with them)."""
        session = getattr(self._http._local, "session", None)
        if session is not None:
            session.close()

    # ---- public API -------------------------------------------------------------------------------

    def get(self, path: str, params: Mapping[str, Any] | None = None) -> dict[str, Any]:
        """GET a path (relative to the base URL, or `/v2/...`, or an absolute URL on the API host) → document."""
        return self._call("GET", self._resolve(path), params=params, retry_safe=True, empty_ok=False)

    def check_key(self) -> None:
        """Ask the service whether it accepts the key, with the cheapest request there is (one row of the
        account's tracking requests); raises `AuthenticationError` (401) when it does not. Before a dataset is
        told to answer to a key, so a mistyped key is never recorded as the dataset's."""
        self.get("/tracking_requests", params={"page[size]": 1})

    @property
    def origin(self) -> str:
        """Where the client sends its requests: the base URL's scheme, host and port (never a user or password
        a URL could carry), to say in messages and record beside the key's fingerprint."""
        parsed = urlparse(self.base_url)
        return f"{parsed.scheme}://{parsed.netloc.rpartition('@')[2]}"

    def paginate(self, path: str, params: Mapping[str, Any] | None = None) -> Iterator[dict[str, Any]]:
        """Yield each page's whole document (data, included, links, meta), following `links.next`.

        Stops when `next` is missing/null or a page has no data; raises MalformedResponseError if a `next`
        link repeats a page already fetched (an endless loop otherwise). Links on another host are rebased
        onto the base URL so the key is never sent elsewhere.
        """
        url = self._resolve(path)
        document = self.get(url, params)
        seen: set[str] = {requests.Request("GET", url, params=params).prepare().url or url}
        while True:
            yield document
            data = document.get("data")
            links = document.get("links") if isinstance(document.get("links"), Mapping) else {}
            next_link = links.get("next")
            if not data or not next_link or not isinstance(next_link, str):
                return
            next_url = self._resolve(urljoin(url, next_link), rebase=True)
            canonical = requests.Request("GET", next_url).prepare().url or next_url
            if canonical in seen:
                raise MalformedResponseError(
                    f"links.next repeats a page already fetched ({urlparse(canonical).path}?"
                    f"{urlparse(canonical).query}); stopping to avoid an endless loop", method="GET",
                    path=urlparse(url).path,
                )
            seen.add(canonical)
            url = next_url
            document = self._call("GET", next_url, params=None, retry_safe=True, empty_ok=False)

    def post(self, path: str, json_body: Any, *, retry_safe: bool = False) -> dict[str, Any] | None:
        """POST a JSON:API body. Retried on 5xx/connection loss only when `retry_safe` (e.g. idempotent by
        a prior existence check); otherwise such a failure raises WriteOutcomeUnknownError."""
        return self._call("POST", self._resolve(path), json_body=json_body, retry_safe=retry_safe)

    def patch(self, path: str, json_body: Any) -> dict[str, Any] | None:
        """PATCH a JSON:API body (idempotent: the same body is resent on retry)."""
        return self._call("PATCH", self._resolve(path), json_body=json_body, retry_safe=True)

    def put_raw(
        self, url: str, body: bytes | IO[bytes], headers: Mapping[str, str] | None = None
    ) -> requests.Response:
        """PUT raw bytes to an absolute storage URL (a direct-upload URL), never with the Token header.

        Retried on 5xx/connection errors when the body can be replayed (bytes or a seekable file).
        Returns the storage response; raises ApiError on a non-2xx status.
        """
        if urlparse(url).scheme not in ("http", "https"):
            raise ValueError("put_raw needs an absolute http(s) URL")
        replayable = isinstance(body, bytes | bytearray) or (hasattr(body, "seek") and hasattr(body, "tell"))
        request = requests.Request("PUT", url, data=body, headers=dict(headers or {}))
        session = self._http.session
        prepared = session.prepare_request(request)
        prepared.headers.pop("Authorization", None)
        prepared.headers.pop("Accept", None)
        prepared.t49_retry_safe = replayable  # type: ignore[attr-defined]
        prepared.t49_bucket = None  # type: ignore[attr-defined]
        path = urlparse(url).path  # the query of a signed URL is a credential: never log or raise it
        response = self._send(session, prepared, "PUT", path, retry_safe=replayable)
        if not 200 <= response.status_code < 300:
            snippet = response.content[:300].decode("utf-8", errors="replace")
            raise ApiError(
                f"storage refused the upload: {snippet}", status=response.status_code, method="PUT", path=path
            )
        return response

    def server_time(self) -> datetime | None:
        """The latest `Date` the service sent (its own clock, to the second), or None before any response.

        A write's intent is stamped with it: whatever the service creates afterwards has a `created_at` at
        or after this instant, so reconciling a lost write can look only at what was created since, in the
        service's clock, whatever the host's clock says."""
        with self._stats.lock:
            return self._server_date

    @contextmanager
    def attempts_at_most(self, attempts: int) -> Iterator[None]:
        """Within the block, requests of this thread try at most `attempts` times (the deadline still
        applies). For an item that failed its full retries in the last sync: asking again is worth a
        request or two, not another minute of retries."""
        previous = getattr(self._attempt_cap, "value", None)
        self._attempt_cap.value = attempts
        try:
            yield
        finally:
            self._attempt_cap.value = previous

    def stats(self) -> dict[str, Any]:
        """Counters since creation: requests sent per bucket (attempts, retries included), retries, 429s
        received, limiter wait seconds per bucket, seconds slept between retries."""
        return self._stats.as_dict()

    # ---- internals --------------------------------------------------------------------------------

    def _resolve(self, path: str, *, rebase: bool = False) -> str:
        parsed = urlparse(path)
        if parsed.scheme:
            if _origin(path) == self._origin:
                return path
            if not rebase:
                raise ValueError(
                    "absolute URL on another host; the API client only talks to its base URL (use put_raw)"
                )
            if not self._rebase_warned:
                logger.warning("pagination link on another host %s; rebasing onto the base URL", parsed.netloc)
                self._rebase_warned = True
            return urlunparse(urlparse(self.base_url)._replace(path=parsed.path, query=parsed.query))
        if self._base_path and (path == self._base_path or path.startswith(self._base_path + "/")):
            return self._origin + path
        return f"{self.base_url}/{path.lstrip('/')}"

    def _attempt(self, send: Any, request: requests.PreparedRequest) -> requests.Response:
        """Runs once per attempt (tenacity retries wrap this): limiter, counters, logging."""
        attempt = getattr(request, "t49_attempt", 0) + 1
        request.t49_attempt = attempt  # type: ignore[attr-defined]
        bucket = getattr(request, "t49_bucket", None)
        if attempt > 1:
            with self._stats.lock:
                self._stats.retries += 1
            rewind_body_if_read(request)
        waited, slot = self.limiter.acquire_slot(bucket) if bucket else (0.0, None)
        excuse(request, waited)
        with self._stats.lock:
            self._stats.requests[bucket or EXTERNAL] += 1
            if bucket:
                self._stats.wait_seconds[bucket] += waited
        label = f"{request.method} {urlparse(request.url or '').path}"
        try:
            response = send()
        except requests.RequestException as exc:
            if exc.request is None:
                exc.request = request
            logger.info("%s: %s (attempt %d)", label, type(exc).__name__, attempt)
            raise
        finally:
            if slot is not None:
                self.limiter.settle(slot)
        if response.status_code == 429:
            with self._stats.lock:
                self._stats.responses_429 += 1
        status = response.status_code  # a 429 means someone else spends the budget; a retried 5xx is no news
        level = logging.WARNING if status == 429 else logging.INFO if status >= 500 else logging.DEBUG
        logger.log(level, "%s -> %d (attempt %d)", label, response.status_code, attempt)
        if bucket:
            self._note_server_date(response.headers.get("Date"))
        return response

    def _note_server_date(self, header: str | None) -> None:
        try:
            seen = parsedate_to_datetime(header) if header else None
        except (TypeError, ValueError):
            return
        if seen is not None and seen.tzinfo is not None:
            with self._stats.lock:
                if self._server_date is None or seen > self._server_date:
                    self._server_date = seen

    def _call(
        self,
        method: str,
        url: str,
        *,
        params: Mapping[str, Any] | None = None,
        json_body: Any = None,
        retry_safe: bool,
        empty_ok: bool = True,
    ) -> dict[str, Any] | None:
        headers = {"Accept": JSONAPI}
        data = None
        if json_body is not None:
            headers["Content-Type"] = JSONAPI
            data = json.dumps(json_body).encode("utf-8")
        request = requests.Request(method, url, params=params, data=data, headers=headers, auth=self._auth)
        session = self._http.session
        prepared = session.prepare_request(request)
        prepared.t49_retry_safe = retry_safe or method in IDEMPOTENT  # type: ignore[attr-defined]
        prepared.t49_max_attempts = getattr(self._attempt_cap, "value", None)  # type: ignore[attr-defined]
        prepared.t49_bucket = bucket_for(method, url)  # type: ignore[attr-defined]
        path = urlparse(url).path
        response = self._send(session, prepared, method, path, retry_safe=prepared.t49_retry_safe)  # type: ignore[attr-defined]
        return self._document(response, method, path, empty_ok=empty_ok)

    def _send(
        self, session: Session, prepared: requests.PreparedRequest, method: str, path: str, *, retry_safe: bool
    ) -> requests.Response:
        started = time.monotonic()
        try:
            return session.send(prepared, allow_redirects=False)
        except (ChunkedEncodingError, ContentDecodingError) as exc:
            if method in IDEMPOTENT or retry_safe:
                raise MalformedResponseError("the response body was cut off (truncated) on every attempt",
                                             method=method, path=path) from None
            raise WriteOutcomeUnknownError("the response was cut off after the request was sent",
                                           method=method, path=path) from exc
        except requests.RequestException as exc:
            kind = lasting_failure(exc) or type(exc).__name__
            if not (method in IDEMPOTENT or retry_safe) and not never_sent(exc):
                raise WriteOutcomeUnknownError(f"{kind} during a non-idempotent request",
                                               method=method, path=path) from None
            raise transport_error(
                kind, timed_out=isinstance(exc, Timeout), attempts=getattr(prepared, "t49_attempt", 1),
                seconds=time.monotonic() - started, host=urlparse(prepared.url or "").netloc.rpartition("@")[2],
                method=method, path=path,
            ) from None

    def _document(
        self, response: requests.Response, method: str, path: str, *, empty_ok: bool
    ) -> dict[str, Any] | None:
        status = response.status_code
        ctype = response.headers.get("Content-Type")
        if status >= 300:
            raise error_from_response(
                status, response.content, ctype, method=method, path=path, retry_after=_retry_after(response),
                key_help=self.settings.account.api_key_help,
            )
        if not response.content:
            if empty_ok:
                return None
            raise MalformedResponseError("an empty body where a JSON:API document was expected", status=status,
                                         method=method, path=path)
        try:
            document = parsed_body(response)
        except ValueError:
            raise MalformedResponseError(
                describe_body(response.content, ctype), status=status, method=method, path=path
            ) from None
        if not isinstance(document, dict):
            raise MalformedResponseError(f"a JSON {type(document).__name__} instead of a JSON:API document object",
                                         status=status, method=method, path=path)
        return document


def _retry_after(response: requests.Response) -> float | None:
    header = response.headers.get("Retry-After")
    return wait_exponential_retry_after()._parse_retry_after(header) if header else None
