"""Preemption events and queue reasons name no other team's job or team to a team member.

The scheduler's sentences name the preemptor ("preempted by job '3' ...", "team vision reclaims
...", "strict FIFO, job '3' ahead of it"). A member of the victim's team reads its job through
`GET /api/v1/jobs/{id}` and the portal's job page; there the preemptor's id and team are
left out (the stored event message is neutral, the queue reason redacted when read), while
an admin still reads the full story (the audit log keeps it, the views put it back).
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import Engine

from gpufleet.api.views import QueueIndex, public_reason
from gpufleet.cluster import Cluster
from gpufleet.control.snapshot import Queue, encode

from .conftest import Plane, build_plane

CSRF_RE = re.compile(r'name="csrf_token" value="([^"]+)"')


def submit(plane: Plane, who: str, **body: Any) -> int:
    body.setdefault("command", ["train.py"])
    r = plane.client.post("/api/v1/jobs", json=body, headers=plane.auth(who))
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def job(plane: Plane, who: str, job_id: int) -> dict[str, Any]:
    r = plane.client.get(f"/api/v1/jobs/{job_id}", headers=plane.auth(who))
    assert r.status_code == 200, r.text
    return dict(r.json())


def portal_page(plane: Plane, who: str, job_id: int) -> str:
    """The portal's job page as `who` sees it, logged in through the form."""
    client = TestClient(plane.client.app)
    form = client.get("/portal/login")
    csrf = CSRF_RE.search(form.text)
    assert csrf is not None
    r = client.post(
        "/portal/login",
        data={"token": plane.tokens[who], "csrf_token": csrf[1], "next": "/portal/"},
        follow_redirects=False,
    )
    assert r.status_code == 303, r.text
    page = client.get(f"/portal/jobs/{job_id}")
    assert page.status_code == 200, page.text
    return page.text


def told(body: dict[str, Any]) -> str:
    """Everything a job's body says in words: its reason and its events' messages."""
    return "\n".join([body["reason"] or "", *(e["message"] for e in body["events"] or [])])


def names_job(text: str, job_id: int) -> bool:
    """Whether `text` names job `job_id` the ways the scheduler's sentences do ('3') or a
    person would (#3, job 3) — not a GPU index or a number of hours that happens to match."""
    return re.search(rf"(?:'|#|\bjob ){job_id}(?!\d)", text) is not None


def preempted_by_priority(plane: Plane) -> tuple[int, int]:
    """nlp fills the H100s with opportunistic jobs, within its guarantee (each team is
    guaranteed all 16 here, so none borrows and quota reclaim has nothing to take back);
    vision's production job evicts one by priority. Returns (victim, preemptor)."""
    for team in ("vision", "nlp"):
        r = plane.client.put(
            f"/api/v1/admin/teams/{team}/quotas/h100-sxm5-80gb",
            json={"guaranteed_gpus": 16},
            headers=plane.auth("admin"),
        )
        assert r.status_code == 200, r.text
    low = [
        submit(
            plane,
            "nlp-member",
            name=f"low{i}",
            gpus=8,
            priority_class="opportunistic",
            checkpoint_interval_s=60,
            runtime_estimate_s=7200,
        )
        for i in range(2)
    ]
    plane.cycle()
    plane.cycle(1)
    plane.clock.advance(1800)  # past the minimum runtime before a priority eviction
    high = submit(plane, "vision-member", name="urgent", gpus=8, priority_class="production")
    plane.cycle()
    victims = [i for i in low if job(plane, "nlp-member", i)["state"] == "stopping"]
    assert len(victims) == 1
    return victims[0], high


def test_a_member_reads_no_preemptor_in_a_priority_preemption(plane: Plane) -> None:
    victim, high = preempted_by_priority(plane)
    for when in ("stopping", "requeued"):
        if when == "requeued":
            plane.cycle(31)  # grace over: killed
            plane.cycle(1)  # exit observed: requeued
        mine = job(plane, "nlp-member", victim)
        stop = next(e for e in mine["events"] if e["kind"] == "stopping")
        assert stop["message"].startswith("preempted by a higher-priority job; frees 8 ")
        assert "grace period 30 s" in stop["message"]
        assert not names_job(told(mine), high), told(mine)
        assert "vision" not in told(mine)
        full = job(plane, "admin", victim)
        stop = next(e for e in full["events"] if e["kind"] == "stopping")
        assert f"preempted by job '{high}'" in stop["message"]
        assert "team vision" in stop["message"]
    # the preemptor's own history names no victim either
    assert all(
        not names_job(e["message"], victim) and "nlp" not in e["message"]
        for e in job(plane, "vision-member", high)["events"]
    )
    page = portal_page(plane, "nlp-member", victim)
    assert "preempted by a higher-priority job" in page
    assert f"'{high}'" not in page
    assert "vision" not in page
    assert f"preempted by job &#39;{high}&#39;" in portal_page(plane, "admin", victim)
    audit = plane.client.get("/api/v1/admin/audit", headers=plane.auth("admin")).json()
    entry = next(a for a in audit if a["action"] == "job.preempted")
    assert entry["target"] == f"job/{victim}"
    assert entry["detail"]["preemptor"] == high
    assert entry["detail"]["preemptor_team"] == "vision"


def test_a_finished_victim_cached_for_members_still_shows_admins_the_preemptor(
    plane: Plane,
) -> None:
    victim, high = preempted_by_priority(plane)
    plane.cycle(31)
    plane.cycle(1)
    r = plane.client.post(f"/api/v1/jobs/{victim}/cancel", headers=plane.auth("nlp-member"))
    assert r.status_code == 200, r.text
    plane.cycle(1)
    assert job(plane, "nlp-member", victim)["state"] == "cancelled"  # now cached, final
    assert not names_job(told(job(plane, "nlp-member", victim)), high)
    assert f"preempted by job '{high}'" in told(job(plane, "admin", victim))
    assert not names_job(told(job(plane, "nlp-member", victim)), high)  # cache not polluted


def test_a_member_reads_no_reclaiming_team_in_a_quota_reclaim(plane: Plane) -> None:
    # nlp borrows vision's 8 H100s (both teams are guaranteed 8, cohort ml)
    borrowers = [
        submit(plane, "nlp-member", name=f"b{i}", gpus=8, priority_class="opportunistic")
        for i in range(2)
    ]
    plane.cycle()
    plane.cycle(1)
    assert all(job(plane, "nlp-member", i)["state"] == "running" for i in borrowers)
    owner = submit(plane, "vision-member", name="mine", gpus=8)
    plane.cycle()
    (victim,) = [i for i in borrowers if job(plane, "nlp-member", i)["state"] == "stopping"]
    mine = job(plane, "nlp-member", victim)
    stop = next(e for e in mine["events"] if e["kind"] == "stopping")
    assert stop["message"].startswith("preempted: another team of its cohort reclaims")
    assert not names_job(told(mine), owner)
    assert "vision" not in told(mine)
    full = told(job(plane, "admin", victim))
    assert f"preempted by job '{owner}': team vision reclaims" in full
    assert "which team nlp was borrowing" in full


def test_a_member_reads_no_other_teams_job_in_a_queue_reason(
    engine: Engine, cluster: Cluster
) -> None:
    plane = build_plane(engine, cluster, profile="strict-fifo")
    for gpus in (8, 4):  # nlp holds 12 H100s: its 8 and 4 of vision's
        submit(plane, "nlp-member", name=f"n{gpus}", gpus=gpus, runtime_estimate_s=7200)
    plane.cycle()
    plane.cycle(1)
    blocker = submit(plane, "vision-member", name="wide", gpus=8)  # 4 free: it blocks
    small = submit(plane, "nlp-member", name="small", gpus=1)
    plane.cycle()
    assert job(plane, "vision-member", blocker)["state"] == "pending"
    full = job(plane, "admin", small)
    assert full["state"] == "pending"
    assert f"strict FIFO, job '{blocker}' ahead of it" in full["reason"]
    mine = job(plane, "nlp-member", small)
    assert "strict FIFO, another team's job ahead of it" in mine["reason"]
    # the reason's records say the same, and name the blocker to the admin only
    (fifo,) = [w for w in mine["waits"] if w["kind"] == "strict-fifo"]
    assert fifo["blocking_job"] == "another team's job"
    assert fifo["text"] in mine["reason"]
    (full_fifo,) = [w for w in full["waits"] if w["kind"] == "strict-fifo"]
    assert full_fifo["blocking_job"] == str(blocker)
    assert not names_job(told(mine), blocker)
    assert "vision" not in told(mine)
    listed = plane.client.get("/api/v1/jobs", headers=plane.auth("nlp-member")).json()["jobs"]
    assert all(not names_job(j["reason"] or "", blocker) for j in listed)
    page = portal_page(plane, "nlp-member", small)
    assert "another team&#39;s job ahead of it" in page
    assert 'id="wait-table"' in page
    assert "Strict FIFO" in page
    assert f"&#39;{blocker}&#39;" not in page
    assert "vision" not in page


INDEX = QueueIndex(
    cycle=1,
    at_s=0.0,
    eta_at_s=None,
    queue=Queue.decode(*encode([(11, "vision"), (12, "nlp"), (13, "nlp")], {})),
    etas={},
)


@pytest.mark.parametrize(
    ("reason", "shown"),
    [
        pytest.param(
            "waiting: strict FIFO, job '11' ahead of it cannot start yet",
            "waiting: strict FIFO, another team's job ahead of it cannot start yet",
            id="another team's blocker is not named",
        ),
        pytest.param(
            "waiting: strict FIFO, job '12' ahead of it cannot start yet",
            "waiting: strict FIFO, job '12' ahead of it cannot start yet",
            id="its own team's blocker is",
        ),
        pytest.param(
            "no room; a 16-GPU reservation for job '99' starts in 5 min",
            "no room; a 16-GPU reservation for another team's job starts in 5 min",
            id="a job no longer queued is not named either",
        ),
        pytest.param(
            "cannot run: topology level 'rack' is not in this cluster (block, leaf)",
            "cannot run: topology level 'rack' is not in this cluster (block, leaf)",
            id="a quoted name that is no job id stays",
        ),
        pytest.param(
            "cannot run: team nlp is not in the teams file (nlp2, vision)",
            "cannot run: team nlp is not in the teams file",
            id="no list of teams",
        ),
    ],
)
def test_public_reason(reason: str, shown: str) -> None:
    assert public_reason(reason, "nlp", INDEX) == shown


def test_without_a_queue_index_every_quoted_job_is_anonymous() -> None:
    assert public_reason("strict FIFO, job '12' ahead", "nlp", None) == (
        "strict FIFO, another team's job ahead"
    )
