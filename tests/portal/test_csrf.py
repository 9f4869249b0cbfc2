"""CSRF: a form without this session's token changes nothing, whatever else it carries."""

from __future__ import annotations

import re

from .conftest import Portal


def _state(portal: Portal, job_id: int) -> str:
    r = portal.plane.client.get(f"/api/v1/jobs/{job_id}", headers=portal.plane.auth("admin"))
    return str(r.json()["state"])


def test_a_post_without_the_csrf_token_is_refused(portal: Portal) -> None:
    job = portal.submit_api("vision-member", gpus=1)
    b = portal.as_("vision-member")
    r = b.post(f"/portal/jobs/{job}/cancel", csrf=False)
    assert r.status_code == 403
    assert "reload the page" in r.text
    r = b.post(f"/portal/jobs/{job}/cancel", {"csrf_token": "x" * 43})
    assert r.status_code == 403
    other = portal.as_("vision-lead")  # a real token, but of another session
    r = b.post(f"/portal/jobs/{job}/cancel", {"csrf_token": other.csrf})
    assert r.status_code == 403
    assert _state(portal, job) == "pending"
    r = b.post(f"/portal/jobs/{job}/cancel")
    assert r.status_code == 303
    assert _state(portal, job) == "cancelled"


def test_htmx_sends_the_token_as_a_header(portal: Portal) -> None:
    job = portal.submit_api("vision-member", gpus=1)
    b = portal.as_("vision-member")
    page = b.get("/portal/jobs").text
    assert f'hx-headers=\'{{"X-CSRF-Token": "{b.csrf}"}}\'' in page
    r = b.post(f"/portal/jobs/{job}/cancel", csrf=False, headers={"X-CSRF-Token": b.csrf})
    assert r.status_code == 303
    assert _state(portal, job) == "cancelled"


def test_logout_and_admin_forms_need_it_too(portal: Portal) -> None:
    admin = portal.as_("admin")
    r = admin.post("/portal/admin/teams", {"name": "new-team"}, csrf=False)
    assert r.status_code == 403
    assert "new-team" not in admin.get("/portal/admin").text
    assert admin.post("/portal/logout", csrf=False).status_code == 403
    assert admin.get("/portal/").status_code == 200  # still logged in


def test_every_post_form_carries_the_token(portal: Portal) -> None:
    job = portal.submit_api("vision-member", gpus=1)
    admin = portal.as_("admin")
    for path in (
        "/portal/",
        "/portal/jobs",
        f"/portal/jobs/{job}",
        "/portal/submit",
        "/portal/team?team=vision",
        "/portal/planner",
        "/portal/admin",
    ):
        html = admin.get(path).text
        forms = re.findall(r'<form method="post".*?</form>', html, re.S)
        assert forms, path  # at least logout
        for form in forms:
            assert f'name="csrf_token" value="{admin.csrf}"' in form, (path, form[:200])
