"""GPU utilisation in the portal: heat map, per-team series, idle list, job page, windows.

Readings come through the emulated collector and the telemetry loop, as in `make demo`;
every figure shown is checked against the store's own numbers.
"""

from __future__ import annotations

import json
import re

import pytest

from gpufleet.control import telemetry_store as ts
from gpufleet.control.telemetry_sources import (
    BUSY_PROFILE_ENV,
    TelemetryLoop,
    TelemetryOptions,
    make_collector,
)
from gpufleet.portal.usage import window_for

from .conftest import Portal

CONFIG = ts.TelemetryConfig(interval_s=15, idle_after_s=300, max_gap_s=60)


@pytest.fixture
def read(portal: Portal) -> tuple[Portal, int, int]:
    """vision trains on 8 GPUs; nlp holds one GPU idle for 10 minutes (flagged after 5)."""
    plane = portal.plane
    train = portal.submit_api("vision-member", name="train", gpus=8, runtime_estimate_s=10**5)
    idle = portal.submit_api(
        "nlp-member",
        name="devbox",
        gpus=1,
        runtime_estimate_s=10**5,
        env={BUSY_PROFILE_ENV: "idle"},
    )
    plane.cycle()
    plane.cycle(1)
    collector = make_collector(
        TelemetryOptions(), "emulated", plane.sessions, plane.reconciler.cluster
    )
    assert collector is not None
    loop = TelemetryLoop(plane.sessions, collector, CONFIG, lambda: True, clock=plane.clock)
    for _ in range(40):
        plane.clock.advance(15)
        assert loop.tick() is not None
    return portal, train, idle


def test_the_admin_sees_every_gpu_and_team(read: tuple[Portal, int, int]) -> None:
    portal, train, idle = read
    page = portal.as_("admin").get("/portal/").text
    cells = re.findall(r'<li class="heat-cell[^"]*" title="([^"]+)"', page)
    assert len(cells) == 24  # 2 H100 nodes and one A100 node of 8
    assert sum("held by vision" in c for c in cells) == 8
    assert sum("held by nlp" in c for c in cells) == 1
    assert sum(": free," in c for c in cells) == 15
    with portal.plane.sessions() as s:
        now = {(g.node, g.gpu): g for g in ts.latest(s)}
    busy = [g.util_pct for g in now.values() if g.job_id == train]
    shown = [int(m) for c in cells for m in re.findall(r"held by vision, (\d+) % busy", c)]
    assert sorted(shown) == sorted(int(f"{u:.0f}") for u in busy)
    assert 'id="idle-table"' in page
    row = re.search(r'<tr class="flagged">\s*<th scope="row"><a[^>]*>#(\d+) ', page)
    assert row is not None
    assert int(row.group(1)) == idle
    data = json.loads(re.search(r'id="busy-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    labels = {d["label"] for d in data["datasets"]}
    assert labels == {"whole cluster", "vision", "nlp"}
    nlp = next(d for d in data["datasets"] if d["label"] == "nlp")
    assert max(v for v in nlp["data"] if v is not None) < 5


def test_a_member_sees_other_teams_as_another_team(read: tuple[Portal, int, int]) -> None:
    portal, train, idle = read
    page = portal.as_("nlp-member").get("/portal/").text
    assert "held by vision" not in page
    cells = re.findall(r'<li class="heat-cell[^"]*" title="([^"]+)"', page)
    assert sum("held by another team" in c for c in cells) == 8
    assert f"#{train} " not in page
    data = json.loads(re.search(r'id="busy-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
    assert {d["label"] for d in data["datasets"]} == {"whole cluster", "nlp"}
    assert f"#{idle} devbox" in page


def test_the_job_page_shows_its_utilisation(read: tuple[Portal, int, int]) -> None:
    portal, train, _ = read
    page = portal.as_("vision-member").get(f"/portal/jobs/{train}").text
    assert 'id="job-busy-chart"' in page
    share = re.search(r'id="job-busy-share">([\d.]+) %<', page)
    assert share is not None
    with portal.plane.sessions() as s:
        expected = ts.busy_share(s, train, 1)
    assert expected is not None
    assert abs(float(share.group(1)) - 100 * expected) < 0.06


def test_no_readings_says_so(portal: Portal) -> None:
    page = portal.as_("admin").get("/portal/").text
    assert 'id="no-readings"' in page
    assert 'id="busy-none"' in page


def test_the_window_fits_the_data() -> None:
    assert window_for(600) == "1h"
    assert window_for(3 * 3600) == "24h"
    assert window_for(40 * 86400) == "90d"
    assert window_for(400 * 86400) == "90d"


def test_a_lead_sees_who_holds_the_gpus_a_waiting_job_needs(portal: Portal) -> None:
    """vision borrows 8 H100s beyond its guarantee of 8; nlp's job waits for them."""
    plane = portal.plane
    portal.submit_api(
        "vision-member", name="big", gpus=8, workers=2, runtime_estimate_s=10**5, preemptible=False
    )
    plane.cycle()
    plane.cycle(1)
    waiting = portal.submit_api("nlp-member", name="w", gpus=8, accelerator="h100-sxm5-80gb")
    plane.cycle(10)
    lead = portal.as_("nlp-lead").get(f"/portal/jobs/{waiting}").text
    table = re.search(r'id="holders-table">(.*?)</table>', lead, re.S).group(1)  # type: ignore[union-attr]
    row = re.search(
        r'<th scope="row">vision</th><td class="num">(\d+)</td>'
        r'<td class="num">(\d+)</td><td class="num">(\d+)</td>',
        table,
    )
    assert row is not None
    assert row.groups() == ("16", "8", "8")  # holds 16, guaranteed 8, borrows 8
    member = portal.as_("nlp-member").get(f"/portal/jobs/{waiting}").text
    table = re.search(r'id="holders-table">(.*?)</table>', member, re.S).group(1)  # type: ignore[union-attr]
    assert "vision" not in table
    assert '<th scope="row">other teams</th><td class="num">16</td>' in table
    # the overview's total and the team rows count the same jobs
    page = portal.as_("admin").get("/portal/").text
    total = int(re.search(r'id="pending-total">(\d+) job', page).group(1))  # type: ignore[union-attr]
    rows = re.search(r'id="queue-table">(.*?)</table>', page, re.S).group(1)  # type: ignore[union-attr]
    pending = [int(n) for n in re.findall(r'</th>\s*<td class="num">(\d+)</td>', rows)]
    assert total == sum(pending) == 1


def test_the_quota_room_table_agrees_with_the_reason(portal: Portal) -> None:
    """The job page's quota numbers and the scheduler's sentence say the same thing."""
    plane = portal.plane
    portal.submit_api(
        "vision-member", name="big", gpus=8, workers=2, runtime_estimate_s=10**5, preemptible=False
    )
    plane.cycle()
    plane.cycle(1)
    waiting = portal.submit_api("vision-member", name="more", gpus=8, accelerator="h100-sxm5-80gb")
    plane.cycle(10)
    page = portal.as_("vision-member").get(f"/portal/jobs/{waiting}").text
    reason = re.search(r'id="job-reason">([^<]+)<', page).group(1)  # type: ignore[union-attr]
    table = re.search(r'id="quota-room-table">(.*?)</table>', page, re.S).group(1)  # type: ignore[union-attr]
    cells = re.findall(r'<td class="num">([^<]+)</td>', table)
    holds, guaranteed, room, free, lend, need = cells[:6]
    assert (holds, guaranteed, need) == ("16", "8", "8")
    assert int(room) == int(free) + int(lend) < int(need)
    assert f"quota {holds}/{guaranteed} h100-sxm5-80gb in use" in reason
    assert f"it may take {room} more now" in reason


def test_an_admin_sees_every_teams_allocation_line(portal: Portal) -> None:
    portal.submit_api("vision-member", name="a", gpus=4, runtime_estimate_s=10**5)
    portal.submit_api("nlp-member", name="b", gpus=2, runtime_estimate_s=10**5)
    portal.plane.cycle()
    portal.plane.cycle(1)
    portal.plane.cycle(600)

    def labels(who: str) -> set[str]:
        page = portal.as_(who).get("/portal/").text
        data = json.loads(re.search(r'id="allocation-data">(.*?)</script>', page, re.S).group(1))  # type: ignore[union-attr]
        return {d["label"] for d in data["datasets"]}

    assert {"vision allocated", "nlp allocated"} <= labels("admin")
    member = labels("nlp-member")
    assert "nlp allocated" in member
    assert "vision allocated" not in member
