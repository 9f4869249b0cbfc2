"""A waiting job that its team's quotas, changed after it was accepted, never let start is
told so at the next cycle, with what to change; it is not cancelled, and it is told again
when the quotas let it start.

A review lowered vision's H100 quota from 8 (+8 its cohort lends) to 2 under a waiting
4-GPU job: the job stayed pending with "waiting: team vision quota 8/2 h100-sxm5-80gb in
use, capped at 2 ..." and nothing on its timeline, though submit refuses the same job
outright ("cannot run: team vision may hold at most 2 ...")."""

from __future__ import annotations

from typing import Any

from gpufleet.control.quota_room import NEVER_MARK

from .conftest import Plane

H100 = "h100-sxm5-80gb"


def _post(plane: Plane, who: str, **body: Any) -> int:
    r = plane.client.post(
        "/api/v1/jobs", json={"name": "x", "accelerator": H100, **body}, headers=plane.auth(who)
    )
    assert r.status_code == 201, r.text
    return int(r.json()["id"])


def _job(plane: Plane, job_id: int) -> Any:
    r = plane.client.get(
        f"/api/v1/jobs/{job_id}", params={"events": True}, headers=plane.auth("vision-member")
    )
    assert r.status_code == 200, r.text
    return r.json()


def _quota(plane: Plane, team: str, **body: Any) -> None:
    r = plane.client.put(
        f"/api/v1/admin/teams/{team}/quotas/{H100}", json=body, headers=plane.auth("admin")
    )
    assert r.status_code == 200, r.text


def _busy(plane: Plane) -> int:
    """Both teams hold their 8 H100s, so vision's next job waits; vision's job id."""
    held = 0
    for who in ("nlp-member", "vision-member"):
        held = _post(plane, who, gpus=8, runtime_estimate_s=10**5)
    plane.cycle()
    plane.cycle(1)
    return held


def test_a_quota_cut_below_a_waiting_job_says_it_cannot_run(lite: Plane) -> None:
    _busy(lite)
    waiting = _post(lite, "vision-member", gpus=4)
    lite.cycle(1)
    assert _job(lite, waiting)["reason"].startswith("waiting")

    _quota(lite, "vision", guaranteed_gpus=2, borrowing=False)
    for _ in range(3):  # the event once, however many cycles see it
        lite.cycle(1)
    job = _job(lite, waiting)
    assert job["state"] == "pending"
    reason = job["reason"]
    assert reason.startswith(f"{NEVER_MARK}: team vision may hold at most 2 {H100} GPUs"), reason
    assert "this job needs 4" in reason
    assert "an admin can change the team's quotas" in reason
    assert "cancel this job and submit one that fits" in reason
    (part,) = job["waits"]
    assert part["kind"] == "quota-never"
    assert part["needed_gpus"] == 4
    assert part["numbers"]["most_gpus"] == {H100: 2}
    told = [e for e in job["events"] if e["kind"] == "quota"]
    assert [e["message"] for e in told] == [reason]

    _quota(lite, "vision", guaranteed_gpus=4, borrowing=False)
    lite.cycle(1)
    job = _job(lite, waiting)
    assert job["state"] == "pending"
    assert job["reason"].startswith("waiting"), job["reason"]
    told = [e["message"] for e in job["events"] if e["kind"] == "quota"]
    assert told == [reason, "its team's quotas let it start again: it waits as before"]


def test_a_cohort_that_stops_lending_strands_a_borrowing_job(lite: Plane) -> None:
    """vision's 16-GPU gang needs the 8 nlp lends: once nlp lends none, it can never start."""
    _busy(lite)
    gang = _post(lite, "vision-member", gpus=8, workers=2)
    lite.cycle(1)
    assert _job(lite, gang)["reason"].startswith("waiting")
    _quota(lite, "nlp", guaranteed_gpus=8, lending=False)
    lite.cycle(1)
    job = _job(lite, gang)
    assert job["state"] == "pending"
    assert job["reason"].startswith(
        f"{NEVER_MARK}: team vision may hold at most 8 {H100} GPUs (8 guaranteed)"
    ), job["reason"]
    assert "this job needs 16" in job["reason"]


def test_a_job_that_only_waits_is_not_said_to_never_run(lite: Plane) -> None:
    """Quota in use is not quota too small: vision's 4-GPU job waits for its own 8 to free."""
    _busy(lite)
    waiting = _post(lite, "vision-member", gpus=4)
    _quota(lite, "vision", guaranteed_gpus=4, borrowing=False)
    lite.cycle(1)
    job = _job(lite, waiting)
    assert not job["reason"].startswith("cannot run"), job["reason"]
    assert not [e for e in job["events"] if e["kind"] == "quota"]
