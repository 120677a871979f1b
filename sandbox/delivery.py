"""Webhook delivery: signed POSTs from a small pool of daemon worker threads, one delivery in flight per
webhook (so a slow or hung receiver holds one worker at a time, never the others or the API) and each
webhook's deliveries taken in the order they were queued. Nothing here raises to its caller: a bad,
slow or unreachable URL is one failed attempt and one log line (host only: URLs may carry secrets)."""

from __future__ import annotations

import hashlib
import hmac
import logging
import queue
import threading
from collections import deque
from collections.abc import Callable
from urllib.parse import urlsplit

import requests

log = logging.getLogger("sandbox.webhooks")

SUCCESS_CODES = frozenset({200, 201, 202, 204})
CONNECT_TIMEOUT, READ_TIMEOUT = 2.0, 5.0
USER_AGENT = "Terminal49 Webhook Bot"
SIGNATURE_HEADER = "X-T49-Webhook-Signature"


def signature(secret: str, body: bytes) -> str:
    """Lowercase hex HMAC-SHA256 of the raw body keyed with the webhook's secret, as the live service signs."""
    return hmac.new(secret.encode(), body, hashlib.sha256).hexdigest()


def where(url: str) -> str:
    """`scheme://host[:port]` of a URL, for log lines (never its path or query, which may hold tokens)."""
    try:
        parts = urlsplit(url)
        return f"{parts.scheme}://{parts.hostname}" + (f":{parts.port}" if parts.port else "")
    except ValueError:
        return "<unparsable url>"


_local = threading.local()


def _session() -> requests.Session:
    """One session per worker thread (requests sessions are not thread-safe); no proxies from the
    environment, as the live service would not use the operator's proxy."""
    s = getattr(_local, "session", None)
    if s is None:
        s = _local.session = requests.Session()
        s.trust_env = False
    return s


def post(url: str, body: bytes, secret: str, custom: list[dict] | None) -> tuple[bool, str]:
    """POST `body` to `url` signed with `secret`: (delivered, what happened). Only 200/201/202/204 count as
    delivered; redirects are not followed. Never raises."""
    headers = {h["name"]: h["value"] for h in custom or ()}
    headers.update({"Content-Type": "application/json", "User-Agent": USER_AGENT,
                    SIGNATURE_HEADER: signature(secret, body)})
    try:
        with _session().post(url, data=body, headers=headers, timeout=(CONNECT_TIMEOUT, READ_TIMEOUT),
                             allow_redirects=False, stream=True) as resp:
            status = resp.status_code
        return status in SUCCESS_CODES, f"HTTP {status}"
    except requests.Timeout:
        return False, "timeout"
    except requests.ConnectionError:
        return False, "connection refused or reset"
    except Exception as exc:  # a malformed URL, an unsupported scheme, anything: one failed attempt
        return False, exc.__class__.__name__


class Deliverer:
    """Per-key FIFO queues served by `workers` daemon threads, at most one job per key at a time; keys take
    turns (a key goes back to the end of the ready queue after each job), so one busy key never starves
    the others. Threads start with the first job and end on `stop()`."""

    def __init__(self, workers: int = 16) -> None:
        self.workers = workers
        self._queues: dict[str, deque[tuple[Callable[[], None], threading.Event]]] = {}
        self._ready: queue.SimpleQueue[str | None] = queue.SimpleQueue()
        self._lock = threading.Lock()
        self._threads: list[threading.Thread] = []
        self._stopped = threading.Event()

    def submit(self, key: str, job: Callable[[], None]) -> threading.Event:
        """Queue `job` behind `key`'s earlier jobs; the returned event is set once it has run."""
        done = threading.Event()
        with self._lock:
            if self._stopped.is_set():
                done.set()
                return done
            if not self._threads:
                for k in range(self.workers):
                    t = threading.Thread(target=self._work, name=f"sandbox-webhook-{k}", daemon=True)
                    t.start()
                    self._threads.append(t)
            q = self._queues.get(key)
            if q is None:
                q = self._queues[key] = deque()
                self._ready.put(key)
            q.append((job, done))
        return done

    def _work(self) -> None:
        while not self._stopped.is_set():
            key = self._ready.get()
            if key is None:
                return
            with self._lock:
                q = self._queues.get(key)
                if not q:
                    continue
                job, done = q.popleft()
            try:
                job()
            except Exception:  # a job never takes a worker down
                log.exception("webhook delivery job failed")
            finally:
                done.set()
            with self._lock:
                if self._queues.get(key):
                    self._ready.put(key)
                else:
                    self._queues.pop(key, None)

    def stop(self) -> None:
        """Stop the workers (after their current job); queued jobs are dropped and marked done."""
        with self._lock:
            self._stopped.set()
            for q in self._queues.values():
                for _job, done in q:
                    done.set()
            self._queues.clear()
            for _ in self._threads:
                self._ready.put(None)
