"""A team's highest priority class: leads and members stay at or under it, admins do not.

Issue 30: a lead could raise a job to the non-preemptible production class with no policy.
"""

from __future__ import annotations

from .conftest import Plane
from .test_flow import submit


def _cap(plane: Plane, team: str, cap: str) -> None:
    r = plane.client.patch(
        f"/api/v1/admin/teams/{team}", json={"max_priority_class": cap}, headers=plane.auth("admin")
    )
    assert r.status_code == 200, r.text
    assert r.json()["max_priority_class"] == (cap or None)


def test_a_lead_cannot_go_above_the_cap_and_an_admin_can_allow_it(lite: Plane) -> None:
    _cap(lite, "vision", "")  # back to the default: its default class, standard
    r = lite.client.post(
        "/api/v1/jobs",
        json={"name": "p", "gpus": 1, "command": ["x"], "priority_class": "production"},
        headers=lite.auth("vision-lead"),
    )
    assert r.status_code == 403
    assert "above what team vision may use ('standard' and below)" in r.json()["detail"]
    assert "--max-priority-class production" in r.json()["detail"]
    job = submit(lite, "vision-member", name="s", gpus=1)["id"]  # the default class: fine
    low = submit(lite, "vision-member", name="o", gpus=1, priority_class="opportunistic")
    assert low["priority_class"] == "opportunistic"
    r = lite.client.patch(
        f"/api/v1/jobs/{job}",
        json={"priority_class": "production"},
        headers=lite.auth("vision-lead"),
    )
    assert r.status_code == 403
    r = lite.client.patch(
        f"/api/v1/jobs/{job}",
        json={"priority_class": "production"},
        headers=lite.auth("admin"),
    )
    assert r.status_code == 200, r.text
    _cap(lite, "vision", "production")
    r = lite.client.post(
        "/api/v1/jobs",
        json={"name": "p", "gpus": 1, "command": ["x"], "priority_class": "production"},
        headers=lite.auth("vision-lead"),
    )
    assert r.status_code == 201, r.text
    teams = lite.client.get("/api/v1/teams", headers=lite.auth("vision-lead")).json()
    assert teams[0]["max_priority_class"] == "production"


def test_a_cap_below_the_default_class_is_refused(lite: Plane) -> None:
    r = lite.client.patch(
        "/api/v1/admin/teams/vision",
        json={"max_priority_class": "opportunistic"},
        headers=lite.auth("admin"),
    )
    assert r.status_code == 409
    assert "below the default class 'standard'" in r.json()["detail"]
