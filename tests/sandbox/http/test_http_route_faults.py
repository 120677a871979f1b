"""Route rules: one /v2 path (or glob) fails every time, as the live service breaks one container's map for
days, while every other route answers. Set through POST /_sandbox/faults `routes`, Settings or the CLI."""

from __future__ import annotations

import pytest
import requests

from sandbox.config import RouteRule, settings_from_args
from tests.sandbox.http.test_http_faults import BIG, set_faults
from tests.support.sandbox_http import Client, errors, ok
from tests.support.sandboxes import FULL_KEY

MAP_GLOB = "/v2/containers/*/map_geojson"


def faults_doc(srv) -> dict:
    return requests.get(srv.root_url + "/_sandbox/faults", timeout=5).json()


def two_containers(cl: Client) -> tuple[str, str]:
    first, second = ok(cl.get("/containers?page[size]=2"))["data"]
    return first["id"], second["id"]


def test_one_container_map_fails_every_time_others_answer(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    bad, good = two_containers(cl)
    rule = {"path": f"/v2/containers/{bad}/map_geojson", "status": 500, "body": "json"}
    doc = set_faults(srv, routes=[{"path": rule["path"], "status": 500}])
    assert doc["routes"] == [rule] and doc["profile"] == "none"
    assert faults_doc(srv)["routes"] == [rule]
    for _ in range(5):
        (e,) = errors(cl.get(f"/containers/{bad}/map_geojson"), 500)
        assert e["title"] == "Internal Server Error" and e["detail"]
        assert ok(cl.get(f"/containers/{good}/map_geojson"))["type"] == "FeatureCollection"
    ok(cl.get(f"/containers/{bad}"))
    stats = requests.get(srv.root_url + "/_sandbox/stats", timeout=5).json()
    assert stats["faults_served"] == {"route": 5} and stats["faults_total"] == 5


def test_html_body_is_a_proxy_error_page(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    bad, good = two_containers(cl)
    set_faults(srv, routes=[{"path": f"/v2/containers/{bad}/map_geojson", "status": 404, "body": "html"}])
    resp = cl.get(f"/containers/{bad}/map_geojson")
    assert resp.status_code == 404 and resp.headers["content-type"].startswith("text/html")
    assert "<h1>404 Not Found</h1>" in resp.text
    with pytest.raises(ValueError):
        resp.json()
    ok(cl.get(f"/containers/{good}/map_geojson"))


def test_glob_matches_every_container_map_only(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    first, second = two_containers(cl)
    set_faults(srv, routes=[{"path": MAP_GLOB, "status": 503}, {"path": "/v2/ship*", "status": 502}])
    for cid in (first, second):
        errors(cl.get(f"/containers/{cid}/map_geojson"), 503)
        ok(cl.get(f"/containers/{cid}"))
    errors(cl.get("/shipments?page[size]=1"), 502)
    ok(cl.get("/containers?page[size]=1"))
    set_faults(srv, routes=[{"path": "*", "status": 500}])
    errors(cl.get("/parties"), 500)
    assert requests.get(srv.root_url + "/_sandbox/health", timeout=5).status_code == 200


def test_clearing_rules_restores(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)
    cid, _ = two_containers(cl)
    set_faults(srv, routes=[{"path": MAP_GLOB, "status": 500}])
    errors(cl.get(f"/containers/{cid}/map_geojson"), 500)
    assert set_faults(srv, routes=[])["routes"] == []
    ok(cl.get(f"/containers/{cid}/map_geojson"))


@pytest.mark.parametrize(("body", "says"), [
    ({"routes": {"path": MAP_GLOB, "status": 500}}, "routes must be a list"),
    ({"routes": [MAP_GLOB]}, "routes[0]: each rule must be an object"),
    ({"routes": [{"path": MAP_GLOB}]}, "routes[0]: each rule needs path and status"),
    ({"routes": [{"path": MAP_GLOB, "status": 500}, {"path": MAP_GLOB, "status": 200}]}, "routes[1]: status"),
    ({"routes": [{"path": MAP_GLOB, "status": "500"}]}, "status must be an integer"),
    ({"routes": [{"path": MAP_GLOB, "status": True}]}, "status must be an integer"),
    ({"routes": [{"path": MAP_GLOB, "status": 600}]}, "within 400..599"),
    ({"routes": [{"path": MAP_GLOB, "status": 500, "body": "xml"}]}, "body must be one of json, html"),
    ({"routes": [{"path": "containers/*/map_geojson", "status": 500}]}, "path must be a glob"),
    ({"routes": [{"path": "", "status": 500}]}, "path must be a glob"),
    ({"routes": [{"path": MAP_GLOB, "status": 500, "stauts": 1}]}, "unknown rule keys ['stauts']"),
    ({"routes": [{"path": MAP_GLOB, "status": 500}], "profile": "bogus"}, "unknown fault profile"),
])
def test_invalid_rules_answer_400_and_change_nothing(make_sandbox, body, says):
    srv = make_sandbox(limits=BIG)
    before = set_faults(srv, profile="5xx", rate=0.25, seed=3, routes=[{"path": "/v2/parties", "status": 418}])
    resp = requests.post(srv.root_url + "/_sandbox/faults", json=body, timeout=5)
    assert resp.status_code == 400 and says in resp.json()["error"], resp.text
    assert faults_doc(srv) == before


def test_routes_combine_with_profile_and_leave_its_rng_alone(make_sandbox):
    srv = make_sandbox(limits=BIG)
    cl = Client(srv.base_url, FULL_KEY)

    def statuses(n: int) -> list[int]:
        return [cl.get("/shipments?page[size]=1").status_code for _ in range(n)]

    set_faults(srv, profile="5xx", rate=0.5, seed=42)
    expected = statuses(30)
    assert set(expected) & {500, 502, 503} and 200 in expected
    set_faults(srv, profile="5xx", rate=0.5, seed=42)
    seen = statuses(15)
    doc = set_faults(srv, routes=[{"path": "/v2/parties", "status": 429}])
    assert (doc["profile"], doc["rate"], doc["seed"]) == ("5xx", 0.5, 42)
    for _ in range(3):  # answered by the rule: the profile's RNG does not move
        errors(cl.get("/parties"), 429)
    seen += statuses(15)
    assert seen == expected
    doc = set_faults(srv, profile="none", routes=[{"path": "/v2/parties", "status": 400, "body": "html"}])
    assert doc["profile"] == "none" and doc["routes"] == [{"path": "/v2/parties", "status": 400, "body": "html"}]
    assert cl.get("/parties").status_code == 400
    ok(cl.get("/shipments?page[size]=1"))


def test_cli_flag_and_env_parse(monkeypatch, capsys):
    monkeypatch.delenv("SANDBOX_FAIL_ROUTES", raising=False)
    assert settings_from_args([]).fail_routes == []
    s = settings_from_args(["--fail-route", f"{MAP_GLOB}=500", "--fail-route", "/v2/a=b=502:html",
                            "--fail-route", "/v2/parties = 404:json"])
    assert s.fail_routes == [RouteRule(MAP_GLOB, 500), RouteRule("/v2/a=b", 502, "html"),
                             RouteRule("/v2/parties", 404, "json")]
    monkeypatch.setenv("SANDBOX_FAIL_ROUTES", f"{MAP_GLOB}=503:html, /v2/parties=500")
    assert settings_from_args([]).fail_routes == [RouteRule(MAP_GLOB, 503, "html"), RouteRule("/v2/parties", 500)]
    assert settings_from_args(["--fail-route", "/v2/x=400"]).fail_routes == [RouteRule("/v2/x", 400)]
    for argv, says in ((["--fail-route", MAP_GLOB], "expected PATTERN=STATUS[:html]"),
                       (["--fail-route", f"{MAP_GLOB}=200"], "within 400..599"),
                       (["--fail-route", f"{MAP_GLOB}=500:xml"], "body must be one of json, html"),
                       (["--fail-route", "=500"], "path must be a glob")):
        with pytest.raises(SystemExit) as exc:
            settings_from_args(argv)
        assert exc.value.code == 2
        err = capsys.readouterr().err
        assert "argument --fail-route" in err and says in err, err
    monkeypatch.setenv("SANDBOX_FAIL_ROUTES", "/v2/parties=abc")
    with pytest.raises(SystemExit):
        settings_from_args([])
    assert "SANDBOX_FAIL_ROUTES: expected PATTERN=STATUS[:html]" in capsys.readouterr().err


def test_rules_from_the_command_line_serve(make_sandbox, monkeypatch):
    monkeypatch.delenv("SANDBOX_FAIL_ROUTES", raising=False)
    rules = settings_from_args(["--fail-route", f"{MAP_GLOB}=502:html"]).fail_routes
    srv = make_sandbox(limits=BIG, fail_routes=rules)
    cl = Client(srv.base_url, FULL_KEY)
    cid, _ = two_containers(cl)
    assert faults_doc(srv)["routes"] == [{"path": MAP_GLOB, "status": 502, "body": "html"}]
    resp = cl.get(f"/containers/{cid}/map_geojson")
    assert resp.status_code == 502 and resp.headers["content-type"].startswith("text/html")
    ok(cl.get(f"/containers/{cid}"))
