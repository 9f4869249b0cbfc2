"""The Team page's queue positions are the API's (one source of truth): a review saw
'#25 ... 4 jobs ahead of you' in first place on the Team page while the API and My jobs
gave it 5/5, because the page handed a class's places out again in submission order,
an order the scheduler does not keep (jobs within their team's guarantee go first)."""

from __future__ import annotations

import re

from .conftest import Portal

H100 = "h100-sxm5-80gb"


def _positions(html: str) -> dict[int, tuple[int, int]]:
    rows = re.findall(
        r'<tr id="team-job-(\d+)">.*?class="num pos-team">(\d+)</td>\s*'
        r'<td class="num pos-cluster">(\d+)</td>',
        html,
        re.S,
    )
    return {int(j): (int(t), int(c)) for j, t, c in rows}


def _api_positions(portal: Portal, who: str) -> dict[int, tuple[int, int]]:
    r = portal.plane.client.get("/api/v1/jobs?state=pending", headers=portal.plane.auth(who))
    assert r.status_code == 200, r.text
    return {
        j["id"]: (j["queue_position"]["team"], j["queue_position"]["cluster"])
        for j in r.json()["jobs"]
        if j["queue_position"]
    }


def test_team_page_positions_are_the_apis_when_guarantee_first_reorders(
    portal: Portal,
) -> None:
    # nlp holds all 16 H100s (8 of them borrowed from vision) and may not be preempted
    portal.submit_api(
        "nlp-member",
        name="hog",
        gpus=8,
        workers=2,
        accelerator=H100,
        preemptible=False,
        runtime_estimate_s=36_000,
    )
    portal.plane.cycle()
    portal.plane.cycle(1)
    # vision: first a job that would borrow (16 > its 8 guaranteed), then one within it
    big = portal.submit_api("vision-member", name="big", gpus=8, workers=2, accelerator=H100)
    small = portal.submit_api("vision-member", name="small", gpus=8, accelerator=H100)
    portal.plane.cycle(60)
    api = _api_positions(portal, "vision-lead")
    assert api[small][0] < api[big][0]  # the scheduler puts the guaranteed job first
    page = portal.as_("vision-lead").get("/portal/team").text
    assert _positions(page) == {big: api[big], small: api[small]}
    mine = portal.as_("vision-member").get("/portal/jobs").text
    assert re.search(rf'<tr id="job-{small}">.*?pos-team">{api[small][0]}</td>', mine, re.S)
