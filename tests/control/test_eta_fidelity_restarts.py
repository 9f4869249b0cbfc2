"""Restarted jobs, live and in the ETA replay: each ETA is compared with the start the
live plane then makes (as in test_eta_review_live), around preemptions, crashes and
restart backoffs.

The emulated executor used to rerun a checkpointing job's whole runtime after a
restart, while the simulator resumes it from its checkpoint; a job in its restart
backoff arrived at once in the replay, while the reconciler waits for the backoff; and
a running job that does not checkpoint kept, when preempted in the replay, the work it
did before the replay, while it reruns in full live."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select

from gpufleet.control.executors.base import ExecEvent, Launch, RunKey, Worker
from gpufleet.control.executors.emulated import EmulatedExecutor
from gpufleet.control.models import Job, JobEvent, QueueSnapshot

from .conftest import Plane
from .test_eta_review_live import CYCLE_S, GRACE_S, run_until_started, submit

T0 = 1_000.0


class Clock:
    def __init__(self, now_s: float = T0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def launch_of(attempt: int, duration_s: float = 100.0, interval_s: float | None = None) -> Launch:
    return Launch(
        key=RunKey(1, attempt),
        job_name="job1",
        team="ml",
        command=("train",),
        env={},
        workers=(Worker(rank=0, node="n0", local_rank=0, gpus=(0,)),),
        duration_s=duration_s,
        checkpoint_interval_s=interval_s,
    )


def ends(events: list[ExecEvent] | Any) -> list[tuple[str, float]]:
    return [(e.kind, e.at_s) for e in events if e.kind in ("checkpointed", "exited")]


def test_a_preempted_attempt_resumes_from_the_checkpoint_it_saved_when_asked() -> None:
    """Asked to stop at emulated 30 s (checkpoint request, then SIGTERM), the job saves 30 s
    of its 100: the next attempt runs 70 s at speed 2, 35 s, not 50 s."""
    clock = Clock()
    ex = EmulatedExecutor(speed=2.0, clock=clock)
    ex.start(launch_of(1, interval_s=40.0))
    clock.now_s = T0 + 15.0
    ex.ask_to_stop(RunKey(1, 1), "SIGUSR1")
    assert ends(ex.poll(T0 + 20.0)) == [("checkpointed", T0 + 15.0), ("exited", T0 + 15.0)]
    clock.now_s = T0 + 100.0
    ex.start(launch_of(2, interval_s=40.0))
    assert ends(ex.poll(T0 + 200.0)) == [("checkpointed", T0 + 120.0), ("exited", T0 + 135.0)]
    assert "resumed at 30 s of 100 s" in ex.logs(RunKey(1, 2))


def test_a_crashed_attempt_resumes_from_its_last_periodic_checkpoint() -> None:
    """Killed at 50 s with checkpoints every 20 s, it saved 40 s: the next attempt runs 60 s
    (checkpointing 20 s and 40 s into it), the one after that the 20 s left after those."""
    clock = Clock()
    ex = EmulatedExecutor(clock=clock)
    ex.start(launch_of(1, interval_s=20.0))
    clock.now_s = T0 + 50.0
    ex.stop(RunKey(1, 1))
    assert ends(ex.poll(T0 + 50.0)) == [("checkpointed", T0 + 40.0), ("exited", T0 + 50.0)]
    ex.start(launch_of(2, interval_s=20.0))
    clock.now_s = T0 + 105.0
    ex.stop(RunKey(1, 2))
    assert ends(ex.poll(T0 + 105.0)) == [("checkpointed", T0 + 90.0), ("exited", T0 + 105.0)]
    ex.start(launch_of(3, interval_s=20.0))
    assert ends(ex.poll(T0 + 200.0)) == [("exited", T0 + 125.0)]


def test_a_job_that_never_checkpointed_reruns_in_full() -> None:
    clock = Clock()
    ex = EmulatedExecutor(clock=clock)
    ex.start(launch_of(1))
    clock.now_s = T0 + 60.0
    ex.stop(RunKey(1, 1))
    ex.poll(T0 + 60.0)
    ex.start(launch_of(2))
    assert ends(ex.poll(T0 + 500.0)) == [("exited", T0 + 160.0)]


def snapshot_etas(plane: Plane, jobs: dict[str, int]) -> dict[str, float | None]:
    """Refresh the ETAs and read them from the queue snapshot (the API shows none for a job
    in its restart backoff: the cycle that positions jobs leaves it out)."""
    plane.reconciler.estimate_etas()
    with plane.sessions() as s:
        etas = s.scalars(select(QueueSnapshot.etas)).one()
    return {name: etas.get(str(job)) for name, job in jobs.items()}


def runs(plane: Plane, job: int) -> dict[int, float]:
    """Attempt -> how long it ran (its `running` event to its last event)."""
    with plane.sessions() as s:
        rows = s.execute(
            select(JobEvent.attempt, JobEvent.kind, JobEvent.at_s).where(JobEvent.job_id == job)
        ).all()
    starts = {a: at for a, kind, at in rows if kind == "running"}
    return {a: max(at for b, _, at in rows if b == a) - start for a, start in starts.items()}


def test_a_preempted_checkpointing_job_is_resumed_live_and_in_the_replay(lite: Plane) -> None:
    """vision runs v1 and v2 (1000 s, checkpoints every 100 s) on both H100 nodes; at 300 s
    nlp reclaims its share and v1 is preempted, saving 310 s. Its restart ran 1000 s live
    (a start at 1620 s for the 2x8 gang w waiting behind it) while a replay that predicts the
    preemption resumed it (1300 s); it now runs 690 s live, and every ETA, before, during
    and after the stop, says 1300-1330 s. While v1 was stopping, the replay requeued it
    with its scheduler view's runtime, cut to its stop deadline (340 s), not its
    estimate."""
    t0 = lite.clock()
    v1 = submit(lite, "vision-member", "v1", 8, 1000, checkpoint_interval_s=100)
    submit(lite, "vision-member", "v2", 8, 1000, checkpoint_interval_s=100)
    lite.cycle()
    lite.cycle(300)
    w = {"w": submit(lite, "vision-member", "w", 8, 100, workers=2)}
    submit(lite, "nlp-member", "n1", 8, 300)
    predicted = [snapshot_etas(lite, w)["w"]]  # the replay predicts the preemption
    lite.cycle(CYCLE_S)
    with lite.sessions() as s:
        job = s.get(Job, v1)
        assert job is not None
        assert job.state == "stopping"
    predicted.append(snapshot_etas(lite, w)["w"])  # v1 stopping, about to be requeued
    lite.cycle(CYCLE_S)
    predicted.append(snapshot_etas(lite, w)["w"])  # v1 requeued, 310 s of work saved
    started = run_until_started(lite, w)["w"]
    assert runs(lite, v1) == {1: 310.0, 2: 690.0}
    assert started - t0 == 1310.0
    assert all(at is not None for at in predicted), predicted
    errors = [started - at for at in predicted if at is not None]
    # while v1 stops, the replay starts n1 at v1's stop deadline (the grace period)
    bounds = (CYCLE_S, GRACE_S, CYCLE_S)
    assert all(abs(e) <= b for e, b in zip(errors, bounds, strict=True)), errors


def crash(plane: Plane, job: int) -> float:
    """End the job's running attempt with SIGTERM (a crash, not a stop) and cycle until
    the reconciler has requeued it; returns when its restart backoff ends."""
    with plane.sessions() as s:
        attempt = s.scalars(select(Job.attempt).where(Job.id == job)).one()
    plane.executor.signal(RunKey(job, attempt), "SIGTERM")
    plane.cycle()  # seen at once: a cycle later, a 10 s backoff would be over
    with plane.sessions() as s:
        row = s.get(Job, job)
        assert row is not None
        assert row.state == "pending"
        assert row.not_before_s is not None
        return row.not_before_s


def crashed_three_times(plane: Plane) -> tuple[int, float]:
    """A 1000 s job crashed a third time: in its 90 s backoff now."""
    a = submit(plane, "vision-member", "a", 8, 1000)
    plane.cycle()
    for _ in range(2):
        crash(plane, a)
        run_until_started(plane, {"a": a})
        plane.cycle(CYCLE_S)
    not_before = crash(plane, a)
    assert not_before - plane.clock() == 90.0
    return a, not_before


def test_a_job_in_restart_backoff_starts_when_it_ends_in_the_replay(lite: Plane) -> None:
    """Its ETA said now (the replay let it start at once); it starts when its backoff
    ends."""
    a, not_before = crashed_three_times(lite)
    jobs = {"a": a}
    predicted = snapshot_etas(lite, jobs)["a"]
    started = run_until_started(lite, jobs)["a"]
    assert started >= not_before
    assert predicted is not None
    assert abs(started - predicted) <= CYCLE_S, (predicted - lite.clock(), started - predicted)


def test_a_job_behind_one_in_restart_backoff_takes_the_gpus_first(lite: Plane) -> None:
    """During a's 90 s backoff the reconciler does not see it: the 2x8 gang c submitted
    meanwhile takes both nodes for 100 s, and a starts after it. The replay ran a first,
    so c's ETA was 1000 s late and a's 100 s early."""
    a, _ = crashed_three_times(lite)
    jobs = {"a": a, "c": submit(lite, "vision-member", "c", 8, 100, workers=2)}
    predicted = snapshot_etas(lite, jobs)
    started = run_until_started(lite, jobs)
    assert started["c"] < started["a"]
    errors = {n: started[n] - at for n, at in predicted.items() if at is not None}
    assert set(errors) == set(jobs), predicted
    assert all(abs(e) <= CYCLE_S for e in errors.values()), errors


def test_a_running_job_without_checkpoints_preempted_in_the_replay_reruns_in_full(
    lite: Plane,
) -> None:
    """v1 and v2 (1000 s, no checkpoints) have run 400 s when nlp reclaims its share; v1 is
    preempted and reruns 1000 s after nlp's 300 s job. The replay kept its 400 s done, so
    the gang w behind it read 1300 s for a start at 1720 s. The ETA is taken before the
    cycle that preempts, and the stop is seen a cycle after it: two cycles apart at most."""
    t0 = lite.clock()
    v1 = submit(lite, "vision-member", "v1", 8, 1000)
    submit(lite, "vision-member", "v2", 8, 1000)
    lite.cycle()
    lite.cycle(400)
    w = {"w": submit(lite, "vision-member", "w", 8, 100, workers=2)}
    submit(lite, "nlp-member", "n1", 8, 300)
    predicted = snapshot_etas(lite, w)["w"]
    started = run_until_started(lite, w)["w"]
    assert runs(lite, v1)[2] == 1000.0
    assert started - t0 > 1700
    assert predicted is not None
    assert abs(started - predicted) <= 2 * CYCLE_S, (predicted - t0, started - t0)


def test_an_adopted_attempt_keeps_the_checkpoint_the_store_recorded() -> None:
    """Adopted after a server restart with a checkpoint at 40 s recorded, then killed at
    50 s: the next attempt resumes at 40 s (it reran all 100 s)."""
    clock = Clock(T0 + 45.0)
    ex = EmulatedExecutor(clock=clock)
    ex.adopt(launch_of(1, interval_s=20.0), started_s=T0, last_checkpoint_s=T0 + 40.0)
    clock.now_s = T0 + 50.0
    ex.stop(RunKey(1, 1))
    assert ends(ex.poll(T0 + 50.0)) == [("exited", T0 + 50.0)]
    ex.start(launch_of(2, interval_s=20.0))
    assert ends(ex.poll(T0 + 500.0)) == [("checkpointed", T0 + 90.0), ("exited", T0 + 110.0)]
