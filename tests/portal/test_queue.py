"""My jobs / queue and the team's queue: positions, waits, estimates, reasons, the jobs
ahead, and a lead reordering the team's jobs by priority class."""

from __future__ import annotations

import re

import pytest

from gpufleet.api.views import QueueIndex
from gpufleet.control.auth import Principal
from gpufleet.portal.queue import ahead_of

from .conftest import Portal

H100 = "h100-sxm5-80gb"


@pytest.fixture
def queued(portal: Portal) -> tuple[Portal, list[int]]:
    """vision holds all 16 H100s (not preemptible) and has three 8-GPU jobs waiting."""
    portal.submit_api(
        "vision-member",
        name="hog",
        gpus=8,
        workers=2,
        accelerator=H100,
        preemptible=False,
        runtime_estimate_s=36_000,
    )
    portal.plane.cycle()
    portal.plane.cycle(1)
    ids = [
        portal.submit_api(
            "vision-member", name=n, gpus=8, accelerator=H100, runtime_estimate_s=3600
        )
        for n in ("a", "b", "c")
    ]
    portal.plane.cycle(60)
    portal.plane.reconciler.estimate_etas()
    return portal, ids


def _positions(html: str) -> dict[int, tuple[str, str]]:
    rows = re.findall(
        r'<tr id="(?:team-)?job-(\d+)">.*?class="num pos-team">(.*?)</td>\s*'
        r'<td class="num pos-cluster">(.*?)</td>',
        html,
        re.S,
    )
    return {int(j): (t, c) for j, t, c in rows}


def test_my_jobs_shows_position_wait_estimate_reason_and_who_is_ahead(
    queued: tuple[Portal, list[int]],
) -> None:
    portal, (a, b, c) = queued
    html = portal.as_("vision-member").get("/portal/jobs").text
    assert _positions(html) == {a: ("1", "1"), b: ("2", "2"), c: ("3", "3")}
    row = re.search(rf'<tr id="job-{c}">(.*?)</tr>', html, re.S).group(1)  # type: ignore[union-attr]
    assert "1 min" in row  # waiting since it was submitted
    assert ">estimate</span>" in row
    assert re.search(r"in \d+ h", row)
    assert "waiting:" in row
    assert "quota" in row
    assert "2 jobs ahead" in row
    assert f"#{a} a</a> by vision-member: 8 GPUs" in row
    api = portal.plane.client.get(f"/api/v1/jobs/{c}", headers=portal.plane.auth("admin"))
    assert api.json()["queue_position"] == {"team": 3, "cluster": 3}  # the API agrees
    mine = portal.as_("vision-lead").get("/portal/jobs?mine=true").text
    assert _positions(mine) == {}  # the lead submitted none of them


def test_jobs_ahead_of_other_teams_are_counted_not_named() -> None:
    index = QueueIndex(
        cycle=1,
        at_s=0.0,
        eta_at_s=None,
        cluster_pos={1: 1, 2: 2, 3: 3},
        team_pos={1: 1, 2: 1, 3: 2},
        reasons={},
        etas={},
        order=((1, "vision"), (2, "nlp"), (3, "vision")),
    )
    member = Principal(user="u", role="member", team_id=1, team="vision", token_id=1)

    class NoStore:
        def scalars(self, _: object) -> list[object]:
            return []

    ahead = ahead_of(NoStore(), index, member, [3])[3]  # type: ignore[arg-type]
    assert (ahead.other_teams, ahead.total) == (1, 2)


def test_a_lead_raises_a_job_and_its_queue_position_changes(
    queued: tuple[Portal, list[int]],
) -> None:
    portal, (a, b, c) = queued
    member = portal.as_("vision-member")
    assert 'id="raise-' not in member.get("/portal/team").text
    r = member.post(f"/portal/jobs/{c}/priority", {"priority_class": "production"})
    assert r.status_code == 403  # members do not reorder
    lead = portal.as_("vision-lead")
    team = lead.get("/portal/team").text
    assert _positions(team)[c] == ("3", "3")
    form = re.search(
        rf'<form method="post" action="/portal/jobs/{c}/priority".*?</form>', team, re.S
    ).group(0)  # type: ignore[union-attr]
    assert 'name="priority_class" value="production"' in form  # Raise: one class up
    r = lead.post(
        f"/portal/jobs/{c}/priority",
        {"priority_class": "production", "next": "/portal/team?team=vision"},
    )
    assert r.status_code == 303
    assert r.headers["location"] == "/portal/team?team=vision"
    portal.plane.cycle(10)  # the scheduler's next cycle orders the queue again
    team = lead.get("/portal/team").text
    assert _positions(team) == {c: ("1", "1"), a: ("2", "2"), b: ("3", "3")}
    timeline = lead.get(f"/portal/jobs/{c}").text
    assert "standard -&gt; production by vision-lead" in timeline


def test_a_member_cancels_a_waiting_job(queued: tuple[Portal, list[int]]) -> None:
    portal, (a, _, _) = queued
    viewer = portal.as_("vision-viewer")
    assert viewer.post(f"/portal/jobs/{a}/cancel").status_code == 403
    r = portal.as_("vision-member").post(f"/portal/jobs/{a}/cancel")
    assert r.status_code == 303
    assert r.headers["location"] == f"/portal/jobs/{a}"
    page = portal.as_("vision-member").get(f"/portal/jobs/{a}").text
    assert "state-cancelled" in page
    assert 'id="cancel-job"' not in page
