"""My jobs / queue and the team's queue: positions, waits, estimates, reasons, the jobs
ahead, and a lead reordering the team's jobs by priority class and within a class."""

from __future__ import annotations

import re

import pytest
from sqlalchemy import Engine

from control.conftest import CLUSTER, build_plane
from gpufleet.api.views import QueueIndex
from gpufleet.cluster import Cluster
from gpufleet.control.auth import Principal
from gpufleet.control.snapshot import Queue, encode
from gpufleet.portal.queue import ahead_of
from gpufleet.specs.cluster import ClusterSpec

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
        queue=Queue.decode(*encode([(1, "vision"), (2, "nlp"), (3, "vision")], {})),
        etas={},
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


def _buttons(html: str, job_id: int) -> list[str]:
    """The reorder buttons of a job's row on the team page, in order."""
    row = re.search(rf'<tr id="team-job-{job_id}">(.*?)</tr>', html, re.S)
    assert row, f"no row for job {job_id}"
    return re.findall(rf'<button type="submit" id="([a-z]+)-{job_id}"', row.group(1))


def test_a_lead_moves_a_job_within_its_class_and_positions_change_next_cycle(
    queued: tuple[Portal, list[int]],
) -> None:
    portal, (a, b, c) = queued
    member = portal.as_("vision-member")
    assert _buttons(member.get("/portal/team").text, c) == []
    assert member.post(f"/portal/jobs/{c}/move", {"to": "top"}).status_code == 403
    lead = portal.as_("vision-lead")
    team = lead.get("/portal/team").text
    assert _buttons(team, a) == ["raise", "lower", "down"]  # first of its class
    assert _buttons(team, b) == ["raise", "lower", "top", "up", "down"]
    assert _buttons(team, c) == ["raise", "lower", "top", "up"]  # last
    form = re.search(
        rf'<form method="post" action="/portal/jobs/{c}/move"[^>]*>(.*?)</form>', team, re.S
    )
    assert form is not None
    assert f'hx-post="/portal/jobs/{c}/move"' in form.group(0)  # htmx swaps the queue only
    assert 'hx-select="#team-queue"' in form.group(0)
    assert 'name="to" value="top"' in form.group(1)
    assert 'name="csrf_token"' in form.group(1)  # and it posts without JavaScript
    assert lead.post(f"/portal/jobs/{c}/move", {"to": "top"}, csrf=False).status_code == 403

    r = lead.post(f"/portal/jobs/{c}/move", {"to": "top", "next": "/portal/team?team=vision"})
    assert r.status_code == 303
    assert r.headers["location"] == f"/portal/team?team=vision&moved={c}"
    page = lead.get(r.headers["location"]).text
    assert f"Moved #{c} c: now 1 of the team's 3 waiting standard jobs. The <em>In team" in page
    # the positions are the API's, from the last cycle, until the next cycle uses the move
    assert _positions(page) == {a: ("1", "1"), b: ("2", "2"), c: ("3", "3")}
    api = portal.plane.client.get(f"/api/v1/jobs/{c}", headers=portal.plane.auth("admin"))
    assert api.json()["queue_position"] == {"team": 3, "cluster": 3}
    assert _buttons(page, c) == ["raise", "lower", "down"]  # the class order is new already
    portal.plane.cycle(10)
    team = lead.get("/portal/team").text
    assert _positions(team) == {c: ("1", "1"), a: ("2", "2"), b: ("3", "3")}
    timeline = lead.get(f"/portal/jobs/{c}").text
    assert "moved in the team&#39;s queue" in timeline
    assert "to the top among vision&#39;s standard jobs (3 -&gt; 1 of 3) by vision-lead" in timeline

    # htmx: the CSRF token in the header, the redirect followed, the queue in the answer
    r = lead.client.post(
        f"/portal/jobs/{a}/move",
        data={"to": "down", "next": "/portal/team?team=vision"},
        headers={"HX-Request": "true", "X-CSRF-Token": lead.csrf},
    )
    assert r.status_code == 200
    assert str(r.url).endswith(f"/portal/team?team=vision&moved={a}")
    assert 'id="team-queue"' in r.text
    assert f"Moved #{a} a: now 3 of the team" in r.text
    portal.plane.cycle(10)
    assert _positions(lead.get("/portal/team").text) == {
        c: ("1", "1"),
        b: ("2", "2"),
        a: ("3", "3"),
    }


@pytest.mark.parametrize(
    ("who", "data", "status"),
    [
        ("nlp-lead", {"to": "top"}, 404),  # another team's job: not found
        ("vision-lead", {"to": "sideways"}, 422),
        ("vision-lead", {}, 422),
        ("vision-lead", {"to": "top", "before": "1"}, 422),
        ("vision-lead", {"before": "x"}, 422),
        ("vision-viewer", {"to": "top"}, 403),
    ],
    ids=["other-team", "bad-place", "no-place", "two-places", "bad-before", "viewer"],
)
def test_a_bad_move_is_refused_with_a_page(
    queued: tuple[Portal, list[int]], who: str, data: dict[str, str], status: int
) -> None:
    portal, (_, b, _) = queued
    r = portal.as_(who).post(f"/portal/jobs/{b}/move", data)
    assert r.status_code == status
    assert "<h1" in r.text  # an error page with the navigation, not a traceback


def test_a_move_goes_back_only_to_a_portal_page(queued: tuple[Portal, list[int]]) -> None:
    portal, (_, b, _) = queued
    r = portal.as_("vision-lead").post(
        f"/portal/jobs/{b}/move", {"to": "top", "next": "https://example.com/x"}
    )
    assert r.headers["location"] == f"/portal/team?moved={b}"


def test_no_move_buttons_where_the_profile_does_not_order_a_class_by_time(
    portal_engine: Engine,
) -> None:
    cluster = Cluster.from_spec(ClusterSpec.model_validate(CLUSTER))
    portal = Portal(build_plane(portal_engine, cluster, profile="slurm-like"))
    _, b = (portal.submit_api("vision-member", name=n, gpus=8, workers=2) for n in "ab")
    portal.plane.cycle()
    html = portal.as_("vision-lead").get("/portal/team").text
    assert "does not order a class by time" in html
    assert [x for x in _buttons(html, b) if x in ("top", "up", "down")] == []


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
    # issue 30: a job cancelled while it waited no longer reads "Not placed yet"
    assert "Not placed yet" not in page
    assert "Never placed: it ended before it got GPUs." in page
