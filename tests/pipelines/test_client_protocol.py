"""The client over real loopback HTTP: headers, documents, pagination, error mapping, uploads."""

from __future__ import annotations

from urllib.parse import unquote

import pytest

from pipelines import errors
from tests.support.scripted import HTML_404, TEST_KEY, Reply, load_fixture


def test_get_sends_token_and_jsonapi_headers(api_server, make_client):
    doc = load_fixture("shipments.get.include.json")
    api_server.script("GET", "/shipments/s1", Reply(body=doc))
    client = make_client()
    assert client.get("shipments/s1", {"include": "containers"}) == doc
    seen = api_server.seen("GET")[0]
    assert seen.path == "/v2/shipments/s1?include=containers"
    assert seen.headers["Authorization"] == f"Token {TEST_KEY}"
    assert seen.headers["Accept"] == "application/vnd.api+json"
    assert client.stats()["requests"] == {"default": 1}


def test_resource_self_links_resolve_against_the_base(api_server, make_client):
    api_server.script("GET", "/shipments/s1", Reply(body={"data": None}))
    assert make_client().get("/v2/shipments/s1") == {"data": None}


def _page(server, number, data, next_number=None):
    links = {"self": f"{server.base_url}/containers?page[number]={number}"}
    if next_number:
        links["next"] = f"{server.base_url}/containers?page[number]={next_number}&page[size]=1"
    return {"data": data, "links": links, "meta": {"total": 2}}


def test_paginate_follows_links_next_until_absent(api_server, make_client):
    row = load_fixture("containers.list.json")["data"][0]
    api_server.script(
        "GET", "/containers",
        Reply(body=_page(api_server, 1, [row], 2)),
        Reply(body=_page(api_server, 2, [row], 3)),
        Reply(body=_page(api_server, 3, [row])),
    )
    pages = list(make_client().paginate("containers", {"page[size]": 1}))
    assert len(pages) == 3
    paths = [unquote(r.path) for r in api_server.seen("GET")]
    assert paths == [
        "/v2/containers?page[size]=1",
        "/v2/containers?page[number]=2&page[size]=1",
        "/v2/containers?page[number]=3&page[size]=1",
    ]


def test_paginate_stops_on_empty_data_even_with_next(api_server, make_client):
    api_server.script("GET", "/containers", Reply(body=_page(api_server, 1, [], 2)))
    assert len(list(make_client().paginate("containers"))) == 1
    assert len(api_server.seen()) == 1


def test_paginate_refuses_a_repeating_next(api_server, make_client):
    row = {"id": "c1", "type": "container", "attributes": {}}
    api_server.script(
        "GET", "/containers",
        Reply(body=_page(api_server, 1, [row], 2)),
        Reply(body=_page(api_server, 2, [row], 2)),
    )
    with pytest.raises(errors.MalformedResponseError, match="repeats"):
        list(make_client().paginate("containers"))


def test_paginate_rebases_links_on_a_foreign_host(api_server, make_client):
    row = {"id": "c1", "type": "container", "attributes": {}}
    first = {"data": [row], "links": {"next": "https://api.terminal49.com/v2/containers?page[number]=2"}}
    api_server.script("GET", "/containers", Reply(body=first), Reply(body={"data": [row], "links": {}}))
    pages = list(make_client().paginate("containers"))
    assert len(pages) == 2
    assert all(r.headers.get("Authorization") for r in api_server.seen())


def test_html_404_says_the_route_does_not_exist(api_server, make_client):
    with pytest.raises(errors.MalformedResponseError) as info:
        make_client().get("containers/c1/route")
    text = str(info.value)
    assert "HTML page instead of JSON:API" in text and "/v2" in text
    assert info.value.status == 404 and info.value.path == "/v2/containers/c1/route"


def test_jsonapi_404_is_not_found(api_server, make_client):
    body = {"errors": [{"status": "404", "title": "Not Found", "detail": "Record not found"}]}
    api_server.script("GET", "/shipments/nope", Reply(404, body))
    with pytest.raises(errors.NotFoundError):
        make_client().get("shipments/nope")


def test_401_is_authentication_error_with_a_fix(api_server, make_client):
    body = {"errors": [{"status": "401", "title": "Unauthorized", "detail": "API key could not be verified"}]}
    api_server.script("GET", "/shipments", Reply(401, body))
    with pytest.raises(errors.AuthenticationError) as info:
        make_client().get("shipments")
    assert "SOURCES__OCEAN_TRACKING__API_KEY" in str(info.value)
    assert info.value.errors[0].detail == "API key could not be verified"
    assert len(api_server.seen()) == 1  # never retried


def test_422_lists_every_pointer(api_server, make_client):
    body = {"errors": [
        {"status": "422", "source": {"pointer": "/data/attributes/scac"}, "title": "Unprocessable Entity",
         "detail": "Scac can't be blank", "code": "blank"},
        {"status": "422", "source": {"pointer": "/data/attributes/request_number"},
         "title": "Unprocessable Entity", "detail": "Request number can't be blank", "code": "blank"},
    ]}
    api_server.script("POST", "/tracking_requests", Reply(422, body))
    with pytest.raises(errors.ValidationError) as info:
        make_client().post("tracking_requests", {"data": {"type": "tracking_request", "attributes": {}}})
    err = info.value
    assert [e.pointer for e in err.errors] == ["/data/attributes/scac", "/data/attributes/request_number"]
    assert err.method == "POST" and err.path == "/v2/tracking_requests"
    assert "/data/attributes/scac: Scac can't be blank (code blank)" in str(err)


def test_400_parameter_error(api_server, make_client):
    body = {"errors": [{"status": "400", "source": {"parameter": "event"}, "title": "Bad Request", "detail": None}]}
    api_server.script("GET", "/webhook_notifications/examples", Reply(400, body))
    with pytest.raises(errors.ValidationError) as info:
        make_client().get("webhook_notifications/examples", {"event": "bogus"})
    assert info.value.errors[0].parameter == "event"


def test_403_on_map_is_feature_not_enabled(api_server, make_client):
    body = {"errors": [{"status": "403", "title": "Forbidden", "detail": "Routing data is not enabled"}]}
    api_server.script("GET", "/containers/c1/map_geojson", Reply(403, body))
    with pytest.raises(errors.FeatureNotEnabledError):
        make_client().get("containers/c1/map_geojson")


def test_post_sends_jsonapi_body(api_server, make_client):
    api_server.script("POST", "/tracking_requests", Reply(201, {"data": {"id": "t1", "type": "tracking_request"}}))
    body = {"data": {"type": "tracking_request", "attributes": {"request_number": "ü-1"}}}
    result = make_client().post("tracking_requests", body)
    assert result["data"]["id"] == "t1"
    seen = api_server.seen("POST")[0]
    assert seen.headers["Content-Type"] == "application/vnd.api+json"
    assert b'"request_number"' in seen.body


def test_patch_with_empty_204_returns_none(api_server, make_client):
    api_server.script("PATCH", "/containers/c1", Reply(204))
    assert make_client().patch("containers/c1", {"data": {"type": "container"}}) is None


def test_non_json_200_is_malformed(api_server, make_client):
    api_server.script("GET", "/shipments", *[Reply(200, HTML_404, {"Content-Type": "text/html"})] * 3)
    with pytest.raises(errors.MalformedResponseError, match="HTML page"):
        make_client().get("shipments")


def test_put_raw_never_sends_the_token_and_skips_the_limiter(api_server, make_client):
    api_server.scripts[("PUT", "/storage/blob-1")].append(Reply(200, b""))
    client = make_client()
    headers = {"Content-Type": "application/pdf", "Content-MD5": "1B2M2Y8AsgTpgAmY7PhCfg=="}
    response = client.put_raw(f"{api_server.origin}/storage/blob-1?sig=abc", b"%PDF-1.4", headers)
    assert response.status_code == 200
    seen = api_server.seen("PUT")[0]
    assert "Authorization" not in seen.headers
    assert seen.headers["Content-MD5"] == headers["Content-MD5"] and seen.body == b"%PDF-1.4"
    assert client.stats()["requests"] == {"external": 1}


def test_put_raw_storage_error_hides_the_signed_query(api_server, make_client):
    api_server.scripts[("PUT", "/storage/blob-1")].append(Reply(400, b"<Error><Code>BadDigest</Code></Error>"))
    with pytest.raises(errors.ApiError) as info:
        make_client().put_raw(f"{api_server.origin}/storage/blob-1?signature=s3cr3t", b"x")
    assert "BadDigest" in str(info.value) and "s3cr3t" not in str(info.value)


def test_get_refuses_foreign_absolute_urls(make_client):
    with pytest.raises(ValueError, match="put_raw"):
        make_client().get("https://evil.example/v2/shipments")
