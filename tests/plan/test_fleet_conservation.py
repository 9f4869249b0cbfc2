"""The multi-team plan counts the GPUs teams hold: its runs conserve GPU-seconds, its
usage over time matches an independent count from the jobs' own start and end times, and
the allocation it reports is never 0 % while jobs run.

(Its recorder once logged every release twice: each team's level fell below zero, was
clipped there, and every size read "GPU allocation 0.0 %" with 0 GPUs held by teams
whose jobs ran.)
"""

from __future__ import annotations

import math
import shutil
from pathlib import Path
from typing import Any

import pytest

from gpufleet.catalog.mig import mig_profiles_for, whole_gpu_slices
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.fleet import sweep
from gpufleet.plan.fleet_setup import make_variant, prepare_candidate, read_team_trace
from gpufleet.plan.fleet_sim import run_seed, simulate_variant
from gpufleet.sim.conservation import check

from .fleet_cases import SACCT_SAMPLE, spec, tiny

H100 = "h100-sxm5-80gb"


def _busier(**changes: Any) -> dict[str, Any]:
    """The tiny case with five times the training arrivals, so a few nodes stay busy."""
    data = tiny(horizon="36h", warmup="4h", **changes)
    for team in data["teams"]:
        for entry in team["workloads"]:
            if entry["kind"] == "training":
                entry["arrivals_per_day"] *= 5
    return data


@pytest.mark.parametrize("profile", ["default", "k8s-default", "fifo"])
def test_plan_runs_conserve_gpu_seconds(profile: str) -> None:
    plan = spec(_busier(profile=profile))
    c = prepare_candidate(plan, H100, [], Assumptions())
    v = make_variant(plan, c, [], profile=profile)
    for nodes in (c.min_nodes, c.min_nodes + 2):
        run = simulate_variant(v, nodes, 0)
        assert run.result.ledger is not None
        assert run.result.ledger.changes is not None, "the plan reads the change log"
        assert check(run.result) == []


def test_a_plan_run_with_a_trace_team_conserves_gpu_seconds(tmp_path: Path) -> None:
    data = _busier()
    data["teams"].append(
        {
            "name": "research",
            "targets": {"wait_p95": "8h"},
            "trace": {"path": "past.sacct", "format": "sacct"},
        }
    )
    shutil.copy(SACCT_SAMPLE, tmp_path / "past.sacct")
    plan = spec(data)
    traces = [read_team_trace(t, tmp_path) for t in plan.teams if t.trace is not None]
    c = prepare_candidate(plan, H100, traces, Assumptions())
    v = make_variant(plan, c, traces, profile="default")
    run = simulate_variant(v, c.min_nodes + 1, 1)
    assert check(run.result) == []
    assert run.result.metrics.per_team["research"]["gpu_hours"] > 0


def _share(gpus: int | None, workers: int, mig_profile: str | None) -> float:
    """GPUs a job holds, from its request and the catalog alone."""
    if gpus:
        return float(gpus * workers)
    assert mig_profile is not None
    compute = next(p.compute_slices for p in mig_profiles_for(H100) if p.profile == mig_profile)
    return compute / whole_gpu_slices(H100)


def test_gpus_held_match_an_independent_count_from_job_start_and_end_times() -> None:
    """FIFO (no preemption, no failures): a job holds its GPUs from its first start for its
    duration, a service replica until its window ends. Summed over jobs and clipped to
    [warmup, horizon], that is what the plan must report per team and in all."""
    plan = spec(_busier(profile="fifo"))
    c = prepare_candidate(plan, H100, [], Assumptions())
    v = make_variant(plan, c, [], profile="fifo")
    nodes = c.min_nodes
    run = simulate_variant(v, nodes, 0)
    assert run.result.metrics.preemptions == 0
    reduced = run_seed(v, nodes, 0)
    lo, hi = v.warmup_s, v.horizon_s
    gpu_s: dict[str, float] = {}
    for job in run.workload.jobs:
        start = run.result.first_start_s.get(job.name)
        if start is None:
            continue
        end = job.submit_s + job.duration_s if job.kind == "inference" else start + job.duration_s
        overlap = max(0.0, min(end, hi) - max(start, lo))
        share = _share(job.gpus, job.workers, job.mig_profile)
        gpu_s[job.team] = gpu_s.get(job.team, 0.0) + share * overlap
    span = hi - lo
    for team, seconds in gpu_s.items():
        # MIG slices weigh their share within a thousandth (by position on the GPU)
        assert reduced.teams[team].held_mean == pytest.approx(seconds / span, rel=2e-3), team
        assert reduced.teams[team].held_mean > 0
    allocation = math.fsum(gpu_s.values()) / span / reduced.gpus
    assert reduced.allocation == pytest.approx(allocation, rel=2e-3)
    assert reduced.allocation > 0.2


def test_the_allocation_is_never_zero_while_jobs_run(tmp_path: Path) -> None:
    """The search table's column: every size where jobs ran shows a positive allocation
    (not "0.0 % [0.0 %, 0.0 %]") and every team a positive mean held."""
    result = sweep(spec(_busier()), tmp_path, [3, 5, 8], seeds=2)
    for point in result.points:
        assert point.running_jobs_mean > 0
        assert point.allocation.mean is not None
        assert point.allocation.mean > 0.05, point.nodes
        assert point.allocation.high is not None
        assert point.allocation.high > point.allocation.mean
        for team in point.teams:
            assert team.held_gpus_mean > 0, (point.nodes, team.team)
    alloc = [p.allocation.mean or 0.0 for p in result.points]
    assert alloc[-1] < alloc[0], "the same work spread over more GPUs"
