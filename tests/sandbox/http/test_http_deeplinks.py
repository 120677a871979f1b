"""Web-app deep links: GET {app_url}/shipments/find?q= → 302 by the spec's five steps, scoped to the
caller's account (identified by the same `Authorization: Token` header; none → login redirect)."""

from __future__ import annotations

import requests

from tests.support.sandbox_http import Client, ok
from tests.support.sandboxes import BASIC_KEY, FULL_KEY


def find(srv, q, key=FULL_KEY, **kw):
    headers = {"Authorization": f"Token {key}"} if key else {}
    return requests.get(srv.app_url + "/shipments/find", params={"q": q}, headers=headers,
                        allow_redirects=False, timeout=10, **kw)


def location(srv, q, key=FULL_KEY):
    resp = find(srv, q, key)
    assert resp.status_code == 302, resp.text[:300]
    return resp.headers["location"]


def first_container(srv, key=FULL_KEY):
    c = ok(Client(srv.base_url, key).get("/containers?page[size]=1"))["data"][0]
    return c, c["relationships"]["shipment"]["data"]["id"]


def test_step1_exact_container_number_case_and_separators(sandbox):
    c, sid = first_container(sandbox)
    num = c["attributes"]["number"]
    messy = f"{num[:4].lower()}-{num[4:7]} {num[7:]}"
    for q in (num, messy):
        assert location(sandbox, q) == f"{sandbox.app_url}/shipments/{sid}?container={c['id']}"


def test_step2_exact_shipment_number_and_ref_number(make_sandbox):
    srv = make_sandbox()
    cl = Client(srv.base_url, FULL_KEY)
    s = ok(cl.get("/shipments?page[size]=1"))["data"][0]
    assert location(srv, s["attributes"]["bill_of_lading_number"]) == f"{srv.app_url}/shipments/{s['id']}"
    ok(cl.patch(f"/shipments/{s['id']}", {"data": {"type": "shipment", "attributes": {"ref_numbers": ["ZZ-DEEP-REF-1"]}}}))
    assert location(srv, "zz-deep-ref-1") == f"{srv.app_url}/shipments/{s['id']}"


def test_step3_partial_container_match(sandbox):
    c, _ = first_container(sandbox)
    q = c["attributes"]["number"][1:-1]
    loc = location(sandbox, q)
    assert "?container=" in loc
    cid = loc.split("?container=")[1]
    hit = ok(Client(sandbox.base_url, FULL_KEY).get(f"/containers/{cid}"))["data"]
    assert q.upper() in hit["attributes"]["number"].upper()
    assert loc.startswith(f"{sandbox.app_url}/shipments/{hit['relationships']['shipment']['data']['id']}?")


def test_step4_partial_shipment_match(sandbox):
    cl = Client(sandbox.base_url, FULL_KEY)
    s = ok(cl.get("/shipments?page[size]=1"))["data"][0]
    q = s["attributes"]["bill_of_lading_number"][:-1]
    loc = location(sandbox, q)
    assert "?container=" not in loc and loc.startswith(f"{sandbox.app_url}/shipments/")
    hit = ok(cl.get(f"/shipments/{loc.rsplit('/', 1)[1]}"))["data"]["attributes"]
    texts = [hit["bill_of_lading_number"], *(hit.get("ref_numbers") or [])]
    assert any(q.upper() in t.upper() for t in texts)


def test_step5_no_match_prefills_list(sandbox):
    assert location(sandbox, "NO-SUCH THING") == f"{sandbox.app_url}/shipments?q=NO-SUCH%20THING"
    page = requests.get(f"{sandbox.app_url}/shipments?q=NO-SUCH%20THING",
                        headers={"Authorization": f"Token {FULL_KEY}"}, timeout=10)
    assert page.status_code == 200 and 'value="NO-SUCH THING"' in page.text


def test_account_scoping(sandbox):
    c, sid = first_container(sandbox, BASIC_KEY)
    num = c["attributes"]["number"]
    assert location(sandbox, num, BASIC_KEY) == f"{sandbox.app_url}/shipments/{sid}?container={c['id']}"
    assert "/shipments/" + sid not in location(sandbox, num, FULL_KEY)


def test_app_auth_and_target_pages(sandbox):
    resp = find(sandbox, "x", key=None)
    assert resp.status_code == 302 and resp.headers["location"].startswith(f"{sandbox.app_url}/login")
    assert requests.get(resp.headers["location"], timeout=10).status_code == 200
    assert find(sandbox, "x", key="bogus").status_code == 401
    c, sid = first_container(sandbox)
    page = requests.get(location(sandbox, c["attributes"]["number"]), headers={"Authorization": f"Token {FULL_KEY}"},
                        timeout=10)
    assert page.status_code == 200 and sid in page.text
    basic_sid = first_container(sandbox, BASIC_KEY)[1]
    assert requests.get(f"{sandbox.app_url}/shipments/{basic_sid}", headers={"Authorization": f"Token {FULL_KEY}"},
                        timeout=10).status_code == 404
