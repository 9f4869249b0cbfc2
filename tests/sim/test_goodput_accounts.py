"""Where a run's held GPU-hours went: completed work, work in progress at the end, work lost
and GPUs that partial gangs held waiting (the goodput ratio's parts); and the run's end.

A review found goodput 0.74 with no preemption and no failure on a run cut by a horizon
(the work of the jobs still running counted as waste), 218 GPU-hours under `k8s-default`
that no reported figure explained (pods holding GPUs while waiting for the rest of their
gang), and a run going on for 7.5 idle hours after its last job, until a failed node's
repair."""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.cluster import Cluster
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.conservation import check, check_ledger
from gpufleet.sim.engine import FailureModel, SimConfig, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.setup import placement_warnings
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.teams import TeamsSpec


def _teams(n: int, guaranteed: int) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: guaranteed}} for i in range(n)],
        }
    )


def _parts_h(result: SimResult) -> float:
    m = result.metrics
    return (
        m.gpu_hours_completed + m.in_progress_gpu_hours + m.lost_gpu_hours + (m.gang_wait_gpu_hours)
    )


def _held_h(result: SimResult) -> float:
    assert result.ledger is not None
    return result.ledger.held_gpu_s / 3600


def test_a_horizon_cuts_work_in_progress_it_does_not_waste_it() -> None:
    w = synthetic_workload(8, 150, 1.3, seed=7)
    horizon = w.jobs[len(w.jobs) // 2].submit_s
    result = simulate(
        bench_cluster(8), _teams(4, 16), w, SimConfig(profile="fifo", horizon_s=horizon)
    )
    m = result.metrics
    assert m.jobs_unfinished > 0
    assert m.preemptions == m.failures == 0
    assert m.in_progress_gpu_hours > 0.05 * _held_h(result)
    assert m.lost_gpu_hours == m.gang_wait_gpu_hours == 0.0
    assert m.goodput_ratio == pytest.approx(1.0)
    assert _parts_h(result) == pytest.approx(_held_h(result), rel=1e-9)
    assert check(result) == []


def test_partial_gangs_holding_gpus_are_counted_as_gang_wait() -> None:
    """Without gang scheduling, pods hold GPUs while the rest of their job waits: neither
    useful nor lost work, reported on its own and out of the goodput ratio."""
    w = synthetic_workload(8, 150, 1.15, seed=5)
    result = simulate(bench_cluster(8), _teams(4, 16), w, SimConfig(profile="k8s-default"))
    m = result.metrics
    assert m.gang_wait_gpu_hours > 0
    assert _parts_h(result) == pytest.approx(_held_h(result), rel=1e-9)
    useful = m.gpu_hours_completed + m.in_progress_gpu_hours
    assert m.goodput_ratio == pytest.approx(useful / _held_h(result))
    assert m.goodput_ratio is not None
    assert m.goodput_ratio < 1.0
    gang = simulate(bench_cluster(8), _teams(4, 16), w, SimConfig(profile="default"))
    assert gang.metrics.gang_wait_gpu_hours == 0.0


def test_a_job_whose_lost_work_went_unaccounted_is_caught() -> None:
    config = SimConfig(profile="default", seed=2, failures=FailureModel(300.0, 1.0))
    result = simulate(bench_cluster(8), _teams(4, 16), synthetic_workload(8, 150, 0.9, 6), config)
    assert result.ledger is not None
    assert result.metrics.lost_gpu_hours > 0
    assert check(result) == []
    name, held = next((n, h) for n, h in result.ledger.jobs.items() if h.lost_gpu_s > 0)
    jobs = {**result.ledger.jobs, name: replace(held, lost_gpu_s=0.0)}
    found = check_ledger(result.metrics, replace(result.ledger, jobs=jobs))
    assert found
    assert {v.rule for v in found} == {"goodput"}
    assert any(f"job {name} " in v.message for v in found)


@pytest.mark.parametrize("seed", range(4))
def test_a_run_ends_with_its_last_job_even_while_a_node_is_down(seed: int) -> None:
    """Nodes fail often and take days to repair: once the last job has ended nothing can
    change, and the run does not go on (idle) until the repair."""
    config = SimConfig(
        profile="default", seed=seed, failures=FailureModel(gpu_mtbf_h=100.0, repair_mean_h=48.0)
    )
    jobs = tuple(
        TraceJob(f"j{i}", f"t{i % 4}", 1800.0 * i, 3600.0, gpus=1 + i % 8) for i in range(24)
    )
    w = Workload(jobs, CleaningReport("t", 24, 24))
    result = simulate(bench_cluster(8), _teams(4, 16), w, config)
    m = result.metrics
    assert m.failures > 0
    assert m.jobs_unfinished == 0
    assert m.makespan_s is not None
    assert m.duration_s == pytest.approx(m.makespan_s)


def test_a_team_that_never_ran_is_listed_with_its_due() -> None:
    """Jain's index counts a starved team; the per-team table shows it (0 jobs, 0 GPU-hours,
    its entitled share) instead of leaving the shares shown summing to less than 100 %."""
    c = bench_cluster(1)
    jobs = (
        TraceJob("a", "t0", 0.0, 3600.0, gpus=8),
        TraceJob("b", "t1", 0.0, 3600.0, gpus=8, accelerators=("no-such-gpu",)),
    )
    w = Workload(jobs, CleaningReport("t", 2, 2))
    result = simulate(c, _teams(2, 8), w, SimConfig(profile="default"))
    per_team = result.metrics.per_team
    assert set(per_team) == {"t0", "t1"}
    assert per_team["t1"]["jobs_completed"] == 0
    assert per_team["t1"]["gpu_hours"] == 0.0
    assert per_team["t1"]["entitled_share"] == pytest.approx(0.5)
    assert sum(t["entitled_share"] for t in per_team.values()) == pytest.approx(1.0)


def test_jobs_larger_than_the_cluster_could_hold_are_warned_about() -> None:
    c: Cluster = bench_cluster(2)  # 2 x 8 GPUs
    jobs = (
        TraceJob("wide", "t", 0.0, 60.0, gpus=16),  # a worker larger than any node
        TraceJob("many", "t", 0.0, 60.0, gpus=8, workers=3),  # 24 GPUs on 16
        TraceJob("fits", "t", 0.0, 60.0, gpus=8, workers=2),
        TraceJob("odd", "t", 0.0, 60.0, gpus=3, workers=4),  # 2 per node: 4 workers fit
        TraceJob("more", "t", 0.0, 60.0, gpus=3, workers=5),
    )
    warnings = placement_warnings(c, Workload(jobs, CleaningReport("t", 5, 5)))
    assert len(warnings) == 1
    assert warnings[0].startswith("3 jobs ask for more whole GPUs than")
    assert warnings[0].endswith("they will never run")
