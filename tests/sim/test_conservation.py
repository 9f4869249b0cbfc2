"""Conservation of GPU-seconds (`sim.conservation`) over many simulator configurations,
and the check itself catching broken accounting (the multi-team plan's double-counted
releases among them).

Every run in the suite is checked already (tests/conftest.py turns GPUFLEET_DEBUG_CHECKS
on, so `Simulation.run` raises on a violation); the runs here cover the configurations
that stress the accounting — every profile, failures and spot reclaims, MIG slices and
GPU fractions, re-cuts, traces, runs cut at a horizon, a live start — and call the check
explicitly, so they hold with the variable unset too. The multi-team plan's runs are in
tests/plan/test_fleet_conservation.py.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

import numpy as np
import pytest

from gpufleet.cluster import Cluster, Node, expand_group
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.framework import Placement
from gpufleet.sim import conservation, engine
from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.conservation import ConservationError, check, check_ledger, expected_share
from gpufleet.sim.engine import FailureModel, InitialRun, SimConfig, Simulation, SpotModel, simulate
from gpufleet.sim.ledger import HeldChange
from gpufleet.sim.metrics import MetricsRecorder, Sample
from gpufleet.sim.result import SimResult
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec

DATA = Path(__file__).parent / "data"
A100 = "a100-sxm4-80gb"
HOUR = 3600.0


def _teams(n: int, guaranteed: int, accelerator: str = ACCELERATOR) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {accelerator: guaranteed}} for i in range(n)],
        }
    )


def _assert_conserved(result: SimResult) -> None:
    assert result.ledger is not None
    assert check(result) == []
    m = result.metrics
    assert m.jobs_completed > 0
    # GPUs were held while jobs ran: the allocation is not 0 %, nor any running team's use
    assert m.gpu_allocation_ratio > 0
    for team in {j.trace.team for j in result.ledger.jobs.values() if j.held_gpu_s > 0}:
        assert m.per_team[team]["gpu_hours"] > 0, team


# -- generated workloads under every profile ----------------------------------------------


@pytest.mark.parametrize("profile", list(PROFILES))
def test_every_profile_conserves_gpu_seconds_on_an_overloaded_synthetic_stream(
    profile: str,
) -> None:
    """Four teams with guarantees that sum to the cluster, gangs of up to 4 nodes, 115 %
    load: borrowing, reclaims, priority preemption, backfill, partial gangs (k8s-default)."""
    w = synthetic_workload(8, 150, 1.15, seed=5)
    result = simulate(bench_cluster(8), _teams(4, 16), w, SimConfig(profile=profile, seed=1))
    _assert_conserved(result)


def _spot_cluster() -> Cluster:
    """Eight nodes, every third on spot capacity."""
    c = bench_cluster(8)
    return Cluster(
        c.levels,
        tuple(replace(n, capacity="spot") if i % 3 == 0 else n for i, n in enumerate(c.nodes)),
        name=c.name,
    )


def _failing(profile: str, sample_interval_s: float = 600.0) -> SimConfig:
    """GPU failures and spot reclaims often enough to stop jobs in a short run."""
    return SimConfig(
        profile=profile,
        seed=2,
        failures=FailureModel(gpu_mtbf_h=300.0, repair_mean_h=1.0),
        spot=SpotModel(reclaim_per_node_per_day=3.0, return_mean_h=1.0),
        sample_interval_s=sample_interval_s,
    )


@pytest.mark.parametrize(
    "profile", ["default", "priority", "fifo", "k8s-default", "slurm-like", "kueue-like"]
)
def test_failures_and_spot_reclaims_conserve_gpu_seconds(profile: str) -> None:
    config = _failing(profile)
    result = simulate(
        _spot_cluster(), _teams(4, 16), synthetic_workload(8, 150, 0.9, seed=6), config
    )
    assert result.metrics.failures + result.metrics.spot_reclaims > 0
    _assert_conserved(result)


@pytest.mark.parametrize("profile", ["k8s-default", "default", "fifo"])
def test_the_queue_censuses_count_each_waiting_unit_once(
    profile: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Every sample's queue (read off the engine's census, not the queue) counts each
    waiting unit once, to the end: a pod still waiting when its partial gang is stopped by a
    failure or a spot reclaim goes back in the queue once, not twice."""
    config = _failing(profile, sample_interval_s=60.0)
    sim = Simulation(
        _spot_cluster(), _teams(4, 16), synthetic_workload(8, 150, 0.9, seed=6), config
    )
    real_sample = sim.metrics.sample
    seen: list[tuple[int, int]] = []

    def sample(
        t_s: float, state: object, waiting: dict[object, int], running: int, jobs: int | None
    ) -> None:
        seen.append((sum(waiting.values()), len(sim.pending)))
        real_sample(t_s, state, waiting, running, jobs)  # type: ignore[arg-type]

    monkeypatch.setattr(sim.metrics, "sample", sample)
    result = sim.run()
    assert result.metrics.failures + result.metrics.spot_reclaims > 0
    assert seen
    assert all(counted == waiting for counted, waiting in seen)
    assert sum(waiting for _, waiting in seen) > 0
    assert sum(sim._waiting.values()) == sum(sim._sizes.values()) == len(sim.pending)


@pytest.mark.parametrize("profile", ["default", "k8s-default"])
def test_a_run_cut_at_its_horizon_counts_what_jobs_still_hold(profile: str) -> None:
    """Jobs running (and, without gangs, partial gangs holding) at the horizon count up to
    it, in the recorder and in each job's own account alike."""
    w = synthetic_workload(8, 150, 1.3, seed=7)
    horizon = w.jobs[len(w.jobs) // 2].submit_s
    result = simulate(
        bench_cluster(8), _teams(4, 16), w, SimConfig(profile=profile, horizon_s=horizon)
    )
    assert result.metrics.jobs_unfinished > 0
    assert result.ledger is not None
    assert result.ledger.end_s == horizon
    _assert_conserved(result)


# -- MIG slices and GPU fractions -----------------------------------------------------------


@cache
def _utilization_inputs() -> tuple[Cluster, TeamsSpec, Workload]:
    """Half a day of the utilisation-claims scenario: 256 A100s with MIG nodes cut
    all-balanced and fraction nodes; training gangs, batch, notebooks on fractions and
    services on 1g/2g/3g slices."""
    from gpufleet.sim.experiments import utilization_scenario
    from gpufleet.sim.generate import generate

    scenario = utilization_scenario(days=0.5)
    workload = generate(scenario.workload, np.random.default_rng(0))
    return Cluster.from_spec(scenario.cluster), scenario.teams, workload


@pytest.mark.parametrize(
    "profile", ["default", "k8s-default", "fgd", "binpack", "fgd-paper", "kueue-like"]
)
def test_mig_slices_and_fractions_count_by_their_share(profile: str) -> None:
    from gpufleet.sim.experiments import profile_setup

    cluster, teams, workload = _utilization_inputs()
    setup = profile_setup(profile, cluster, teams, workload)
    result = simulate(
        setup.cluster, setup.teams, setup.workload, SimConfig(profile=profile, horizon_s=43_200.0)
    )
    _assert_conserved(result)
    assert result.ledger is not None
    placed = {
        (j.trace.mig_profile, j.trace.gpu_fraction, j.placed_gpus)
        for j in result.ledger.jobs.values()
        if j.placed_gpus and not j.trace.gpus
    }
    if setup.mig:  # slices weigh their share of the GPU (3g of 7: ~0.43), fractions theirs
        assert any(mig == "3g.40gb" and 0.42 < g < 0.44 for mig, _, g in placed)
        assert any(f == 0.25 and g == 0.25 for _, f, g in placed)
    else:  # whole GPUs only: a slice or a share holds a whole GPU
        assert placed
        assert all(g == 1.0 for _, _, g in placed)


def test_a_mig_gpu_drained_and_re_cut_conserves_gpu_seconds() -> None:
    layout = (("1g.10gb", 7),)
    c = Cluster(("block", "leaf", "node"), (Node("m-0", A100, 2, ("b1", "l1"), mig=(layout,) * 2),))
    t = TeamsSpec.model_validate({"kind": "teams", "teams": [{"name": "a", "quota": {A100: 2}}]})
    jobs = [
        TraceJob(f"s{i}", "a", 60.0 * i, HOUR, mig_profile="1g.10gb", kind="batch")
        for i in range(9)
    ]
    jobs.append(TraceJob("chat", "a", 30.0, HOUR, mig_profile="3g.40gb", kind="inference"))
    w = Workload(tuple(jobs), CleaningReport("test", len(jobs), len(jobs)))
    result = simulate(c, t, w, SimConfig(profile="fifo", relayout_s=120.0))
    assert result.metrics.relayouts_applied >= 1
    _assert_conserved(result)


# -- traces -------------------------------------------------------------------------------


@cache
def _openb_head() -> tuple[Cluster, TeamsSpec, Workload]:
    """The bundled openb trace's first 1,500 pods (fractions and whole GPUs on typed nodes),
    arrivals 50 × faster, on every 12th node (498 GPUs), spread over three teams."""
    from gpufleet.sim.setup import cluster_from_nodes, open_teams
    from gpufleet.sim.traces import bundled_openb

    openb = bundled_openb()
    nodes = openb.nodes[::12]
    jobs = tuple(
        replace(j, submit_s=j.submit_s / 50, team=f"t{i % 3}")
        for i, j in enumerate(openb.jobs[:1500])
    )
    w = Workload(jobs, CleaningReport("openb-head", len(jobs), len(jobs)), nodes)
    cluster = cluster_from_nodes(nodes)
    return cluster, open_teams(cluster, w), w


@pytest.mark.parametrize("profile", ["default", "k8s-default", "fgd"])
def test_the_openb_trace_conserves_gpu_seconds(profile: str) -> None:
    cluster, teams, w = _openb_head()
    result = simulate(cluster, teams, w, SimConfig(profile=profile))
    assert any(j.trace.gpu_fraction for j in (result.ledger.jobs.values() if result.ledger else ()))
    _assert_conserved(result)


@pytest.mark.parametrize(
    ("file", "fmt"), [("philly_sample.json", "philly"), ("helios_sample.csv", "helios")]
)
def test_sample_traces_conserve_gpu_seconds(file: str, fmt: str) -> None:
    from gpufleet.sim.setup import open_teams
    from gpufleet.sim.traces import read_trace

    w = read_trace(DATA / file, fmt)
    cluster = bench_cluster(2)
    result = simulate(cluster, open_teams(cluster, w), w, SimConfig(profile="default"))
    _assert_conserved(result)


# -- a live start -------------------------------------------------------------------------


def test_a_live_start_with_running_jobs_conserves_gpu_seconds() -> None:
    """Jobs running at the clock's start hold their GPUs from it (not from their real
    start) in both accounts; later arrivals queue behind them."""
    now = 1_000_000.0
    c = Cluster(
        ("block", "leaf", "node"), tuple(expand_group("h", ACCELERATOR, 8, [("b1", "l1")] * 2))
    )
    initial = [
        InitialRun(
            TraceJob(f"r{i}", f"t{i}", now - HOUR, 3 * HOUR, gpus=8),
            (Placement(f"h-{i}", gpus=tuple(range(8))),),
            ACCELERATOR,
            started_s=now - HOUR,
            remaining_s=(i + 1) * HOUR,
        )
        for i in range(2)
    ]
    later = tuple(TraceJob(f"n{i}", f"t{i % 2}", now + 60.0 * i, HOUR, gpus=4) for i in range(4))
    w = Workload(later, CleaningReport("test", 4, 4))
    result = simulate(c, _teams(2, 8), w, SimConfig(), initial=initial, start_s=now)
    _assert_conserved(result)
    assert result.ledger is not None
    assert result.ledger.jobs["r1"].held_gpu_s == pytest.approx(8 * 2 * HOUR)


# -- the check catches broken accounting ---------------------------------------------------


@cache
def _busy_run() -> SimResult:
    c = bench_cluster(4)
    config = SimConfig(profile="default", seed=1)
    w = synthetic_workload(4, 60, 1.0, seed=8)
    return Simulation(c, _teams(2, 16), w, config, keep_changes=True).run()


def _ledger_with(**changes: object) -> tuple[SimResult, list[conservation.Violation]]:
    result = _busy_run()
    assert result.ledger is not None
    ledger = replace(result.ledger, **changes)  # type: ignore[arg-type]
    return result, check_ledger(result.metrics, ledger)


def test_a_change_log_that_counts_every_release_twice_is_caught() -> None:
    """The multi-team plan's bug (its recorder logged each release twice; its levels went
    below zero and, clipped there, read as 0 % allocation and 0 GPUs held)."""
    result = _busy_run()
    assert result.ledger is not None
    assert result.ledger.changes is not None
    doubled: list[HeldChange] = []
    for change in result.ledger.changes:
        doubled.append(change)
        if change[3] < 0:
            doubled.append(change)
    _, found = _ledger_with(changes=tuple(doubled))
    assert found
    assert {v.rule for v in found} <= {"capacity", "change-log"}
    assert found[0].rule == "capacity"
    assert "held -" in found[0].message  # names the team and its level below zero


def test_a_team_the_recorder_lost_is_caught() -> None:
    result = _busy_run()
    assert result.ledger is not None
    areas = dict(result.ledger.team_held_gpu_s)
    areas["t1"] = 0.0
    _, found = _ledger_with(team_held_gpu_s=areas)
    rules = {v.rule for v in found}
    assert {"team-integral", "team-sum"} <= rules
    assert any("team t1" in v.message for v in found)


def test_an_allocation_sample_above_capacity_is_caught() -> None:
    result = _busy_run()
    metrics = replace(result.metrics, samples=(Sample(10.0, 1.25, 0, 3, 0),))
    assert result.ledger is not None
    found = check_ledger(metrics, result.ledger)
    assert [v.rule for v in found] == ["capacity"]
    assert "125" in found[0].message


def test_a_slice_weighed_as_a_whole_gpu_is_caught() -> None:
    _, _, w = _utilization_inputs()
    job = next(j for j in w.jobs if j.mig_profile == "3g.40gb")
    from gpufleet.sim.ledger import JobHeld

    result = _busy_run()
    assert result.ledger is not None
    jobs = dict(result.ledger.jobs)
    jobs["x"] = JobHeld(replace(job, team="t0", submit_s=0.0), 0.0, 1.0, A100)
    _, found = _ledger_with(jobs=jobs)
    assert [v.rule for v in found] == ["share"]
    assert "3g.40gb" in found[0].message


@pytest.mark.parametrize(
    ("job", "whole_only", "share"),
    [
        (TraceJob("a", "t", 0.0, 1.0, gpus=4, workers=2), False, 8.0),
        (TraceJob("b", "t", 0.0, 1.0, gpu_fraction=0.3), False, 0.375),  # 3 eighths
        (TraceJob("c", "t", 0.0, 1.0, mig_profile="3g.40gb"), False, 3 / 7),
        (TraceJob("d", "t", 0.0, 1.0, mig_profile="3g.40gb"), True, 1.0),
        (TraceJob("e", "t", 0.0, 1.0, gpu_fraction=0.3), True, 1.0),
    ],
)
def test_expected_shares(job: TraceJob, whole_only: bool, share: float) -> None:
    assert expected_share(job, A100, whole_only)[0] == pytest.approx(share)


class _DoubleReleases(MetricsRecorder):
    """The plan's recorder before the fix: logs a release in `released` as well as in the
    `allocated` that `released` calls."""

    def released(self, t_s: float, run: engine._Run, gpus: float) -> None:
        super().released(t_s, run, gpus)
        if self.changes is not None:
            self.changes.append((t_s, run.trace.team, run.trace.kind, -gpus))


def test_debug_runs_raise_on_a_recorder_that_logs_releases_twice(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(engine, "MetricsRecorder", _DoubleReleases)
    c = bench_cluster(4)
    w = synthetic_workload(4, 40, 1.0, seed=8)
    monkeypatch.setenv(conservation.DEBUG_ENV, "1")
    with pytest.raises(ConservationError, match="GPU accounting does not add up"):
        Simulation(c, _teams(2, 16), w, SimConfig()).run()
    monkeypatch.setenv(conservation.DEBUG_ENV, "0")
    quiet = Simulation(c, _teams(2, 16), w, SimConfig(), keep_changes=True).run()
    assert check(quiet), "the check still finds it when asked"


def test_debug_checks_follow_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    for value, on in (("1", True), ("yes", True), ("0", False), ("", False)):
        monkeypatch.setenv(conservation.DEBUG_ENV, value)
        assert conservation.enabled() is on
    monkeypatch.delenv(conservation.DEBUG_ENV)
    assert not conservation.enabled()
    # without the checks nothing is logged unless asked: a plain run keeps no change log
    result = simulate(bench_cluster(2), _teams(2, 8), synthetic_workload(2, 10, 0.5), SimConfig())
    assert result.ledger is not None
    assert result.ledger.changes is None
    assert check(result) == []
