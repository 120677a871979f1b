"""JSON:API documents: pagination links/meta per endpoint, the 100 cap, include (nested, dedup),
unknown filters ignored, and the HTML 404 for unknown routes."""

from __future__ import annotations

import math
from urllib.parse import unquote

import requests

from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY


def c(sandbox) -> Client:
    return Client(sandbox.base_url, FULL_KEY)


def test_shipments_meta_and_links(sandbox):
    body = ok(c(sandbox).get("/shipments?page[size]=7"))
    total = body["meta"]["total"]
    assert set(body["meta"]) == {"total", "size"} and body["meta"]["size"] == 7
    assert len(body["data"]) == 7
    links = body["links"]
    b = sandbox.base_url
    assert unquote(links["self"]) == f"{b}/shipments?page[size]=7"  # echoes the request as sent
    assert links["current"] == f"{b}/shipments?page[number]=1&page[size]=7"
    assert links["next"] == f"{b}/shipments?page[number]=2&page[size]=7"
    assert links["last"] == f"{b}/shipments?page[number]={math.ceil(total / 7)}&page[size]=7"
    assert "first" not in links and "prev" not in links


def test_default_sizes(own_sandbox):
    assert ok(c(own_sandbox).get("/shipments"))["meta"]["size"] == 30
    assert len(ok(c(own_sandbox).get("/containers"))["data"]) == 30
    c(own_sandbox).post("/parties", {"data": {"type": "party", "attributes": {"company_name": "Acme"}}})
    assert ok(c(own_sandbox).get("/parties"))["meta"]["size"] == 25


def test_later_page_has_first_and_prev_and_walks_all(sandbox):
    cl = c(sandbox)
    body = ok(cl.get("/containers?page[size]=25"))
    total, seen, url = body["meta"]["total"], [], cl.url("/containers?page[size]=25")
    while url:
        page = ok(cl.get(url))
        seen += [r["id"] for r in page["data"]]
        if page["links"]["current"] != page["links"]["last"]:
            assert "first" in page["links"] or "page[number]=1&" in page["links"]["current"]
        url = page["links"].get("next")
    assert len(seen) == total == len(set(seen))
    second = ok(cl.get("/containers?page[number]=2&page[size]=25"))
    assert second["links"]["prev"].endswith("page[number]=1&page[size]=25")
    assert second["links"]["first"].endswith("page[number]=1&page[size]=25")
    assert set(second["meta"]) == {"total"}


def test_page_size_capped_at_100(sandbox):
    body = ok(c(sandbox).get("/shipments?page[size]=500"))
    assert body["meta"]["size"] == 100
    assert len(body["data"]) == min(100, body["meta"]["total"])
    assert "page[size]=100" in body["links"]["current"]


def test_links_carry_the_whole_query_unencoded(sandbox):
    body = ok(c(sandbox).get("/shipments?include=containers,port_of_lading&page[size]=2&filter[bogus]=x"))
    nxt = body["links"]["next"]
    assert "include=containers,port_of_lading" in nxt and "filter[bogus]=x" in nxt and "%5B" not in nxt


def test_unknown_filter_silently_ignored(sandbox):
    plain = ok(c(sandbox).get("/shipments"))
    filtered = ok(c(sandbox).get("/shipments?filter[status]=nonsense&filter[pod_locode]=ZZZZZ"))
    assert filtered["meta"]["total"] == plain["meta"]["total"]
    assert [r["id"] for r in filtered["data"]] == [r["id"] for r in plain["data"]]


def test_tracking_requests_and_parties_meta(own_sandbox):
    cl = c(own_sandbox)
    for name in ("P1", "P2", "P3"):
        ok(cl.post("/parties", {"data": {"type": "party", "attributes": {"company_name": name}}}), 201)
    body = ok(cl.get("/parties?page[size]=2"))
    meta = body["meta"]
    assert meta["size"] == 2 and meta["total"] >= 3
    assert meta["pagination"] == {"current": 1, "next": 2, "last": math.ceil(meta["total"] / 2),
                                  "records": meta["total"]}
    body = ok(cl.get("/tracking_requests?page[size]=1"))
    assert set(body["meta"]) == {"size", "total", "pagination"}


def test_shipping_lines_paginated_with_next(sandbox):
    body = ok(c(sandbox).get("/shipping_lines"))
    assert body["links"]["self"] == f"{sandbox.base_url}/shipping_lines"
    assert body["links"]["current"] == f"{sandbox.base_url}/shipping_lines?page[number]=1"
    assert body["links"]["next"] == f"{sandbox.base_url}/shipping_lines?page[number]=2"
    assert "meta" not in body
    rest = ok(c(sandbox).get(body["links"]["next"]))
    assert rest["data"] and "next" not in rest["links"]


def test_include_full_resources_deduplicated(sandbox):
    body = ok(c(sandbox).get("/shipments?include=containers,port_of_lading&page[size]=10"))
    keys = [(r["type"], r["id"]) for r in body["included"]]
    assert len(keys) == len(set(keys))
    wanted = {(d["type"], d["id"]) for s in body["data"] for d in (s["relationships"]["containers"]["data"] or [])}
    assert wanted <= set(keys)
    assert all("attributes" in r for r in body["included"])


def test_nested_include(sandbox):
    cl = c(sandbox)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    body = ok(cl.get(f"/containers/{cid}?include=shipment,shipment.port_of_lading"))
    types = {r["type"] for r in body["included"]}
    assert "shipment" in types
    shipment = next(r for r in body["included"] if r["type"] == "shipment")
    pol = shipment["relationships"].get("port_of_lading", {}).get("data")
    if pol:
        assert (pol["type"], pol["id"]) in {(r["type"], r["id"]) for r in body["included"]}
    assert unquote(body["links"]["self"]).endswith(f"/containers/{cid}?include=shipment,shipment.port_of_lading")


def test_no_included_without_include(sandbox):
    assert "included" not in ok(c(sandbox).get("/containers?page[size]=2"))


def test_unknown_route_is_html_404(sandbox):
    cl = c(sandbox)
    cid = ok(cl.get("/containers?page[size]=1"))["data"][0]["id"]
    for path in (f"/containers/{cid}/route", "/nope", "/../v3/x"):
        resp = cl.get(path)
        assert resp.status_code == 404
        assert resp.headers["content-type"].startswith("text/html")
        assert "The page you were looking for doesn't exist" in resp.text
    resp = requests.delete(cl.url("/shipments"), headers=cl.s.headers, timeout=10)
    assert resp.status_code == 404 and "<html>" in resp.text


def test_unknown_id_is_jsonapi_404(sandbox):
    errors(c(sandbox).get("/shipments/00000000-0000-0000-0000-000000000000"), 404)
