"""Quiet cycles (`decide(quiet=True)`, every profile) start and evict exactly what full ones do.

The simulator reads what a cycle starts and evicts, never why jobs wait, so its cycles are
quiet: no reasons are worded, and a backfill reservation is sought only when a job after the
blocked one could start (or a victim search begins). Each case replays one workload with
`SimConfig.lean_cycles` on (quiet, and lean where the profile allows) and off (full cycles,
as the control plane runs them) and compares every metric, first start, cycle and event:
a reservation sought too late (a job started on GPUs it should have masked) or a preemption
guard that skipped a search with victims changes a start time. The random queues with
priorities, runtime estimates and borrowing run every such profile both ways in
`test_lean_cycles.py` (its "quiet" case).
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pytest
from tests.sim.test_lean_cycles import _both, _open_teams

from gpufleet.cluster import State
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.census import RunningCensus
from gpufleet.sched.decide import decide
from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.engine import SimConfig
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec


@pytest.mark.parametrize("profile", ["default", "priority", "slurm-like", "kueue-like", "tiresias"])
def test_a_congested_stream_ends_the_same_quiet_or_full(profile: str) -> None:
    nodes = 8
    workload = synthetic_workload(nodes, 1_200, 1.0, seed=11)
    _both(bench_cluster(nodes), _open_teams(4, nodes * 8), workload, SimConfig(profile=profile))


def test_tiresias_with_borrowing_teams_ends_the_same_quiet_or_full() -> None:
    """Four teams of a cohort, each guaranteed a quarter of the cluster and borrowing the
    rest: quota reclaim has victims beside LAS, so a quiet cycle may neither stop nor pass
    over a job (nor jump over a run of them) while a team is owed what others borrow."""
    nodes = 8
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [
                {"name": f"t{i}", "cohort": "lab", "quota": {ACCELERATOR: nodes * 2}}
                for i in range(4)
            ],
        }
    )
    workload = synthetic_workload(nodes, 1_200, 1.0, seed=12)
    _both(bench_cluster(nodes), teams, workload, SimConfig(profile="tiresias"))


# -- decide(quiet=True) ----------------------------------------------------------------------


def _job(name: str, gpus: int, submitted_s: float, **kw: Any) -> JobSpec:
    return JobSpec.model_validate(
        {"team": "t0", **kw} | {"name": name, "gpus": gpus, "submitted_s": submitted_s}
    )


def _running(name: str, node: int, gpus: tuple[int, ...], ends_s: float, **kw: Any) -> JobSpec:
    return _job(
        name,
        len(gpus),
        0.0,
        state="running",
        started_s=0.0,
        runtime_estimate_s=ends_s,
        placement=[{"node": f"h100-{node}", "gpus": list(gpus)}],
        **kw,
    )


def test_a_quiet_cycle_seeks_no_reservation_when_nothing_after_the_blocked_job_could_start() -> (
    None
):
    """Every GPU is busy: the 16-GPU gang is blocked and nothing can start, so a quiet cycle
    never seeks its reservation; a full one does (and says so in the gang's reason)."""
    cluster = bench_cluster(2)
    running = [_running(f"r{i}", i // 8, (i % 8,), 100.0 * (i + 1)) for i in range(16)]
    pending = [_job("gang", 8, 1.0, workers=2), _job("small", 1, 2.0, runtime_estimate_s=50.0)]
    teams = _open_teams(1, 64)
    full = decide(cluster, State(cluster), running, pending, teams)
    quiet = decide(cluster, State(cluster), running, pending, teams, quiet=True)
    assert "gang" in full.reserved
    assert not quiet.reserved
    assert full.admitted == quiet.admitted == {}
    assert "gang" in full.pending_reasons
    assert not quiet.pending_reasons
    assert quiet.considered == ()


def test_a_quiet_cycle_seeks_the_reservation_before_a_later_job_starts() -> None:
    """Four GPUs are free: the 16-GPU gang is blocked; a 4-GPU job that would outlast the
    reservation may not take them (they are the gang's), one that ends before it may. The
    quiet cycle seeks the reservation when the first of them could start, so it admits what
    the full cycle admits."""
    cluster = bench_cluster(2)
    running = [_running(f"r{i}", i // 8, (i % 8,), 100.0 * (i + 1)) for i in range(12)]
    teams = _open_teams(1, 64)
    for estimate, starts in ((10_000.0, False), (50.0, True)):
        pending = [
            _job("gang", 8, 1.0, workers=2),
            _job("later", 4, 2.0, runtime_estimate_s=estimate),
        ]
        full = decide(cluster, State(cluster), running, pending, teams)
        quiet = decide(cluster, State(cluster), running, pending, teams, quiet=True)
        assert full.admitted == quiet.admitted
        assert ("later" in quiet.admitted) is starts
        assert quiet.reserved == full.reserved  # sought: the later job could start


def test_a_quiet_cycle_seeks_the_reservation_before_it_chooses_victims() -> None:
    """Three GPUs are free and the 16-GPU gang of the team furthest below its share is
    blocked: a full cycle masks those three for it. A production job of the other team then
    needs four GPUs, so it evicts standard-class jobs, and on the masked state it must evict
    four of them, not one: the quiet cycle seeks the reservation before its victim search."""
    cluster = bench_cluster(2)
    running = [
        _running(f"r{i}", i // 8, (i % 8,), 20_000.0 + i, team="t1", priority_class="standard")
        for i in range(13)
    ]
    pending = [
        _job("gang", 8, 1.0, workers=2),
        _job("urgent", 4, 2.0, team="t1", priority_class="production", runtime_estimate_s=1e6),
    ]
    teams = _open_teams(2, 64)
    full = decide(cluster, State(cluster), running, pending, teams, now_s=10_000.0)
    quiet = decide(cluster, State(cluster), running, pending, teams, now_s=10_000.0, quiet=True)
    assert len(full.preempted) == 4
    assert quiet.preempted.keys() == full.preempted.keys()
    assert quiet.admitted == full.admitted


def test_the_census_is_rebuilt_when_the_queue_grows_again(monkeypatch: pytest.MonkeyPatch) -> None:
    """The simulator keeps its census (`sched.census`) only while 16+ jobs wait, and
    rebuilds it from the queue and the running jobs when a later burst queues again; under
    debug checks every cycle compares it with a recount, and the run ends as a full one."""
    rebuilt = []
    real = RunningCensus.rebuild

    def counted(self: RunningCensus, running: Any, **kw: Any) -> None:
        rebuilt.append(1)
        real(self, running, **kw)

    monkeypatch.setattr(RunningCensus, "rebuild", counted)
    monkeypatch.setenv("GPUFLEET_DEBUG_CHECKS", "1")
    rng = np.random.default_rng(3)
    jobs = [
        TraceJob(
            f"j{burst}-{i}",
            f"t{i % 2}",
            burst * 200_000.0 + i,
            float(rng.uniform(600, 7200)),
            gpus=int(rng.choice((1, 2, 4, 8))),
            runtime_estimate_s=float(rng.uniform(600, 9000)),
        )
        for burst in range(3)
        for i in range(60)
    ]
    workload = Workload(tuple(jobs), CleaningReport("bursts", len(jobs), len(jobs)))
    _both(bench_cluster(4), _open_teams(2, 32), workload, SimConfig(profile="default"))
    assert len(rebuilt) >= 3
