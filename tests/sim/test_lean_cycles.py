"""Lean cycles (`sched.lean`, issue 29) admit exactly what full cycles admit.

Each case replays one workload twice, with `SimConfig.lean_cycles` on and off, and compares
what the run ends with: every metric (samples included), each job's first start, and the
cycle and event counts. A lean cycle that started a job a full cycle would not (a wrong stop,
a job skipped that could start, a stale memo) changes a start time; one that missed a start
changes it too.
"""

from __future__ import annotations

import json
from dataclasses import replace
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from tests.sched.scenarios import A100, H100, leaves

from gpufleet.cluster import Cluster, State, Whole
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.decide import decide
from gpufleet.sched.lean import Lean, LeanQueue, qualifies
from gpufleet.sched.orders import fifo_key
from gpufleet.sched.registry import resolve
from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.engine import FailureModel, SimConfig, SpotModel, simulate
from gpufleet.sim.result import SimResult
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import TeamsSpec

LEAN_PROFILES = ("fifo", "strict-fifo", "fgd-paper")


def _outcome(result: SimResult) -> tuple[Any, ...]:
    return (
        json.dumps(result.metrics.to_json(series=True), sort_keys=True, default=str),
        sorted(result.first_start_s.items()),
        result.cycles,
        result.events,
    )


def _both(cluster: Cluster, teams: TeamsSpec, workload: Workload, config: SimConfig) -> None:
    lean = simulate(cluster, teams, workload, replace(config, lean_cycles=True))
    full = simulate(cluster, teams, workload, replace(config, lean_cycles=False))
    assert _outcome(lean) == _outcome(full)


def _open_teams(n: int, gpus: int) -> TeamsSpec:
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [{"name": f"t{i}", "quota": {ACCELERATOR: gpus}} for i in range(n)],
        }
    )


def test_only_profiles_without_eviction_or_reservation_in_fifo_order_qualify() -> None:
    allowed = {name for name, p in PROFILES.items() if qualifies(p)}
    assert allowed == set(LEAN_PROFILES)


@pytest.mark.parametrize("profile", LEAN_PROFILES)
def test_a_congested_stream_ends_the_same_lean_or_full(profile: str) -> None:
    nodes = 8
    workload = synthetic_workload(nodes, 1_500, 1.0, seed=5)
    _both(bench_cluster(nodes), _open_teams(4, nodes * 8), workload, SimConfig(profile=profile))


def test_failures_and_spot_reclaims_end_the_same_lean_or_full() -> None:
    """Nodes going down take GPUs (a lean cycle's 'nothing freed' still holds) and coming
    back frees them (the next cycle is full)."""
    c = bench_cluster(16, nodes_per_leaf=4)
    spot = Cluster(
        c.levels,
        tuple(replace(n, capacity="spot") if i % 4 == 0 else n for i, n in enumerate(c.nodes)),
        name=c.name,
    )
    config = SimConfig(
        profile="fifo",
        seed=3,
        failures=FailureModel(gpu_mtbf_h=500.0),
        spot=SpotModel(reclaim_per_node_per_day=4.0),
    )
    _both(spot, _open_teams(3, 128), synthetic_workload(16, 800, 1.1, seed=2), config)


def _mixed_cluster() -> Cluster:
    nodes = [
        *leaves(3, 2, acc=H100, group="h"),
        *leaves(2, acc=A100, group="a", gpus=4),
    ]
    return Cluster(("block", "leaf", "node"), tuple(nodes))


def _tight_teams() -> TeamsSpec:
    """Quotas that bind: a cohort whose teams borrow each other's idle guarantee within
    limits, and a team with a hard limit and no borrowing."""
    return TeamsSpec.model_validate(
        {
            "kind": "teams",
            "teams": [
                {
                    "name": "a",
                    "cohort": "ml",
                    "quotas": [
                        {"flavor": H100, "guaranteed_gpus": 16, "borrowing_limit_gpus": 8},
                        {"flavor": A100, "guaranteed_gpus": 4},
                    ],
                },
                {
                    "name": "b",
                    "cohort": "ml",
                    "quotas": [{"flavor": H100, "guaranteed_gpus": 16, "lending_limit_gpus": 8}],
                },
                {
                    "name": "c",
                    "quotas": [
                        {"flavor": H100, "guaranteed_gpus": 8, "limit_gpus": 12},
                        {"flavor": A100, "guaranteed_gpus": 4, "borrowing": False},
                    ],
                },
            ],
        }
    )


_JOB = st.tuples(
    st.sampled_from(("a", "b", "c")),
    st.sampled_from((1, 1, 2, 3, 4, 8)),  # whole GPUs per worker
    st.sampled_from((1, 1, 1, 2, 3)),  # workers
    st.floats(0.0, 300.0),  # gap to the previous arrival
    st.floats(60.0, 7_200.0),  # duration
    st.sampled_from(((), (H100,), (A100,))),
    st.sampled_from((None, None, "production", "opportunistic")),  # priority class
    st.sampled_from((None, 0.5, 1.0, 2.0)),  # runtime estimate / duration (backfill reads it)
)


def _workload(jobs: list[tuple[Any, ...]], fraction_at: int | None) -> Workload:
    out: list[TraceJob] = []
    t = 0.0
    for i, (team, gpus, workers, gap, duration, accs, cls, estimate) in enumerate(jobs):
        t += gap
        if i == fraction_at:  # a fraction waits: lean cycles fall back to full ones
            out.append(TraceJob(f"j{i}", team, t, duration, gpu_fraction=0.5, accelerators=(H100,)))
            continue
        out.append(
            TraceJob(
                f"j{i}",
                team,
                t,
                duration,
                gpus=gpus,
                workers=workers,
                accelerators=accs,
                priority_class=cls,
                runtime_estimate_s=None if estimate is None else duration * estimate,
            )
        )
    return Workload(tuple(out), CleaningReport("hypothesis", len(out), len(out)))


# the profiles that evict or reserve: their cycles are quiet (`decide(quiet=True)`), never lean
QUIET_ONLY = tuple(name for name in PROFILES if name not in LEAN_PROFILES)


@pytest.mark.parametrize("profiles", [LEAN_PROFILES, QUIET_ONLY], ids=["lean", "quiet"])
@settings(max_examples=150, deadline=None)
@given(
    jobs=st.lists(_JOB, min_size=10, max_size=70),  # enough to queue on 64 GPUs
    pick=st.integers(0, 100),
    fraction_at=st.one_of(st.none(), st.integers(0, 80)),
    interval=st.sampled_from((0.0, 10.0, 120.0)),
)
def test_random_queues_on_a_mixed_cluster_with_binding_quotas_end_the_same(
    profiles: tuple[str, ...],
    jobs: list[tuple[Any, ...]],
    pick: int,
    fraction_at: int | None,
    interval: float,
) -> None:
    """Binding quotas with a cohort that borrows (quota reclaim has victims), three priority
    classes (priority preemption has victims), runtime estimates short, exact and long
    (backfill's "ends before the reservation"), on a mixed H100/A100 cluster."""
    config = SimConfig(profile=profiles[pick % len(profiles)], cycle_interval_s=interval)
    _both(_mixed_cluster(), _tight_teams(), _workload(jobs, fraction_at), config)


_LONG_JOB = st.tuples(
    st.sampled_from(("a", "b", "c")),
    st.sampled_from((1, 2, 4, 8)),
    st.sampled_from((1, 1, 2, 3)),
    st.floats(0.0, 120.0),
    st.floats(600.0, 40_000.0),  # long enough to cross Tiresias's 16 GPU-hours
    st.sampled_from(((), (H100,), (A100,))),
    st.sampled_from((None, None, "production", "opportunistic")),
    st.sampled_from((None, 1.0)),
)


@settings(max_examples=80, deadline=None)
@given(
    jobs=st.lists(_LONG_JOB, min_size=30, max_size=90),
    fraction_at=st.one_of(st.none(), st.integers(0, 100)),
    interval=st.sampled_from((0.0, 60.0)),
)
def test_random_long_queues_under_tiresias_end_the_same(
    jobs: list[tuple[Any, ...]], fraction_at: int | None, interval: float
) -> None:
    """Tiresias with jobs long enough to cross its threshold and queues long enough (16+)
    for the simulator to keep them by LAS queue: LAS evictions, the LAS floor and room,
    quota reclaim beside them (a borrowing cohort), a fraction now and then (no room bound
    speaks for it)."""
    config = SimConfig(profile="tiresias", cycle_interval_s=interval)
    _both(_mixed_cluster(), _tight_teams(), _workload(jobs, fraction_at), config)


# -- decide(lean=...) and the queue a caller keeps ------------------------------------------


def _job(name: str, gpus: int, submitted_s: float, **kw: Any) -> JobSpec:
    return JobSpec.model_validate(
        {"name": name, "team": "t0", "gpus": gpus, "submitted_s": submitted_s, **kw}
    )


def test_a_profile_that_evicts_or_reserves_refuses_a_lean_cycle() -> None:
    c = bench_cluster(2)
    for profile in ("default", "tiresias", "slurm-like"):
        assert not qualifies(resolve(profile).profile)
        with pytest.raises(ValueError, match="does not allow lean cycles"):
            decide(
                c,
                State(c),
                [],
                [_job("a", 1, 0.0)],
                _open_teams(1, 16),
                profile=profile,
                lean=Lean(),
            )


def test_a_lean_cycle_stops_once_no_node_has_room_for_the_smallest_worker() -> None:
    """Two nodes, one with 2 GPUs free: the first 2-GPU job starts, and nothing after it is
    looked at, not even the 1-GPU job at the back that a full cycle would reach and place
    if room were left (there is none)."""
    c = bench_cluster(2)
    state = State(c)
    state.allocate("bg0", Whole(c.nodes[0].name, tuple(range(8))))
    state.allocate("bg1", Whole(c.nodes[1].name, tuple(range(6))))
    pending = [_job("big", 8, 0.0), _job("two", 2, 1.0), _job("one", 1, 2.0)]
    teams = _open_teams(1, 16)
    full = decide(c, state, [], pending, teams, profile="fifo")
    lean = decide(c, state, [], pending, teams, profile="fifo", lean=Lean(None, {8: 1, 2: 1, 1: 1}))
    assert set(full.admitted) == set(lean.admitted) == {"two"}
    assert full.considered == ("big", "two", "one")
    assert "one" in full.pending_reasons
    assert lean.considered == ()
    assert not lean.pending_reasons


def test_a_lean_cycle_after_only_arrivals_looks_at_the_new_jobs_alone() -> None:
    c = bench_cluster(1)
    state = State(c)
    state.allocate("bg", Whole(c.nodes[0].name, tuple(range(5))))
    old, new = _job("old", 8, 0.0), _job("new", 2, 5.0)
    lean = decide(
        c, state, [], [old, new], _open_teams(1, 8), profile="fifo", lean=Lean([new], {2: 1})
    )
    assert set(lean.admitted) == {"new"}


def test_the_kept_queue_is_in_fifo_order_and_knows_what_came_since_the_last_cycle() -> None:
    q = LeanQueue(best_effort=True, active_at=4)
    jobs = [_job(f"j{i}", 1 + i % 3, float(s)) for i, s in enumerate((5, 1, 3, 1, 9, 0))]
    pending = {j.name: j for j in jobs[:3]}
    for j in jobs[:3]:
        q.add(j)
    assert q.lean(7, pending.values()) is None  # three waiting: a full cycle, nothing kept
    assert q.jobs == []
    for j in jobs[3:]:
        q.add(j)
        pending[j.name] = j
    assert q.lean(7, pending.values()) == Lean(None, {1: 2, 2: 2, 3: 2})  # kept from here
    assert q.jobs == sorted(jobs, key=fifo_key)
    q.cycled(free_epoch=7)
    late = _job("late", 4, 2.0)  # submitted earlier than some, arrives (requeued) now
    q.add(late)
    q.remove(jobs[0])
    pending[late.name] = late
    del pending[jobs[0].name]
    assert q.lean(7, pending.values()) == Lean([late], {4: 1})  # nothing freed: the new one
    assert q.lean(8, pending.values()) == Lean(None, {1: 1, 2: 2, 3: 2, 4: 1})  # freed: all
    assert q.jobs == sorted([*jobs[1:], late], key=fifo_key)
    with pytest.raises(KeyError):
        q.remove(jobs[0])
    half = JobSpec.model_validate({"name": "half", "team": "t0", "gpu_fraction": 0.5})
    q.add(half)
    pending[half.name] = half
    assert q.lean(7, pending.values()) == Lean()  # a fraction waits: a full cycle
    for j in [*jobs[1:], late]:
        q.remove(j)
    assert q.jobs == []  # below half of active_at: dropped
    strict = LeanQueue(best_effort=False, active_at=1)
    strict.add(jobs[1])
    assert strict.lean(1, [jobs[1]]) == Lean(None, {2: 1})
    strict.cycled(free_epoch=1)
    strict.add(jobs[2])
    assert strict.lean(1, jobs[1:3]).fresh is None  # strict: a waiting job blocks new ones
