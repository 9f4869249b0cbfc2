"""Error pages are portal pages: the nav bar for a logged-in caller and a way back, and
the status the API would give (another team's job is a 404 that names nothing of it)."""

from __future__ import annotations

import re

import pytest
from fastapi.testclient import TestClient

from gpufleet.portal import routes_overview

from .conftest import Portal, login


@pytest.mark.parametrize(
    ("who", "path", "status", "title"),
    [
        pytest.param("nlp-member", "/portal/jobs/{vision_job}", 404, "Not found", id="other-team"),
        pytest.param("nlp-member", "/portal/jobs/999999", 404, "Not found", id="no-such-job"),
        pytest.param("nlp-member", "/portal/jobs/not-a-number", 404, "Not found", id="bad-id"),
        pytest.param("nlp-member", "/portal/no-such-page", 404, "Not found", id="no-route"),
        pytest.param("nlp-member", "/portal/team?team=vision", 404, "Not found", id="other-team"),
        pytest.param("vision-lead", "/portal/admin", 403, "Not allowed", id="not-admin"),
    ],
)
def test_error_pages_keep_the_nav_bar_and_a_way_back(
    portal: Portal, who: str, path: str, status: int, title: str
) -> None:
    vision_job = portal.submit_api("vision-member", name="secret-name", gpus=1)
    r = portal.as_(who).get(path.format(vision_job=vision_job))
    assert r.status_code == status
    html = r.text
    assert f"<h1>{title}</h1>" in html
    assert 'aria-label="Portal"' in html  # the nav bar
    assert 'id="logout"' in html
    assert 'href="/portal/"' in html  # back to the overview
    assert ('href="/portal/jobs">Back to my jobs' in html) == (status == 404)
    assert "secret-name" not in html
    assert "vision-member" not in html


def test_an_error_page_without_a_session_offers_the_login(portal: Portal) -> None:
    r = portal.browser().get("/portal/no-such-page")
    assert r.status_code == 404
    assert 'aria-label="Portal"' not in r.text
    assert re.search(r'<a href="/portal/login">Log in</a>', r.text)


def test_a_form_without_its_csrf_token_is_refused_on_a_page_with_the_nav(portal: Portal) -> None:
    r = portal.as_("vision-member").post("/portal/submit", {"name": "x"}, csrf=False)
    assert r.status_code == 403
    assert "reload the page" in r.text
    assert 'aria-label="Portal"' in r.text


def test_a_crash_is_a_500_page_that_tells_nothing_of_the_error(
    portal: Portal, monkeypatch: pytest.MonkeyPatch
) -> None:
    def boom(*_: object, **__: object) -> object:
        raise RuntimeError("internal detail of team vision")

    monkeypatch.setattr(routes_overview, "use_summary", boom)
    client = TestClient(portal.plane.client.app, raise_server_exceptions=False)
    assert login(client, portal.plane.tokens["vision-member"]).status_code == 303
    r = client.get("/portal/")
    assert r.status_code == 500
    assert "<h1>Something went wrong</h1>" in r.text
    assert "internal detail" not in r.text
    assert 'aria-label="Portal"' in r.text  # the nav bar: the caller was resolved first
    assert r.headers["content-type"].startswith("text/html")
