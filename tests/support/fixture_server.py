"""A real HTTP server (stdlib, loopback, own thread) that answers from the CAPTURED LIVE FIXTURES of the
Terminal49 API (`shared/reference/terminal49/fixtures/`, anonymised real responses; see API-NOTES.md).

It is deliberately dumb, like a recording: it serves the captured bodies, and only adapts them where a
recording cannot be replayed as is:

- `GET /v2/shipments`: the list shape of `sdk/shipments.list.json` (meta/links) with the item and the
  `included` array of `sdk/shipments.get.include.json` (the live capture of the include the SDK uses).
  `included` only holds what the request's `include=` paths reach from the data (an include path the
  capture has no resources for, such as `containers.transport_events`, yields nothing: the server is no
  smarter than the recording). `links.next`/`last` are dropped and `meta.total` is the served count: one
  page.
- `GET /v2/containers/{id}/transport_events`: `sdk/containers.events.json`; its capture asked for
  `include=location,terminal`, so `included` is again cut to what the request's own `include=` asks for.
- `GET /v2/containers/{id}/map_geojson`: there is no live map capture (`cli/containers.map.error.json`,
  and `sdk/containers.route.json` is hand-made and not a map), so it answers what the real service
  answers without the Routing Data entitlement: 403 `Routing data feature is not enabled for this account`.
- `GET /v2/tracking_requests`: `sdk/tracking-requests.list.json`, one page; `filter[updated_at][start]`
  is honoured (the one updated-since filter the live service has).
- `GET /v2/parties`: the inner payload of `cli/parties.list.json` (the CLI wraps it in `{"ok","data"}`).
- `GET /v2/shipping_lines`: `sdk/shipping-lines.list.json` AS CAPTURED: its `links.next` points to page 2
  on https://api.terminal49.com, which the client rebases onto its base URL; page 2 is served as an
  empty `data: []` page, so the client stops on "no data" and rebasing is exercised against a real link.
- `GET /v2/ports/{id}`, `/v2/terminals/{id}`, `/v2/vessels/{id}`: `sdk/ports.get.json`,
  `sdk/terminals.get.json`, the inner payload of `cli/vessels.get-by-imo.json`, for ANY id. The anonymiser
  renamed ids per capture (`port-1`, `terminal-1`, ...) without keeping them consistent across captures
  (`attributes.id` and `links.self` even show other values), so no id maps reliably to a body: the body's
  own `data.id` is what a client receives, whatever it asked for.
- `GET /v2/custom_field_definitions`: the inner payload of `cli/custom-field-definitions.list.json`.
- `GET /v2/custom_fields`: the live 500 of `cli/custom-fields.list.error.json` (API-NOTES §12.13), every
  time: the list the pipeline must survive failing.
- Anything else: the Rails HTML 404 page of `cli/containers.route.error.json`, status 404, like the live
  service answers an unknown route.

Every API request must carry `Authorization: Token <key>` (else 401 JSON:API). Requests are recorded
(method, path, query; never headers) in `requests_seen`.
"""

from __future__ import annotations

import copy
import json
import re
import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlparse

from tests.support.sandboxes import shared_dir

JSONAPI = "application/vnd.api+json"
FEATURE_NOT_ENABLED = {
    "errors": [
        {"status": "403", "title": "Forbidden", "detail": "Routing data feature is not enabled for this account"}
    ]
}
UNAUTHORIZED = {"errors": [{"status": "401", "title": "Unauthorized", "detail": "Invalid or missing API key"}]}


def fixtures_dir(shared: Path | None = None) -> Path:
    """`<shared>/reference/terminal49/fixtures` (`shared`, else `tests.support.sandboxes.shared_dir()`)."""
    return (shared or shared_dir()) / "reference" / "terminal49" / "fixtures"


class Fixtures:
    """The captured documents, loaded once; every accessor returns a fresh deep copy."""

    def __init__(self, root: Path | None = None) -> None:
        self.root = root or fixtures_dir()
        self._cache: dict[str, Any] = {}

    def raw(self, name: str) -> Any:
        """A fixture file as captured (`sdk/...json` or `cli/...json`)."""
        if name not in self._cache:
            self._cache[name] = json.loads((self.root / name).read_text(encoding="utf-8"))
        return copy.deepcopy(self._cache[name])

    def cli_payload(self, name: str) -> dict[str, Any]:
        """The inner API document of a CLI capture (`{"ok": true, "data": <document>}`)."""
        wrapped = self.raw(name)
        if not wrapped.get("ok"):
            raise ValueError(f"{name} is a failed CLI capture, it holds no API document")
        return wrapped["data"]

    def html_404(self) -> str:
        """The live service's HTML 404 page, as captured for an unknown route."""
        return self.raw("cli/containers.route.error.json")["error"]["message"]


# ---- JSON:API helpers ---------------------------------------------------------------------------------


def _include_paths(query: Mapping[str, list[str]]) -> list[list[str]]:
    values = query.get("include", [])
    return [path.split(".") for value in values for path in value.split(",") if path.strip()]


def _linkage(resource: Mapping[str, Any], relationship: str) -> list[tuple[str, str]]:
    rel = (resource.get("relationships") or {}).get(relationship) or {}
    data = rel.get("data")
    if data is None:
        return []
    items = data if isinstance(data, list) else [data]
    return [(item["type"], item["id"]) for item in items if isinstance(item, Mapping)]


def resolve_included(
    primary: Iterable[Mapping[str, Any]], pool: Iterable[Mapping[str, Any]], include: list[list[str]]
) -> list[dict[str, Any]]:
    """The members of `pool` (a capture's `included`) that the `include` paths reach from `primary`, in
    pool order. A path segment whose targets the capture lacks reaches nothing."""
    by_key = {(item["type"], item["id"]): item for item in pool}
    primary = list(primary)
    reached: set[tuple[str, str]] = set()
    for path in include:
        current = primary
        for segment in path:
            following = []
            for resource in current:
                for key in _linkage(resource, segment):
                    if key in by_key:
                        reached.add(key)
                        following.append(by_key[key])
            current = following
    return [dict(item) for key, item in by_key.items() if key in reached]


def one_page(document: dict[str, Any]) -> dict[str, Any]:
    """Make a captured first page the only page: no `next`/`last`, counts that match the served rows."""
    links = document.get("links") or {}
    links.pop("next", None)
    links.pop("last", None)
    rows = len(document.get("data") or [])
    meta = document.get("meta")
    if isinstance(meta, dict):
        if "total" in meta:
            meta["total"] = rows
        if isinstance(meta.get("pagination"), dict):
            meta["pagination"] = {"current": 1, "next": None, "last": 1, "records": rows}
    return document


# ---- the served documents (also what the tests compute their expectations from) ----------------------


def shipments_document(fx: Fixtures, include: list[list[str]]) -> dict[str, Any]:
    """`/shipments`: list shape of shipments.list.json, item + included of shipments.get.include.json."""
    listing = fx.raw("sdk/shipments.list.json")
    detail = fx.raw("sdk/shipments.get.include.json")
    data = [detail["data"]]
    document = {"data": data, "meta": listing["meta"], "links": listing["links"]}
    included = resolve_included(data, detail.get("included", []), include)
    if included:
        document["included"] = included
    return one_page(document)


def transport_events_document(fx: Fixtures, include: list[list[str]]) -> dict[str, Any]:
    """`/containers/{id}/transport_events`: containers.events.json with `included` cut to the request."""
    document = fx.raw("sdk/containers.events.json")
    included = resolve_included(document["data"], document.pop("included", []), include)
    if included:
        document["included"] = included
    return document


def tracking_requests_document(fx: Fixtures, updated_since: str | None) -> dict[str, Any]:
    """`/tracking_requests`: the capture, rows updated at/after `filter[updated_at][start]`, no included
    unless asked (the source never asks)."""
    document = fx.raw("sdk/tracking-requests.list.json")
    document.pop("included", None)
    if updated_since:
        # ISO-8601 UTC with Z compares correctly as text
        document["data"] = [r for r in document["data"] if r["attributes"].get("updated_at", "") >= updated_since]
    return one_page(document)


def parties_document(fx: Fixtures) -> dict[str, Any]:
    """`/parties`: the inner document of the CLI capture, one page."""
    return one_page(fx.cli_payload("cli/parties.list.json"))


def shipping_lines_document(fx: Fixtures, page: int) -> dict[str, Any]:
    """`/shipping_lines`: page 1 as captured (its `next` points to page 2 on the live host), page 2 empty."""
    document = fx.raw("sdk/shipping-lines.list.json")
    if page == 1:
        return document
    links = {key: document["links"][key] for key in ("self", "current") if key in document["links"]}
    links["current"] = re.sub(r"page\[number\]=\d+", f"page[number]={page}", links.get("current", ""))
    return {"data": [], "links": links}


BY_ID = {
    "ports": ("sdk/ports.get.json", None),
    "terminals": ("sdk/terminals.get.json", None),
    "vessels": (None, "cli/vessels.get-by-imo.json"),
}


def by_id_document(fx: Fixtures, collection: str) -> dict[str, Any]:
    """A by-id body for any id (the anonymised ids are not consistent across captures)."""
    sdk_name, cli_name = BY_ID[collection]
    return fx.raw(sdk_name) if sdk_name else fx.cli_payload(cli_name)


# ---- the server ---------------------------------------------------------------------------------------


@dataclass
class SeenRequest:
    """One request as received (no headers: they hold the key)."""

    method: str
    path: str
    query: dict[str, list[str]]
    status: int


@dataclass
class LiveFixtureServer:
    """The fixture server on 127.0.0.1 (a free port), serving until `stop()`; usable as a context manager."""

    api_key: str
    fixtures: Fixtures = field(default_factory=Fixtures)
    requests_seen: list[SeenRequest] = field(default_factory=list)

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    @property
    def root_url(self) -> str:
        assert self._httpd is not None, "server not started"
        host, port = self._httpd.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def base_url(self) -> str:
        return f"{self.root_url}/v2"

    @property
    def app_url(self) -> str:
        return f"{self.root_url}/app"

    def start(self) -> LiveFixtureServer:
        server = self

        class Handler(_Handler):
            owner = server

        self._httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self._httpd.daemon_threads = True
        self._thread = threading.Thread(target=self._httpd.serve_forever, name="live-fixture-server", daemon=True)
        self._thread.start()
        return self

    def stop(self) -> None:
        if self._httpd is not None:
            self._httpd.shutdown()
            self._httpd.server_close()
            self._httpd = None
        if self._thread is not None:
            self._thread.join(timeout=10)
            self._thread = None

    def __enter__(self) -> LiveFixtureServer:
        return self.start()

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def record(self, seen: SeenRequest) -> None:
        with self._lock:
            self.requests_seen.append(seen)

    def paths(self, prefix: str = "") -> list[str]:
        """Paths requested so far (optionally only those starting with `prefix`)."""
        with self._lock:
            return [r.path for r in self.requests_seen if r.path.startswith(prefix)]

    # -- routing: (status, content type, body) ---------------------------------------------------------

    def route(self, method: str, path: str, query: dict[str, list[str]]) -> tuple[int, str, bytes]:
        fx = self.fixtures
        include = _include_paths(query)
        parts = [p for p in path.split("/") if p]
        document: dict[str, Any] | None = None
        status = 200
        if method == "GET" and parts[:1] == ["v2"]:
            rest = parts[1:]
            if rest == ["shipments"]:
                document = shipments_document(fx, include)
            elif rest == ["tracking_requests"]:
                document = tracking_requests_document(fx, (query.get("filter[updated_at][start]") or [None])[0])
            elif rest == ["parties"]:
                document = parties_document(fx)
            elif rest == ["custom_field_definitions"]:
                document = one_page(fx.cli_payload("cli/custom-field-definitions.list.json"))
            elif rest == ["custom_fields"]:
                status, document = 500, fx.raw("cli/custom-fields.list.error.json")["error"]["details"]
            elif rest == ["shipping_lines"]:
                document = shipping_lines_document(fx, int((query.get("page[number]") or ["1"])[0]))
            elif len(rest) == 3 and rest[0] == "containers" and rest[2] == "transport_events":
                document = transport_events_document(fx, include)
            elif len(rest) == 3 and rest[0] == "containers" and rest[2] == "map_geojson":
                status, document = 403, FEATURE_NOT_ENABLED
            elif len(rest) == 2 and rest[0] in BY_ID:
                document = by_id_document(fx, rest[0])
        if document is None:
            return 404, "text/html; charset=utf-8", fx.html_404().encode("utf-8")
        return status, JSONAPI, json.dumps(document).encode("utf-8")


class _Handler(BaseHTTPRequestHandler):
    owner: LiveFixtureServer
    protocol_version = "HTTP/1.1"

    def _handle(self) -> None:
        url = urlparse(self.path)
        query = parse_qs(url.query, keep_blank_values=True)
        length = int(self.headers.get("Content-Length") or 0)
        if length:
            self.rfile.read(length)
        if self.headers.get("Authorization") != f"Token {self.owner.api_key}":
            status, ctype, body = 401, JSONAPI, json.dumps(UNAUTHORIZED).encode("utf-8")
        else:
            status, ctype, body = self.owner.route(self.command, url.path, query)
        self.owner.record(SeenRequest(self.command, url.path, query, status))
        self.send_response(status)
        self.send_header("Content-Type", ctype)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PATCH = do_PUT = do_DELETE = _handle

    def log_message(self, format: str, *args: Any) -> None:
        pass  # keep test output (and captured logs) quiet
