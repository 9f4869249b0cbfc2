"""The expected start as a researcher reads it on the job and queue pages: a job that can
never start as things are says "never" (with the reason beside it), one behind more than
the simulation's horizon says so, and every estimate says how old it is (positions move
every cycle, ETAs only when the ETA child re-simulates)."""

from __future__ import annotations

import re

from .conftest import Portal

H100 = "h100-sxm5-80gb"


def _eta_cell(html: str) -> str:
    found = re.search(r"<dt>Expected start</dt><dd[^>]*>(.*?)</dd>", html, re.S)
    assert found, "the job page shows no expected start"
    return re.sub(r"\s+", " ", found.group(1))


def _row(html: str, job: int) -> str:
    found = re.search(rf'<tr id="job-{job}">(.*?)</tr>', html, re.S)
    assert found, f"job {job} is not listed"
    return re.sub(r"\s+", " ", found.group(1))


def test_a_gang_no_available_node_can_hold_says_never_not_no_estimate(portal: Portal) -> None:
    """h100-1 is down: a 2x8 gang cannot start until it is back. It read "no estimate yet",
    as if the estimate had not run."""
    plane = portal.plane
    r = plane.client.put(
        "/api/v1/admin/nodes/h100-1", json={"state": "down", "reason": "maint"},
        headers=plane.auth("admin"),
    )  # fmt: skip
    assert r.status_code == 200, r.text
    gang = portal.submit_api(
        "vision-member", name="gang", gpus=8, workers=2, accelerator=H100, runtime_estimate_s=600
    )
    plane.cycle()
    plane.reconciler.estimate_etas()
    cell = _eta_cell(portal.as_("vision-member").get(f"/portal/jobs/{gang}").text)
    assert "never" in cell
    assert "no estimate yet" not in cell
    assert "never" in _row(portal.as_("vision-member").get("/portal/jobs").text, gang)


def test_a_job_behind_more_than_the_horizon_says_not_within_it(portal: Portal) -> None:
    plane = portal.plane
    portal.submit_api(
        "vision-member", name="long", gpus=8, workers=2, accelerator=H100,
        runtime_estimate_s=40 * 86_400,
    )  # fmt: skip
    plane.cycle()
    wait = portal.submit_api(
        "vision-member", name="wait", gpus=8, accelerator=H100, runtime_estimate_s=600
    )
    plane.cycle(10)
    plane.reconciler.estimate_etas()
    cell = _eta_cell(portal.as_("vision-member").get(f"/portal/jobs/{wait}").text)
    assert "not within 30 days" in cell
    assert "never" not in cell


def test_an_estimate_says_how_old_it_is(portal: Portal) -> None:
    """Estimated, then 45 s pass (a cancel, a move or a node going down may have happened
    since): the page says "estimated 45 s ago" next to the time, on the job page and in the
    queue."""
    plane = portal.plane
    portal.submit_api(
        "vision-member", name="busy", gpus=8, workers=2, accelerator=H100, runtime_estimate_s=3600
    )
    plane.cycle()
    wait = portal.submit_api(
        "vision-member", name="wait", gpus=8, accelerator=H100, runtime_estimate_s=600
    )
    plane.cycle(10)
    plane.reconciler.estimate_etas()
    plane.clock.advance(45)
    member = portal.as_("vision-member")
    cell = _eta_cell(member.get(f"/portal/jobs/{wait}").text)
    assert re.search(r"in \d+ min", cell)
    assert "estimated 45 s ago" in cell
    assert "estimated 45 s ago" in _row(member.get("/portal/jobs").text, wait)
