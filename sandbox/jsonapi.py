"""JSON:API documents: responses, error documents, page parameters, pagination `links`/`meta` per
endpoint style (as the live captures show) and `include=` resolution through `Account.get` (paths are
parsed and checked by sandbox.includes)."""

from __future__ import annotations

import json
import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, quote

from starlette.responses import Response

CONTENT_TYPE = "application/vnd.api+json"
MAX_PAGE_SIZE = 100
_SAFE = "[],:@!$'()*;/?"


class ApiResponse(Response):
    """A JSON body served as `application/vnd.api+json` (compact, UTF-8)."""

    media_type = CONTENT_TYPE

    def render(self, content: Any) -> bytes:
        return json.dumps(content, separators=(",", ":"), ensure_ascii=False).encode()


class ApiError(Exception):
    """Raised anywhere in a handler to answer with a JSON:API error document."""

    def __init__(self, status: int, errors: list[dict], headers: dict[str, str] | None = None):
        super().__init__(f"{status}: {errors}")
        self.status = status
        self.errors = errors
        self.headers = headers or {}


def error(status: int, title: str, detail: str | None = None, *, pointer: str | None = None,
          parameter: str | None = None, code: str | None = None) -> dict:
    """One JSON:API error object with the service's fields (status as a string, optional source/code)."""
    err: dict[str, Any] = {"status": str(status), "title": title, "detail": detail}
    if pointer is not None:
        err["source"] = {"pointer": pointer}
    elif parameter is not None:
        err["source"] = {"parameter": parameter}
    if code is not None:
        err["code"] = code
    return err


def api_error(status: int, title: str, detail: str | None = None, **kw: Any) -> ApiError:
    """Shorthand for an ApiError carrying a single error object."""
    return ApiError(status, [error(status, title, detail, **kw)])


def error_response(exc: ApiError) -> ApiResponse:
    """Render an ApiError as its JSON:API document."""
    return ApiResponse({"errors": exc.errors}, status_code=exc.status, headers=exc.headers)


def not_found(kind: str, id_: str) -> ApiError:
    """The JSON:API 404 for an unknown id on a known route (unknown routes get the HTML page instead)."""
    return api_error(404, "Not Found", f"Couldn't find {kind} with id '{id_}'")


# --- query strings and links -------------------------------------------------------------------

def query_pairs(raw_query: str) -> list[tuple[str, str]]:
    """Decode a raw query string into (key, value) pairs, keeping order and blanks."""
    return parse_qsl(raw_query, keep_blank_values=True)


def encode_query(pairs: Iterable[tuple[str, str]]) -> str:
    """Encode like the live service's links: brackets and commas stay literal."""
    return "&".join(f"{quote(k, safe=_SAFE)}={quote(v, safe=_SAFE)}" for k, v in pairs)


@dataclass(frozen=True)
class Page:
    """The requested page: `number` (1-based), `size` (capped at 100) and whether size was sent."""

    number: int
    size: int
    size_given: bool


def _int(value: str | None) -> int | None:
    try:
        return int(value) if value is not None else None
    except ValueError:
        return None


def parse_page(params: dict[str, str], default_size: int) -> Page:
    """Read page[number]/page[size]; invalid values fall back to defaults, sizes above 100 are capped."""
    number = _int(params.get("page[number]"))
    size = _int(params.get("page[size]"))
    return Page(
        number=number if number and number > 0 else 1,
        size=min(size, MAX_PAGE_SIZE) if size and size > 0 else default_size,
        size_given=size is not None and size > 0,
    )


def page_url(base: str, pairs: list[tuple[str, str]], page: Page, number: int) -> str:
    """An absolute page link: the request's other params (sorted) plus the page params."""
    kept = sorted((k, v) for k, v in pairs if k not in ("page[number]", "page[size]"))
    kept.append(("page[number]", str(number)))
    if page.size_given:
        kept.append(("page[size]", str(page.size)))
    kept.sort(key=lambda kv: kv[0])
    return f"{base}?{encode_query(kept)}"


def self_url(base: str, raw_query: str) -> str:
    """`links.self`: the request URL echoed as received."""
    return f"{base}?{raw_query}" if raw_query else base


def pagination_links(base: str, raw_query: str, page: Page, total: int, *, full: bool = True) -> dict:
    """self/current always; next/last (and first/prev after page 1) when `full`."""
    pairs = query_pairs(raw_query)
    last = max(1, math.ceil(total / page.size))
    links = {"self": self_url(base, raw_query), "current": page_url(base, pairs, page, page.number)}
    if not full:
        return links
    if page.number > 1:
        links["first"] = page_url(base, pairs, page, 1)
        links["prev"] = page_url(base, pairs, page, min(page.number - 1, last))
    if page.number < last:
        links["next"] = page_url(base, pairs, page, page.number + 1)
    links["last"] = page_url(base, pairs, page, last)
    return links


def pagination_meta(style: str, page: Page, total: int) -> dict | None:
    """Per-endpoint meta: "shipments" {total,size}, "containers" {total}, "pagination"
    {size,total,pagination:{current,next,last,records}}, "none" (no meta)."""
    if style == "shipments":
        return {"total": total, "size": page.size}
    if style == "containers":
        return {"total": total}
    if style == "pagination":
        last = max(1, math.ceil(total / page.size))
        return {"size": page.size, "total": total, "pagination": {
            "current": page.number, "next": page.number + 1 if page.number < last else None,
            "last": last, "records": total}}
    return None


def slice_page(seq: Sequence[dict], page: Page) -> list[dict]:
    """The rows of one page, slicing the lazy sequence (other rows are never built)."""
    start = (page.number - 1) * page.size
    return list(seq[start:start + page.size])


# --- include -----------------------------------------------------------------------------------

def _identifiers(resource: dict, rel: str) -> list[dict]:
    data = ((resource.get("relationships") or {}).get(rel) or {}).get("data")
    if data is None:
        return []
    return [d for d in (data if isinstance(data, list) else [data]) if isinstance(d, dict) and d.get("id")]


def resolve_includes(primary: list[dict], paths: list[list[str]], get: Callable[[str, str], dict | None]) -> list[dict]:
    """Follow each relationship path from the primary resources; return the full resources, deduplicated
    by (type, id) and excluding the primary ones. Each level holds every resource once, so a cyclic path
    (`containers.shipment.containers`) costs one lookup per distinct resource, not one per route to it.
    Relationship names a resource does not carry are skipped (sandbox.includes refuses unknown ones)."""
    seen = {(r["type"], r["id"]) for r in primary}
    included: list[dict] = []
    cache: dict[tuple[str, str], dict | None] = {}
    for path in paths:
        level = primary
        for rel in path:
            nxt: dict[tuple[str, str], dict] = {}
            for res in level:
                for ident in _identifiers(res, rel):
                    key = (ident["type"], ident["id"])
                    if key in nxt:
                        continue
                    if key not in cache:
                        cache[key] = get(*key)
                    found = cache[key]
                    if found is None:
                        continue
                    nxt[key] = found
                    if key not in seen:
                        seen.add(key)
                        included.append(found)
            level = list(nxt.values())
    return included


def document(data: Any, *, links: dict | None = None, meta: dict | None = None,
             included: list[dict] | None = None) -> dict:
    """Assemble a top-level document; `included` appears only when an include was asked for."""
    doc: dict[str, Any] = {"data": data}
    if included is not None:
        doc["included"] = included
    if links is not None:
        doc["links"] = links
    if meta is not None:
        doc["meta"] = meta
    return doc
