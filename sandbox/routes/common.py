"""Building blocks shared by the resource handlers: list and single-resource documents, body reading."""

from __future__ import annotations

from collections.abc import Sequence

from ..includes import parse_include
from ..jsonapi import (
    document,
    pagination_links,
    pagination_meta,
    parse_page,
    resolve_includes,
    self_url,
    slice_page,
)
from ..validation import envelope, parse_json
from .context import Ctx


def list_document(ctx: Ctx, seq: Sequence[dict], *, default_size: int, meta: str,
                  default_include: str | None = None, paginated: bool = True) -> dict:
    """One page of `seq` with absolute links, the endpoint's meta style and resolved includes."""
    page = parse_page(ctx.params, default_size)
    total = len(seq)
    rows = slice_page(seq, page) if paginated else list(seq)
    paths = parse_include(ctx.params.get("include", default_include), rows)
    included = resolve_includes(rows, paths, ctx.get) if paths else None
    links = pagination_links(ctx.base(), ctx.raw_query, page, total, full=paginated)
    return document(rows, links=links, meta=pagination_meta(meta, page, total) if paginated else None,
                    included=included)


def one_document(ctx: Ctx, resource: dict, default_include: str | None = None) -> dict:
    """A single resource with `links.self` echoing the request and any requested includes."""
    paths = parse_include(ctx.params.get("include", default_include), [resource])
    included = resolve_includes([resource], paths, ctx.get) if paths else None
    return document(resource, links={"self": self_url(ctx.base(), ctx.raw_query)}, included=included)


async def read_data(ctx: Ctx, type_: str) -> dict:
    """Parse the body and check its JSON:API envelope for `type_` (400/409 on failure)."""
    return envelope(parse_json(await ctx.request.body()), type_)
