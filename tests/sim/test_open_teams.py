"""A run without a teams file has open quotas: a job waits only for room, so a backfilling
profile reserves for it as it would for any job blocked by room.

With each team guaranteed the cluster's size, a team's own running jobs counted against it:
on a one-team trace every gang blocked by room was "beyond its quota", got no reservation,
and later jobs backfilled past it for as long as they liked."""

from __future__ import annotations

import pytest

from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.setup import open_teams
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.teams import OPEN_QUOTA_GPUS

from .test_engine import H100, cluster


def _job(name: str, submit_s: float, duration_s: float, workers: int = 1) -> TraceJob:
    return TraceJob(
        name, "t", submit_s, duration_s, gpus=8, workers=workers, runtime_estimate_s=duration_s
    )


@pytest.mark.parametrize("profile", ["default", "slurm-like"])
def test_a_gang_blocked_by_room_keeps_its_reservation(profile: str) -> None:
    """Two 8-GPU nodes. A holds one for 10 h; B (2 × 8 GPUs) needs both and can start when
    A ends; C (8 GPUs, 20 h) arrives after B and would delay it on the free node, so EASY
    keeps C out: B starts at 36,000 s and C after it. Before, B was over its quota of 16
    GPUs (8 running + 16 asked), had no reservation, and C ran first (B at 72,120 s)."""
    w = Workload(
        (_job("A", 0.0, 36_000.0), _job("B", 60.0, 3_600.0, 2), _job("C", 120.0, 72_000.0)),
        CleaningReport("test", 3, 3),
    )
    c = cluster(2)
    m = simulate(c, open_teams(c, w), w, SimConfig(profile=profile)).metrics
    starts = {r.name: r.first_start_s for r in m.jobs}
    assert starts == {"A": 0.0, "B": 36_000.0, "C": 39_600.0}


def test_open_quotas_never_bind() -> None:
    c = cluster(2)
    w = Workload((_job("A", 0.0, 1.0),), CleaningReport("test", 1, 1))
    (team,) = open_teams(c, w).teams
    assert [(q.flavor, q.guaranteed_gpus) for q in team.quotas] == [(H100, OPEN_QUOTA_GPUS)]
