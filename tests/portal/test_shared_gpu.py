"""A MIG GPU whose slices two teams hold is held, never free: on the Overview heat map, in
the store's latest reading and in `/metrics` (a review saw such a GPU as 'free' with
team="": the reading's holder was "no one team", which the map read as nobody)."""

from __future__ import annotations

import re

from gpufleet.control import telemetry_store as ts
from gpufleet.control.models import Allocation
from gpufleet.control.telemetry_sources import TelemetryLoop, TelemetryOptions, make_collector

from .conftest import Portal

A100 = "a100-sxm4-80gb"
CONFIG = ts.TelemetryConfig(interval_s=15, idle_after_s=300, max_gap_s=60)


def _shared(portal: Portal) -> tuple[str, int]:
    """vision and nlp each hold a 1g.10gb slice of the same A100 (the scheduler packs the
    second slice beside the first; asserted, so a change there shows here)."""
    plane = portal.plane
    for who in ("vision-member", "nlp-member"):
        portal.submit_api(who, name="nb", kind="interactive", mig_profile="1g.10gb")
    plane.cycle()
    plane.cycle(1)
    with plane.sessions() as s:
        slices = s.query(Allocation.slice_id, Allocation.job_id).all()
    gpus = {ts.gpu_index(None, sid) for sid, _ in slices}
    assert len(slices) == 2, slices
    assert len(gpus) == 1, f"the two slices are on GPUs {gpus}: the test needs one"
    return "a100-0", next(iter(gpus))  # type: ignore[return-value]


def _read(portal: Portal, rounds: int = 4) -> None:
    plane = portal.plane
    collector = make_collector(
        TelemetryOptions(), "emulated", plane.sessions, plane.reconciler.cluster
    )
    assert collector is not None
    loop = TelemetryLoop(plane.sessions, collector, CONFIG, lambda: True, clock=plane.clock)
    for _ in range(rounds):
        plane.clock.advance(15)
        assert loop.tick() is not None


def test_a_gpu_two_teams_share_is_held_by_several_teams(portal: Portal) -> None:
    node, gpu = _shared(portal)
    _read(portal)
    api = portal.plane.client.get("/api/v1/cluster", headers=portal.plane.auth("admin")).json()
    device = next(n for n in api["nodes"] if n["name"] == node)["devices"][gpu]
    assert device["allocated_milli"] > 0
    with portal.plane.sessions() as s:
        latest = {(g.node, g.gpu): g for g in ts.latest(s)}
    assert latest[(node, gpu)].team == ts.SEVERAL_TEAMS
    for who in ("admin", "vision-member", "nlp-member"):
        page = portal.as_(who).get("/portal/").text
        cells = re.findall(r'<li class="heat-cell([^"]*)" title="([^"]+)"', page)
        mine = [(cls, title) for cls, title in cells if title.startswith(f"GPU {gpu}: ")]
        label = f"GPU {gpu}: held by several teams, "
        assert any(title.startswith(label) and "held" in cls for cls, title in mine), (who, mine)
    metrics = portal.plane.client.get("/metrics", headers=portal.plane.auth("admin")).text
    line = re.search(
        rf'gpufleet_gpu_utilization_ratio\{{gpu="{gpu}",node="{node}",team="([^"]*)"\}}', metrics
    )
    assert line is not None
    assert line.group(1) == ts.SEVERAL_TEAMS
