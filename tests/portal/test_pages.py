"""Every page renders for the roles that may see it, with stable ids to drive it by, and
team isolation is the API's: another team's job, team or action is "not found"."""

from __future__ import annotations

import json
import re

import pytest

from .conftest import Portal

PAGES = {
    "overview": "/portal/",
    "my_jobs": "/portal/jobs",
    "submit": "/portal/submit",
    "team": "/portal/team",
    "chargeback": "/portal/chargeback",
    "planner": "/portal/planner",
    "whatif": "/portal/whatif?run=1&add_gpus=8",
    "admin": "/portal/admin",
    "admin-nodes": "/portal/admin/nodes",
    "admin-rates": "/portal/admin/rates",
    "admin-tokens": "/portal/admin/tokens",
    "admin-audit": "/portal/admin/audit",
}
MARKERS = {  # an element each page must carry
    "overview": 'id="cluster-table"',
    "my_jobs": 'id="h-pending"',
    "submit": 'id="submit-form"',
    "team": 'id="team-quota-table"',
    "chargeback": 'id="chargeback-table"',
    "planner": 'id="planner-form"',
    "whatif": 'id="whatif-result"',
    "admin": 'id="admin-teams"',
    "admin-nodes": 'id="admin-nodes"',
    "admin-rates": 'id="admin-rates"',
    "admin-tokens": 'id="admin-tokens"',
    "admin-audit": 'id="admin-audit"',
}
ROLES = ("admin", "vision-lead", "vision-member", "vision-viewer")


@pytest.fixture
def busy(portal: Portal) -> tuple[Portal, list[int]]:
    """Running and waiting jobs in both teams."""
    ids = [
        portal.submit_api("vision-member", name="big", gpus=8, workers=2, runtime_estimate_s=7200),
        portal.submit_api("nlp-member", name="nlp-a", gpus=8, runtime_estimate_s=3600),
        portal.submit_api("vision-member", name="wait", gpus=4, runtime_estimate_s=600),
    ]
    portal.plane.cycle()
    portal.plane.cycle(1)
    portal.plane.reconciler.estimate_etas()
    return portal, ids


@pytest.mark.parametrize("role", ROLES)
def test_every_page_renders_for_each_role(busy: tuple[Portal, list[int]], role: str) -> None:
    portal, ids = busy
    b = portal.as_(role)
    for name, path in [*PAGES.items(), ("job", f"/portal/jobs/{ids[0]}")]:
        r = b.get(path)
        if name.startswith("admin") and role != "admin":
            assert r.status_code == 403, name
            assert "admin" in r.text
            continue
        assert r.status_code == 200, (name, r.text[:500])
        assert r.headers["content-type"].startswith("text/html")
        assert MARKERS.get(name, 'id="job-facts"') in r.text, name
        assert 'id="main"' in r.text
        assert 'id="logout"' in r.text
        assert ('id="nav-admin"' in r.text) == (role == "admin")


def test_inputs_have_labels(busy: tuple[Portal, list[int]]) -> None:
    """Every visible input, select and textarea has a <label for=...> (or aria-label)."""
    portal, _ = busy
    b = portal.as_("admin")
    for path in (*PAGES.values(), "/portal/login"):
        html = b.get(path).text
        labels = set(re.findall(r'<label for="([^"]+)"', html))
        for tag in re.findall(r"<(?:input|select|textarea)\b[^>]*>", html):
            if 'type="hidden"' in tag or "aria-label=" in tag:
                continue
            found = re.search(r'id="([^"]+)"', tag)
            assert found, (path, tag)
            assert found.group(1) in labels, (path, tag)


def test_a_job_page_of_another_team_is_not_found(busy: tuple[Portal, list[int]]) -> None:
    portal, ids = busy
    vision_job = ids[0]
    nlp = portal.as_("nlp-member")
    r = nlp.get(f"/portal/jobs/{vision_job}")
    assert r.status_code == 404
    assert "big" not in r.text  # nothing about the job leaks
    assert nlp.post(f"/portal/jobs/{vision_job}/cancel").status_code == 404
    lead = portal.as_("nlp-lead")
    r = lead.post(f"/portal/jobs/{vision_job}/priority", {"priority_class": "production"})
    assert r.status_code == 404
    assert nlp.get("/portal/team?team=vision").status_code == 404
    assert nlp.get("/portal/jobs/999999").status_code == 404
    assert nlp.get("/portal/jobs/not-a-number").status_code == 404
    assert nlp.get("/portal/no-such-page").status_code == 404
    page = nlp.get("/portal/jobs").text
    assert "nlp-a" in page
    assert f"#{vision_job} " not in page
    assert portal.as_("admin").get(f"/portal/jobs/{vision_job}").status_code == 200


def test_the_overview_shows_allocation_queues_and_quota(busy: tuple[Portal, list[int]]) -> None:
    portal, _ = busy
    portal.plane.cycle(600)
    html = portal.as_("vision-lead").get("/portal/").text
    assert 'id="idle-not-collected"' in html  # utilisation is not reported yet
    data = json.loads(
        re.search(
            r'<script type="application/json" id="allocation-data">(.*?)</script>', html, re.S
        ).group(1)  # type: ignore[union-attr]
    )
    labels = [d["label"] for d in data["datasets"]]
    assert "h100-sxm5-80gb allocated" in labels
    assert "vision allocated" in labels
    assert {"key": "h100-sxm5-80gb", "label": "h100-sxm5-80gb capacity", "value": 16} in data[
        "capacity"
    ]
    assert max(data["datasets"][labels.index("h100-sxm5-80gb allocated")]["data"]) > 0
    queue = re.search(r'id="queue-table">(.*?)</table>', html, re.S).group(1)  # type: ignore[union-attr]
    assert ">vision<" in queue
    assert ">nlp<" not in queue
    admin = portal.as_("admin").get("/portal/").text
    assert ">nlp<" in re.search(r'id="queue-table">(.*?)</table>', admin, re.S).group(1)  # type: ignore[union-attr]


def test_the_job_page_shows_timeline_placement_and_logs(busy: tuple[Portal, list[int]]) -> None:
    portal, ids = busy
    portal.plane.cycle(60)
    running = ids[2]  # "wait" fits within vision's guarantee and runs; "big" waits
    html = portal.as_("vision-member").get(f"/portal/jobs/{running}").text
    assert "queued" in html
    assert "started" in html
    table = re.search(r'id="placement-table">(.*?)</table>', html, re.S).group(1)  # type: ignore[union-attr]
    assert re.search(r"h100-\d</th><td>GPU \d, GPU \d, GPU \d, GPU \d</td>", table), table
    assert 'id="job-gpu-hours"' in html
    assert 'id="logs"' in html
    assert 'id="cancel-job"' in html
    assert 'id="set-priority"' not in html
    viewer = portal.as_("vision-viewer").get(f"/portal/jobs/{running}").text
    assert 'id="cancel-job"' not in viewer
    lead = portal.as_("vision-lead").get(f"/portal/jobs/{running}").text
    assert 'id="set-priority"' in lead
