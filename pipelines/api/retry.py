"""When the API client retries, and for how long: the policy tenacity runs around every send.

- What is retried: 429 for every method (refused before processing); 5xx, connection errors, timeouts and
  unparseable 2xx bodies only when the request is safe to repeat (idempotent, or the caller said so), or,
  for connection errors, when the connection was never opened.
- How long: `backoff_factor`, then `BACKOFF_CAP` x `backoff_factor` (plus jitter), or the `Retry-After` a
  429 asked for; until `max_attempts` (or a lower cap for one call, `OceanTrackingClient.attempts_at_most`),
  or until the next attempt could end past `request_deadline` (see `RetryingClient._stop`). A connection
  refused or a failed TLS handshake gets `FAST_FAIL_ATTEMPTS` at most (`lasting_failure`).
- Every attempt, retries included, goes through the client's attempt hook, where the rate limiter runs.

Split from `pipelines.api.client`, which maps the outcome (errors, documents) once the retries are done.
"""

from __future__ import annotations

import json
import logging
from typing import Any

import orjson
import requests
import urllib3.exceptions
from dlt.sources.helpers.requests.retry import Client, retry_if_predicate, wait_exponential_retry_after
from dlt.sources.helpers.requests.session import Session
from requests.exceptions import ChunkedEncodingError, ConnectTimeout, ContentDecodingError, Timeout
from tenacity import RetryCallState, Retrying, wait_exponential, wait_random

from pipelines.api.config import Settings

logger = logging.getLogger(__name__)

RETRYABLE_EXCEPTIONS = (requests.ConnectionError, Timeout, ChunkedEncodingError, ContentDecodingError)
BACKOFF_CAP = 2.0  # x backoff_factor: see _Backoff
# Attempts for a connection refused or a TLS handshake that failed (about 3 s with the default backoff): a
# service restarting refuses for a moment, but a wrong port or scheme refuses for ever; either way the user
# hears it in seconds, not after the whole deadline.
FAST_FAIL_ATTEMPTS = 3
REFUSED = "connection refused"
TLS_FAILED = "TLS handshake failed"


def never_sent(exc: BaseException) -> bool:
    """True when the connection failed before any byte of the request could reach the server."""
    if isinstance(exc, ConnectTimeout):
        return True
    reason = getattr(exc.args[0], "reason", None) if exc.args else None
    return isinstance(reason, urllib3.exceptions.NewConnectionError | urllib3.exceptions.NameResolutionError)


def lasting_failure(exc: BaseException) -> str | None:
    """What went wrong when retrying soon is unlikely to help, unlike a reset or a timeout: the connection was
    refused (nothing listens on the port) or the TLS handshake failed (an https:// URL for a server speaking
    plain http, a certificate refused); None for anything else."""
    if isinstance(exc, requests.exceptions.SSLError):
        return TLS_FAILED
    cause = getattr(exc.args[0], "reason", None) if exc.args else None
    while cause is not None:
        if isinstance(cause, ConnectionRefusedError):
            return REFUSED
        cause = cause.__cause__ or cause.__context__
    return None


def parsed_body(response: requests.Response) -> Any:
    """The JSON body, parsed once and cached on the response; raises ValueError when it is not JSON.

    orjson parses a page of 100 shipments with their includes about twice as fast as `json`
    (`bench/hot_path.py`); what it refuses (integers past 64 bits, NaN) goes to `json`, the judge of
    what is JSON."""
    cached = getattr(response, "t49_json", _MISSING)
    if cached is _MISSING:
        cached = _loads(response.content) if response.content else None
        response.t49_json = cached  # type: ignore[attr-defined]
    return cached


_MISSING = object()


def _loads(body: bytes) -> Any:
    try:
        return orjson.loads(body)
    except orjson.JSONDecodeError:
        return json.loads(body)


def _unparseable(response: requests.Response) -> bool:
    try:
        parsed_body(response)
    except ValueError:
        return True
    return False


def _should_retry(response: requests.Response | None, exception: BaseException | None) -> bool:
    request = response.request if response is not None else getattr(exception, "request", None)
    safe = bool(getattr(request, "t49_retry_safe", False))
    if exception is not None:
        return isinstance(exception, RETRYABLE_EXCEPTIONS) and (safe or never_sent(exception))
    if response is None:
        return False
    status = response.status_code
    if status == 429:
        return True  # refused before processing: safe for every method
    if status >= 500:
        return safe
    return 200 <= status < 300 and safe and _unparseable(response)



class _LimitedSession(Session):
    """dlt's Session whose `send` (the thing tenacity retries) goes through the client's attempt hook."""

    def __init__(self, hook: Any, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self._hook = hook

    def send(self, request: requests.PreparedRequest, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        return self._hook(lambda: Session.send(self, request, **kwargs), request)


class _Backoff(wait_exponential_retry_after):
    """`Retry-After` when the response has one (capped by max_retry_delay); else backoff_factor, then
    BACKOFF_CAP x backoff_factor for every later retry. Faults come in short bursts (the sandbox counts them
    in attempts) or outages of some seconds: either way many attempts spread over the deadline ride them out,
    where a few ever longer sleeps would spend it sleeping."""

    def __init__(self, settings: Settings) -> None:
        super().__init__(multiplier=settings.backoff_factor, max=settings.max_retry_delay)
        self._cap = BACKOFF_CAP * settings.backoff_factor

    def __call__(self, retry_state: RetryCallState) -> float:
        told = self._get_retry_after(retry_state)
        return told if told is not None else min(wait_exponential.__call__(self, retry_state), self._cap)


def _rate_limited(state: RetryCallState) -> bool:
    outcome = state.outcome
    return outcome is not None and not outcome.failed and outcome.result().status_code == 429


class RetryingClient(Client):
    """dlt Client with the method-aware, limiter-inside retry described in the module docstring."""

    def __init__(self, hook: Any, settings: Settings, stats: Any, max_connections: int) -> None:
        self._hook = hook
        self._settings = settings
        self._stats = stats
        super().__init__(
            request_timeout=(settings.connect_timeout, settings.read_timeout), max_connections=max_connections,
            raise_for_status=False, request_max_attempts=settings.max_attempts,
            request_backoff_factor=settings.backoff_factor, request_max_retry_delay=settings.max_retry_delay,
        )

    def _make_session(self) -> Session:
        session = _LimitedSession(self._hook, **self._session_kwargs)
        session.mount("http://", self._adapter)
        session.mount("https://", self._adapter)
        s = self._settings
        retry = Retrying(
            wait=_Backoff(s) + wait_random(0, max(s.backoff_factor, 0.0)), retry=retry_if_predicate(_should_retry),
            stop=self._stop, reraise=True, retry_error_callback=lambda state: state.outcome.result(),
            before_sleep=self._before_sleep,
        )
        session.send = retry.wraps(session.send)  # type: ignore[method-assign]
        return session

    def _stop(self, state: RetryCallState) -> bool:
        """Stop at max_attempts, or when the next attempt (up to connect + read timeout) after its sleep could
        end past request_deadline: a hung service fails the request within the deadline. Not counted
        (`t49_excused`): waits on our own limiter and waits a 429's `Retry-After` asked for. They are the
        rate budget, not the service hanging; counting them would turn a 60 s Retry-After or a full rate
        window into a failure instead of the recovery it is. 429s stay bounded by max_attempts (each wait
        by max_retry_delay) and end in RateLimitedError."""
        s = self._settings
        attempts = getattr(state.args[0], "t49_max_attempts", None) or s.max_attempts
        outcome = state.outcome
        if outcome is not None and outcome.failed and lasting_failure(outcome.exception()):
            attempts = min(attempts, FAST_FAIL_ATTEMPTS)
        if state.attempt_number >= attempts:
            return True
        busy = (state.seconds_since_start or 0.0) - getattr(state.args[0], "t49_excused", 0.0)
        sleep = 0.0 if _rate_limited(state) else state.upcoming_sleep
        return busy + sleep + s.connect_timeout + s.read_timeout > s.request_deadline

    def _before_sleep(self, state: RetryCallState) -> None:
        delay = state.next_action.sleep if state.next_action else 0.0
        if _rate_limited(state):
            excuse(state.args[0], delay)
        with self._stats.lock:
            self._stats.retry_sleep_seconds += delay
        logger.info("retrying in %.2f s (attempt %d failed)", delay, state.attempt_number)



def excuse(request: requests.PreparedRequest, seconds: float) -> None:
    """Add time the request's deadline does not count (see `RetryingClient._stop`)."""
    request.t49_excused = getattr(request, "t49_excused", 0.0) + seconds  # type: ignore[attr-defined]
