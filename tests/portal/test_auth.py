"""Login, sessions, logout, and the cookie on the API: the portal never stores a token in
the browser, and a session ends with logout, expiry or its token's revocation."""

from __future__ import annotations

import hashlib

from fastapi.testclient import TestClient
from sqlalchemy import select

from gpufleet.control.models import PortalSession
from gpufleet.control.sessions import SESSION_TTL_S

from .conftest import Portal, csrf_of, login


def _sessions(portal: Portal) -> list[PortalSession]:
    with portal.plane.sessions() as s:
        return list(s.scalars(select(PortalSession)))


def test_the_login_page_asks_for_a_token(portal: Portal) -> None:
    r = portal.browser().get("/portal/login")
    assert r.status_code == 200
    assert '<label for="token">API token</label>' in r.text
    assert 'id="token"' in r.text
    assert 'type="password"' in r.text


def test_login_opens_a_server_side_session_behind_a_strict_cookie(portal: Portal) -> None:
    b = portal.browser()
    token = portal.plane.tokens["vision-member"]
    r = login(b.client, token, next_url="/portal/jobs")
    assert r.status_code == 303
    assert r.headers["location"] == "/portal/jobs"
    cookie = next(h for h in r.headers.get_list("set-cookie") if h.startswith("gpufleet_session="))
    attrs = {a.strip().lower() for a in cookie.split(";")}
    assert {"httponly", "samesite=strict", "path=/"} <= attrs
    assert "secure" not in attrs  # plain http: a Secure cookie would never come back
    value = cookie.split(";", 1)[0].split("=", 1)[1]
    assert token not in cookie
    assert len(value) >= 43
    [row] = _sessions(portal)
    assert row.digest == hashlib.sha256(value.encode()).hexdigest()  # stored hashed
    assert row.expires_s == row.created_s + SESSION_TTL_S == portal.plane.clock() + 12 * 3600
    page = b.get("/portal/jobs")
    assert page.status_code == 200
    assert "vision-member · member · vision" in page.text


def test_the_cookie_is_secure_over_https(portal: Portal) -> None:
    client = TestClient(portal.plane.client.app, base_url="https://testserver")
    r = login(client, portal.plane.tokens["vision-member"])
    cookie = next(h for h in r.headers.get_list("set-cookie") if "gpufleet_session=" in h)
    assert "secure" in cookie.lower()


def test_a_wrong_token_opens_nothing(portal: Portal) -> None:
    b = portal.browser()
    r = login(b.client, "gpf_not-a-token")
    assert r.status_code == 401
    assert 'id="login-error"' in r.text
    assert "unknown token" in r.text
    assert "gpufleet_session=" not in r.headers.get("set-cookie", "")
    assert _sessions(portal) == []


def test_the_login_form_has_its_own_csrf_token(portal: Portal) -> None:
    b = portal.browser()
    b.get("/portal/login")
    r = b.client.post(
        "/portal/login",
        data={"token": portal.plane.tokens["vision-member"], "csrf_token": "forged"},
        follow_redirects=False,
    )
    assert r.status_code == 403
    assert _sessions(portal) == []


def test_pages_send_a_visitor_without_a_session_to_login(portal: Portal) -> None:
    b = portal.browser()
    r = b.get("/portal/team?team=vision", follow_redirects=False)
    assert r.status_code == 303
    assert r.headers["location"] == "/portal/login?next=%2Fportal%2Fteam%3Fteam%3Dvision"
    r = b.get("/portal/jobs", headers={"HX-Request": "true"}, follow_redirects=False)
    assert r.status_code == 204
    assert r.headers["HX-Redirect"].startswith("/portal/login")


def test_login_does_not_redirect_off_the_portal(portal: Portal) -> None:
    r = login(portal.browser().client, portal.plane.tokens["admin"], "https://evil.example/")
    assert r.headers["location"] == "/portal/"
    r = login(portal.browser().client, portal.plane.tokens["admin"], "/portal//evil.example")
    assert r.headers["location"] == "/portal/"


def test_logout_deletes_the_session(portal: Portal) -> None:
    b = portal.browser("vision-member")
    cookie = b.client.cookies.get("gpufleet_session")
    assert cookie
    assert len(_sessions(portal)) == 1
    r = b.post("/portal/logout")
    assert r.status_code == 303
    assert r.headers["location"] == "/portal/login"
    assert _sessions(portal) == []
    stolen = portal.browser()  # the old cookie value is worth nothing now
    stolen.client.cookies.set("gpufleet_session", cookie)
    assert stolen.get("/portal/jobs", follow_redirects=False).status_code == 303


def test_a_session_expires_after_12_hours(portal: Portal) -> None:
    b = portal.browser("vision-member")
    portal.plane.clock.advance(12 * 3600 - 1)
    assert b.get("/portal/jobs", follow_redirects=False).status_code == 200
    portal.plane.clock.advance(2)
    assert b.get("/portal/jobs", follow_redirects=False).status_code == 303


def test_revoking_the_token_ends_its_sessions(portal: Portal) -> None:
    b = portal.browser("vision-member")
    with portal.plane.sessions() as s:
        token_id = s.scalars(select(PortalSession.token_id)).one()
    r = portal.plane.client.delete(
        f"/api/v1/admin/tokens/{token_id}", headers=portal.plane.auth("admin")
    )
    assert r.status_code == 204
    r = b.get("/portal/jobs", follow_redirects=False)
    assert r.status_code == 303


def test_the_api_accepts_the_session_cookie_with_csrf_for_writes(portal: Portal) -> None:
    b = portal.browser("vision-member")
    api = b.client
    assert api.get("/api/v1/jobs").status_code == 200  # a read needs only the cookie
    body = {"name": "from-the-browser", "gpus": 1}
    r = api.post("/api/v1/jobs", json=body)
    assert r.status_code == 403
    assert "X-CSRF-Token" in r.json()["detail"]
    r = api.post("/api/v1/jobs", json=body, headers={"X-CSRF-Token": b.csrf})
    assert r.status_code == 201
    assert r.json()["user"] == "vision-member"


def test_the_bearer_token_path_is_unchanged(portal: Portal) -> None:
    plane = portal.plane
    raw = TestClient(plane.client.app)
    raw.cookies.set("gpufleet_session", plane.tokens["vision-member"])  # the old, raw cookie
    assert raw.get("/api/v1/jobs").status_code == 401  # a cookie never carries a token now
    r = raw.get("/api/v1/jobs", headers=plane.auth("nlp-member"))  # the header wins
    assert r.status_code == 200
    assert plane.client.get("/api/v1/jobs").status_code == 401
    assert plane.client.get("/api/v1/jobs", headers=plane.auth("admin")).status_code == 200


def test_the_site_root_goes_to_the_portal_with_safe_headers(portal: Portal) -> None:
    b = portal.browser()
    r = b.get("/", follow_redirects=False)
    assert r.status_code == 307
    assert r.headers["location"] == "/portal/"
    page = b.get("/portal/login")
    assert "script-src 'self'" in page.headers["content-security-policy"]
    assert page.headers["x-frame-options"] == "DENY"
    assert page.headers["cache-control"] == "no-store"
    assert csrf_of(page.text)
    js = b.get("/portal/static/vendor/htmx.min.js")
    assert js.status_code == 200
    assert "htmx" in js.text[:2000]


def test_failed_logins_and_stale_cookies_are_limited_per_address(portal: Portal) -> None:
    """Wrong tokens on the login page and unknown session cookies share the address's
    failure bucket (30 at once): past it the login page answers 429 and asks nothing."""
    client = TestClient(portal.plane.client.app)
    limiter = portal.plane.client.app.state.ctx.auth_failures
    limiter.clock = portal.plane.clock
    for _ in range(25):
        assert login(client, "gpf_wrong").status_code == 401
    client.cookies.set("gpufleet_session", "stale")
    for _ in range(5):
        r = client.get("/portal/jobs", follow_redirects=False)
        assert r.status_code == 303  # to the login page
    refused = login(client, portal.plane.tokens["nlp-member"])
    assert refused.status_code == 429
    assert "failed authentications" in refused.text
    portal.plane.clock.advance(1.0)
    assert login(client, portal.plane.tokens["nlp-member"]).status_code == 303
