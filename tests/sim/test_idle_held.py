"""Work is counted on the GPUs a job asked for; what a whole-GPU-only profile makes it hold
beyond them is idle-held (`idle_held_gpu_hours`), not useful work.

Under `k8s-default` (kube-scheduler without fractions) a 0.25-GPU job holds a whole GPU.
Its useful GPU-hours were counted on that whole GPU: eight 2-hour notebooks of 0.25 GPU
reported 16 GPU-hours of completed work (4 asked for), and the goodput ratio read 100 %
while three quarters of what they held did nothing. Held GPU-hours (allocation, per-team
GPU-hours) still count the whole GPU; held = useful + lost + gang wait + idle held, per job.
"""

from __future__ import annotations

from dataclasses import replace
from typing import Any

import pytest

from gpufleet.cluster import Cluster, Node
from gpufleet.sched.framework import Placement
from gpufleet.sim.conservation import check, check_ledger
from gpufleet.sim.engine import InitialRun, SimConfig, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.setup import open_teams
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.teams import TeamsSpec

A100 = "a100-sxm4-80gb"
HOUR = 3600.0


def _cluster(gpus: int = 8) -> Cluster:
    return Cluster(("node",), (Node("share-0", A100, gpus, fractions=True),))


def _workload(*jobs: TraceJob) -> Workload:
    return Workload(jobs, CleaningReport("test", len(jobs), len(jobs)))


def _job(name: str, submit_s: float, duration_s: float, **kw: Any) -> TraceJob:
    kw.setdefault("team", "research")
    return TraceJob(name, submit_s=submit_s, duration_s=duration_s, **kw)


def _notebooks() -> Workload:
    """Eight 0.25-GPU notebooks of 2 h, a minute apart, and two 1-GPU batch jobs of 1 h."""
    notebooks = [
        _job(f"nb{i}", 60.0 * i, 2 * HOUR, gpu_fraction=0.25, kind="interactive") for i in range(8)
    ]
    batch = [_job(f"b{i}", 0.0, HOUR, gpus=1) for i in range(2)]
    return _workload(*notebooks, *batch)


def _run(workload: Workload, profile: str, cluster: Cluster | None = None) -> SimResult:
    cluster = cluster or _cluster()
    return simulate(cluster, open_teams(cluster, workload), workload, SimConfig(profile=profile))


def _held_h(result: SimResult) -> float:
    assert result.ledger is not None
    return result.ledger.held_gpu_s / 3600


def test_shares_on_whole_gpus_are_credited_the_work_they_asked_for() -> None:
    w = _notebooks()
    asked_h = 8 * 0.25 * 2 + 2 * 1.0  # 6 GPU-hours of work asked for
    default, k8s = _run(w, "default"), _run(w, "k8s-default")
    for result in (default, k8s):
        jobs = result.metrics.jobs
        assert sum(j.requested_gpus * j.duration_s for j in jobs) / 3600 == pytest.approx(asked_h)
        assert result.metrics.gpu_hours_completed == pytest.approx(asked_h)
        assert check(result) == []
    # default places the shares as asked: nothing held beyond them
    assert default.metrics.idle_held_gpu_hours == 0.0
    assert default.metrics.goodput_ratio == pytest.approx(1.0)
    # k8s-default holds a whole GPU per notebook: 16 GPU-hours held for 4 of work
    m = k8s.metrics
    assert sum(j.gpus * j.duration_s for j in m.jobs) / 3600 == pytest.approx(18.0)
    assert _held_h(k8s) == pytest.approx(18.0)
    assert m.per_team["research"]["gpu_hours"] == pytest.approx(18.0)  # held, as before
    assert m.idle_held_gpu_hours == pytest.approx(12.0)
    assert m.goodput_ratio == pytest.approx(6.0 / 18.0)
    assert m.gpu_hours_per_day == pytest.approx(asked_h / (m.duration_s / 86_400))


def test_a_slice_on_a_whole_gpu_is_credited_its_compute_share() -> None:
    """A 3g.40gb job asks for 3 of an A100's 7 compute slices; on a whole GPU the other
    4/7 are held idle."""
    w = _workload(_job("chat", 0.0, 7 * HOUR, mig_profile="3g.40gb", kind="inference"))
    result = _run(w, "k8s-default", Cluster(("node",), (Node("whole-0", A100, 1),)))
    m = result.metrics
    assert check(result) == []
    assert _held_h(result) == pytest.approx(7.0)
    assert m.gpu_hours_completed == pytest.approx(3.0)
    assert m.idle_held_gpu_hours == pytest.approx(4.0)


def test_a_share_cut_by_the_horizon_has_its_request_in_progress_and_the_rest_idle() -> None:
    w = _workload(_job("nb", 0.0, 2 * HOUR, gpu_fraction=0.25))
    cluster = _cluster(1)
    config = SimConfig(profile="k8s-default", horizon_s=HOUR)
    result = simulate(cluster, open_teams(cluster, w), w, config)
    m = result.metrics
    assert check(result) == []
    assert m.jobs_unfinished == 1
    assert m.in_progress_gpu_hours == pytest.approx(0.25)
    assert m.idle_held_gpu_hours == pytest.approx(0.75)


def test_work_a_preempted_share_loses_is_counted_on_its_request() -> None:
    """A 0.25-GPU job without checkpoints on the one GPU is preempted after 30 min by a
    1-GPU job of higher priority, and restarts (5 min of overhead) after it: 35 min of its
    work lost, on 0.25 GPU; the other 0.75 of its GPU is idle-held all along."""
    teams = TeamsSpec.model_validate(
        {
            "kind": "teams",
            "priority_classes": [
                {"name": "high", "value": 1000, "preemptible": False},
                {"name": "low", "value": 100, "preemptible": True},
            ],
            "teams": [{"name": "research", "quota": {A100: 1}, "default_priority": "low"}],
        }
    )
    w = _workload(
        _job("nb", 0.0, HOUR, gpu_fraction=0.25),
        _job("urgent", 1800.0, HOUR, gpus=1, priority_class="high"),
    )
    config = SimConfig(profile="k8s-default", restart_overhead_s=300.0)
    result = simulate(_cluster(1), teams, w, config)
    m = result.metrics
    assert check(result) == []
    assert m.preemptions == 1
    assert m.lost_gpu_hours == pytest.approx(0.25 * (1800.0 + 300.0) / 3600)
    # the notebook held its GPU for 30 min + 5 min + 1 h; 0.75 of that was not asked for
    assert m.idle_held_gpu_hours == pytest.approx(0.75 * (1800.0 + 300.0 + HOUR) / 3600)
    assert m.gpu_hours_completed == pytest.approx(0.25 + 1.0)
    parts = (
        m.gpu_hours_completed
        + m.in_progress_gpu_hours
        + m.lost_gpu_hours
        + m.gang_wait_gpu_hours
        + m.idle_held_gpu_hours
    )
    assert parts == pytest.approx(_held_h(result), rel=1e-9)


def test_a_running_share_at_a_live_start_is_credited_its_request() -> None:
    now = 100_000.0
    trace = _job("nb", now - HOUR, 2 * HOUR, gpu_fraction=0.25)
    initial = InitialRun(trace, (Placement("share-0", gpus=(0,)),), A100, now - HOUR, HOUR)
    cluster = _cluster(1)
    empty = _workload()
    teams = open_teams(cluster, empty, extra_teams=["research"])
    config = SimConfig(profile="k8s-default")
    result = simulate(cluster, teams, empty, config, initial=[initial], start_s=now)
    assert check(result) == []
    assert result.metrics.gpu_hours_completed == pytest.approx(0.25)  # its hour in this run
    assert result.metrics.idle_held_gpu_hours == pytest.approx(0.75)


def test_work_hidden_in_idle_held_or_idle_counted_as_work_is_caught() -> None:
    """The conservation check holds each job's idle-held GPU-seconds to its placement and
    request: crediting the whole GPU as work again (the old accounting), or calling a job
    of a profile that places shares as asked idle, is a violation."""
    k8s = _run(_notebooks(), "k8s-default")
    assert k8s.ledger is not None
    held = k8s.ledger.jobs["nb0"]
    assert held.idle_gpu_s == pytest.approx(0.75 * held.held_gpu_s)
    old = replace(held, useful_gpu_s=held.useful_gpu_s + held.idle_gpu_s, idle_gpu_s=0.0)
    found = check_ledger(k8s.metrics, replace(k8s.ledger, jobs={**k8s.ledger.jobs, "nb0": old}))
    assert any("job nb0 " in v.message and "beyond its request" in v.message for v in found)

    default = _run(_notebooks(), "default")
    assert default.ledger is not None
    held = default.ledger.jobs["nb0"]
    hidden = replace(held, useful_gpu_s=0.5 * held.useful_gpu_s, idle_gpu_s=0.5 * held.useful_gpu_s)
    jobs = {**default.ledger.jobs, "nb0": hidden}
    found = check_ledger(default.metrics, replace(default.ledger, jobs=jobs))
    assert any("job nb0 " in v.message and "beyond its request" in v.message for v in found)
