"""Tiresias's clock-driven moves ask for a scheduling cycle when they happen.

Under 2D-LAS a running job becomes a victim when its attained service crosses a queue
threshold, and a waiting job may evict again once it has starved long enough to be promoted
to the first queue. Neither needs an arrival or a finish; before the simulator queued an
event at each (`sim.las_clock`), the move waited for whatever event came next, and on one
node with two jobs `tiresias` was FIFO. LAS evicts only jobs that checkpoint: a job that
keeps nothing is never thrown away for a reordering (with the exact trigger, a congested
stream without checkpoints evicted restarted jobs again and again and never finished).
"""

from __future__ import annotations

from dataclasses import replace

import pytest

from gpufleet.sim.bench import synthetic_workload
from gpufleet.sim.engine import SimConfig, simulate
from gpufleet.sim.metrics import JobRecord
from gpufleet.sim.workload import TraceJob

from .test_engine import cluster, job, teams, workload

CKPT = {"checkpoint_interval_s": 600.0}  # saves its work when evicted (as on a notice)


def _run(profile: str, *jobs: TraceJob) -> tuple[dict[str, JobRecord], int, float | None]:
    """Each job's record, the preemptions and the makespan of jobs on one 8-GPU node (the
    simulated span ends with the last job: no stale clock event stretches it)."""
    w = workload(*jobs)
    m = simulate(cluster(1), teams("a"), w, SimConfig(profile=profile)).metrics
    assert m.jobs_completed == len(jobs)
    assert m.duration_s == m.makespan_s
    return {r.name: r for r in m.jobs}, m.preemptions, m.makespan_s


def test_fifo_runs_them_in_arrival_order() -> None:
    a, b = job("A", 0.0, 36_000.0, **CKPT), job("B", 3_600.0, 3_600.0, **CKPT)
    jobs, preemptions, _ = _run("fifo", a, b)
    assert (jobs["B"].first_start_s, jobs["A"].end_s, preemptions) == (36_000.0, 36_000.0, 0)


def test_crossing_the_threshold_lets_a_newcomer_evict_at_once() -> None:
    """A (8 GPUs, 10 h) runs from 0; B (8 GPUs, 1 h) arrives at 1 h. A reaches 16 GPU-hours
    at 2 h (57,600 GPU-s / 8 GPUs = 7,200 s) and B evicts it then, with no other event at
    that instant; B runs 7,200-10,800 and A, back with all its work saved, ends at 36,000 +
    3,600 + the 300 s restart. Before the crossing asked for a cycle, B waited for A's end
    (36,000) and tiresias was FIFO here."""
    a, b = job("A", 0.0, 36_000.0, **CKPT), job("B", 3_600.0, 3_600.0, **CKPT)
    jobs, preemptions, makespan = _run("tiresias", a, b)
    assert (jobs["B"].first_start_s, jobs["B"].end_s) == (7_200.0, 10_800.0)
    assert (jobs["A"].end_s, jobs["A"].attempts) == (39_900.0, 2)
    assert preemptions == 1
    assert makespan == 39_900.0
    assert (jobs["A"].jct_s + jobs["B"].jct_s) / 2 == 23_550.0


def test_a_starving_job_is_promoted_and_evicts_at_its_promotion_time() -> None:
    """A (8 GPUs, 30,000 s) from 0; B (8 GPUs, 16,000 s) at 3,600. B evicts A at 7,200 (A
    crossed 16 GPU-hours after 7,200 s of running). A waits in queue 1 and is promoted
    after waiting twice its running time: at 0 + 7,200 + 2 × 7,200 = 21,600. B has run
    14,400 s by then and sits in queue 1, so A evicts it, with nothing else happening at
    21,600. A ends at 21,600 + 300 + 22,800 = 44,700 and B, restarted then, at 44,700 + 300
    + 1,600 = 46,600. Without the promotion event A waited for B's end at 23,200 (and ended
    at 46,300, with one preemption)."""
    a, b = job("A", 0.0, 30_000.0, **CKPT), job("B", 3_600.0, 16_000.0, **CKPT)
    jobs, preemptions, makespan = _run("tiresias", a, b)
    assert jobs["B"].first_start_s == 7_200.0
    assert (jobs["A"].end_s, jobs["A"].attempts) == (44_700.0, 2)
    assert (jobs["B"].end_s, jobs["B"].attempts) == (46_600.0, 2)
    assert preemptions == 2
    # B's own promotion (at 46,800) is stale by then and past the last end: it does not
    # stretch the run (the simulated span ends at the last end too)
    assert makespan == 46_600.0


def test_a_job_that_keeps_nothing_is_never_evicted() -> None:
    """The same two jobs without checkpoints: evicting A at 7,200 would throw away two hours
    of its work for a reordering, so B waits for A's end (LAS order, no preemption)."""
    a, b = job("A", 0.0, 36_000.0), job("B", 3_600.0, 3_600.0)
    jobs, preemptions, _ = _run("tiresias", a, b)
    assert (jobs["B"].first_start_s, jobs["A"].attempts, preemptions) == (36_000.0, 1, 0)


@pytest.mark.parametrize("checkpoint_interval_s", [None, 600.0])
def test_a_congested_stream_finishes(checkpoint_interval_s: float | None) -> None:
    """A congested stream (load 1.0, gangs up to 32 GPUs) under tiresias finishes every job.
    With the exact trigger and evictions of jobs that keep nothing, a 300-job stream had 59
    jobs unfinished after 111,000 preemptions (a restarted job crossed the threshold again
    and was evicted again); jobs that checkpoint make progress at every run."""
    stream = synthetic_workload(4, 300, 1.0, seed=1)
    jobs = tuple(replace(j, checkpoint_interval_s=checkpoint_interval_s) for j in stream.jobs)
    w = replace(stream, jobs=jobs)
    m = simulate(
        cluster(4), teams("t0", "t1", "t2", "t3"), w, SimConfig(profile="tiresias")
    ).metrics
    assert m.jobs_completed == 300
    if checkpoint_interval_s is None:
        assert m.preemptions == 0
    else:
        assert 0 < m.preemptions < 300
