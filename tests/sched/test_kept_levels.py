"""A Tiresias queue kept by least-attained-service queue (`kept.KeptLasQueue`), the running
jobs' LAS census (`census.RunningLas`) and the stop rule they let a quiet cycle use.

The kept queues must give exactly `orders.Tiresias`'s order at every cycle's time,
starvation promotions included (a promotion due at the cycle's very time too); the census
must name exactly the queues `LasPreemption` would rank the running jobs in. A quiet cycle
that has both stops as soon as no waiting worker fits on a node even with every job LAS may
evict gone, where a full cycle looks at every waiting job.
"""

from __future__ import annotations

from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from gpufleet.cluster import State, Whole
from gpufleet.cluster.bench import ACCELERATOR, bench_cluster
from gpufleet.sched.census import Census, RunningCensus, RunningLas
from gpufleet.sched.decide import decide
from gpufleet.sched.framework import OrderContext
from gpufleet.sched.kept import KeptLasQueue, KeptLevels
from gpufleet.sched.las import TIRESIAS_QUEUES, LasQueues, attained_at
from gpufleet.sched.orders import Tiresias
from gpufleet.sched.team_index import team_index
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec

QUEUES = LasQueues(thresholds_gpu_s=(100.0, 1_000.0), starve_factor=2.0)
TEAMS = TeamsSpec.model_validate(
    {"kind": "teams", "teams": [{"name": "t", "quota": {ACCELERATOR: 64}}]}
)


def _job(name: str, submitted_s: float, attained_gpu_s: float, gpus: int = 1, **kw: Any) -> JobSpec:
    return JobSpec.model_validate(
        {
            "name": name,
            "team": "t",
            "gpus": gpus,
            "submitted_s": submitted_s,
            "attained_gpu_s": attained_gpu_s,
            **kw,
        }
    )


def _names(view: KeptLevels) -> list[str]:
    return [job.name for jobs in view.levels for job in jobs]


def _sorted(pending: dict[str, JobSpec], now_s: float) -> list[str]:
    ctx = OrderContext({}, now_s)
    return [job.name for job in Tiresias(QUEUES).order(list(pending.values()), ctx)]


_OP = st.one_of(
    st.tuples(
        st.just("add"),
        st.integers(0, 400),  # submitted
        st.sampled_from((0.0, 0.0, 50.0, 150.0, 900.0, 5_000.0)),  # attained GPU-s
        st.sampled_from((1, 2, 4)),
    ),
    st.tuples(st.just("remove"), st.integers(0, 1_000)),
    st.tuples(st.just("view"), st.integers(0, 600)),  # time forward
)


@settings(max_examples=300, deadline=None)
@given(ops=st.lists(_OP, min_size=1, max_size=80), active_at=st.sampled_from((2, 4, 16)))
def test_kept_levels_give_the_tiresias_order_at_every_cycle(
    ops: list[tuple[Any, ...]], active_at: int
) -> None:
    """Jobs join (some served before, so above queue 0 and due for promotion) and leave
    between cycles at times moving forward; each view is the sorted order at its time,
    while kept, dropped below half of `active_at` and kept again."""
    queue = KeptLasQueue(team_index(TEAMS), QUEUES, active_at=active_at)
    pending: dict[str, JobSpec] = {}
    now, made = 0.0, 0
    for op in ops:
        if op[0] == "add":
            _, submitted, attained, gpus = op
            job = _job(f"j{made}", min(float(submitted), now), attained, gpus)
            made += 1
            pending[job.name] = job
            queue.add(job)
        elif op[0] == "remove" and pending:
            job = pending.pop(sorted(pending)[op[1] % len(pending)])
            queue.remove(job)
        elif op[0] == "view":
            now += op[1]
            view = queue.view(list(pending.values()), now)
            if view is None:
                assert len(pending) < active_at or not queue.kept
                continue
            assert _names(view) == _sorted(pending, now)
            assert set(view.priority) == set(pending)


@settings(max_examples=300, deadline=None)
@given(
    sizes=st.lists(st.sampled_from((None, 1, 2, 4, 8)), min_size=1, max_size=30),
    start=st.integers(0, 31),
    room=st.integers(0, 9),
)
def test_the_next_fitting_job_is_the_first_a_walk_would_find(
    sizes: list[int | None], start: int, room: int
) -> None:
    """`KeptLevels.next_fitting` (a cycle's jump over jobs too big for any node) lands on
    the first job from `start` whose worker fits `room`, or that asks for anything but
    whole GPUs (a fraction: never passed over)."""
    queue = KeptLasQueue(team_index(TEAMS), QUEUES, active_at=1)
    pending = [
        _job(f"j{i}", float(i % 7), 0.0, gpus=size)
        if size is not None
        else JobSpec.model_validate(
            {"name": f"j{i}", "team": "t", "gpu_fraction": 0.5, "submitted_s": float(i % 7)}
        )
        for i, size in enumerate(sizes)
    ]
    for job in pending:
        queue.add(job)
    view = queue.view(pending, 0.0)
    assert view is not None
    jobs = view.levels[0]
    want = next(
        (i for i in range(start, len(jobs)) if not jobs[i].gpus or jobs[i].gpus <= room),
        max(start, len(jobs)) if start >= len(jobs) else len(jobs),
    )
    assert view.next_fitting(0, start, room) == want


def test_a_promotion_due_at_the_cycles_very_time_is_made() -> None:
    """A job served 150 GPU-s on one GPU (queue 1), requeued at 150 s when that run stopped,
    has starved once it has waited twice its 150 s run since: at 450 s exactly `pending`
    says queue 0, and so must the kept queues, whatever the rounding of the promotion time."""
    queue = KeptLasQueue(team_index(TEAMS), QUEUES, active_at=1)
    served = _job("served", 150.0, 150.0)
    fresh = _job("fresh", 200.0, 0.0)
    for job in (served, fresh):
        queue.add(job)
    for early in (449.0, 450.0 - 5e-4):  # the second within the slack: `pending` decides
        before = queue.view([served, fresh], early)
        assert before is not None
        assert _names(before) == ["fresh", "served"]
    assert QUEUES.pending(served, 450.0) == 0
    at = queue.view([served, fresh], 450.0)
    assert at is not None
    assert _names(at) == ["served", "fresh"]  # both in queue 0: queue-time order


_RUNNING = st.lists(
    st.tuples(
        st.floats(0.0, 1_000.0),  # start
        st.sampled_from((0, 500, 1_000, 2_000, 8_000)),  # milli-GPUs held
    ),
    max_size=25,
)


@settings(max_examples=300, deadline=None)
@given(running=_RUNNING, gone=st.sets(st.integers(0, 24)), later=st.floats(0.0, 5_000.0))
def test_the_running_census_ranks_as_a_recount(
    running: list[tuple[float, int]], gone: set[int], later: float
) -> None:
    """The highest queue and the jobs above each queue, read off the crossing times, equal
    a recount of every job's service in its current run now (`LasQueues.by_service`)."""
    census = RunningLas(QUEUES)
    kept: dict[str, tuple[float, int]] = {}
    for i, record in enumerate(running):
        census.add(f"r{i}", *record)
        kept[f"r{i}"] = record
    for i in gone:
        census.remove(f"r{i}")  # a name it never held is ignored
        kept.pop(f"r{i}", None)
    now = max((r[0] for r in running), default=0.0) + later
    queue_of = {name: QUEUES.by_service(attained_at(0.0, *r, now)) for name, r in kept.items()}
    assert census.highest(now) == max(queue_of.values(), default=-1)
    for q in range(-1, 3):
        assert set(census.above(q, now)) == {n for n, mine in queue_of.items() if mine > q}


# -- the stop rule ---------------------------------------------------------------------------


def _cycle_inputs() -> tuple[Any, ...]:
    """One 8-GPU node, full: a 2-GPU job that has run past the first threshold (queue 1,
    LAS may evict it) and a 6-GPU job in queue 0; 40 unserved 8-GPU jobs wait. No waiting
    job fits even with the 2-GPU job gone."""
    cluster = bench_cluster(1)
    now = 100_000.0
    node = cluster.nodes[0].name
    held = {"long": (0, 1), "short": (2, 3, 4, 5, 6, 7)}
    running = [
        _job(
            name,
            started,
            0.0,
            gpus=len(held[name]),
            state="running",
            started_s=started,
            placement=[{"node": node, "gpus": list(held[name])}],
            checkpoint_interval_s=600.0,  # LAS evicts only jobs that checkpoint
        )
        for name, started in (("long", 0.0), ("short", now - 10.0))
    ]
    state = State(cluster)
    for name, gpus in held.items():
        state.allocate(name, Whole(node, gpus))
    pending = [_job(f"p{i}", float(i), 0.0, gpus=8) for i in range(40)]
    return cluster, state, running, pending, now


def _quiet_cycle(
    running: list[JobSpec],
    pending: list[JobSpec],
    now: float,
    sizes: dict[int, int],
    queue0: list[JobSpec] | None = None,
) -> Any:
    """`_cycle_inputs`'s cycle, quiet, with the census and kept levels a simulator keeps
    (`queue0`: LAS queue 0's jobs, `pending` by default)."""
    cluster, state, _, _, _ = _cycle_inputs()
    las = RunningCensus(TEAMS, TIRESIAS_QUEUES)
    las.rebuild([(running[0], 0.0, 2_000), (running[1], now - 10.0, 6_000)])
    return decide(
        cluster,
        state,
        running,
        pending,
        TEAMS,
        profile="tiresias",
        now_s=now,
        usage={("t", ACCELERATOR): 8_000},
        quiet=True,
        census=Census(sizes, {}, las.ends, las.evictable, las.las),
        kept=KeptLevels(
            (pending if queue0 is None else queue0, []),
            dict.fromkeys((j.name for j in pending), 0),
            0,
        ),
    )


class _Counted(list[JobSpec]):
    taken = 0

    def __iter__(self) -> Any:
        for job in super().__iter__():
            _Counted.taken += 1
            yield job


def test_a_quiet_cycle_with_kept_levels_stops_when_no_las_victim_makes_room() -> None:
    cluster, state, running, pending, now = _cycle_inputs()
    assert TIRESIAS_QUEUES.running(running[0], 2_000, now) == 1
    full = decide(cluster, state, running, pending, TEAMS, profile="tiresias", now_s=now)
    assert full.admitted == full.preempted == {}
    assert len(full.considered) == 40  # a full cycle looks at every waiting job

    _Counted.taken = 0
    quiet = _quiet_cycle(running, pending, now, {8: 40}, queue0=_Counted(pending))
    assert quiet.admitted == quiet.preempted == {}
    assert _Counted.taken == 0  # stopped before the first job


def test_a_quiet_cycle_with_kept_levels_evicts_what_a_full_cycle_evicts() -> None:
    """The same node with a waiting 2-GPU job: LAS evicts the long job for it, quiet or
    full (the stop rule's room counts the GPUs LAS may free)."""
    cluster, state, running, pending, now = _cycle_inputs()
    pending = [*pending, _job("small", 50.0, 0.0, gpus=2)]
    full = decide(cluster, state, running, pending, TEAMS, profile="tiresias", now_s=now)
    assert set(full.preempted) == {"long"}
    assert set(full.admitted) == {"small"}
    quiet = _quiet_cycle(running, pending, now, {8: 40, 2: 1})
    assert quiet.preempted.keys() == full.preempted.keys()
    assert quiet.admitted.keys() == full.admitted.keys()


def test_kept_levels_are_only_for_quiet_tiresias_cycles() -> None:
    cluster, state, running, pending, _ = _cycle_inputs()
    levels = KeptLevels((pending, []), {}, 0)
    for profile, quiet in (("default", True), ("tiresias", False)):
        with pytest.raises(ValueError, match="kept levels"):
            decide(
                cluster, state, running, pending, TEAMS, profile=profile, quiet=quiet, kept=levels
            )
