"""The emulated executor under an injected clock: durations, checkpoints, signals, adoption."""

from __future__ import annotations

import pytest

from gpufleet.control.executors.base import ExecEvent, Executor, Launch, RunKey, Worker
from gpufleet.control.executors.emulated import (
    EXIT_CODE_ENV,
    FAIL_AFTER_ENV,
    EmulatedExecutor,
)

T0 = 1_000.0


class Clock:
    """A settable clock: the executor sees exactly the times the test chooses."""

    def __init__(self, now_s: float = T0) -> None:
        self.now_s = now_s

    def __call__(self) -> float:
        return self.now_s


def launch_of(
    job_id: int = 1,
    attempt: int = 1,
    duration_s: float | None = 100.0,
    interval_s: float | None = None,
    env: dict[str, str] | None = None,
) -> Launch:
    return Launch(
        key=RunKey(job_id, attempt),
        job_name=f"job{job_id}",
        team="ml",
        command=("train",),
        env=env or {},
        workers=(Worker(rank=0, node="n0", local_rank=0, gpus=(0,)),),
        duration_s=duration_s,
        checkpoint_interval_s=interval_s,
    )


def summary(events: object) -> list[tuple[str, float, int | None]]:
    assert isinstance(events, list)
    return [(e.kind, e.at_s, e.exit_code) for e in events if isinstance(e, ExecEvent)]


def test_runs_for_duration_over_speed() -> None:
    clock = Clock()
    ex: Executor = EmulatedExecutor(speed=10.0, clock=clock)
    ex.start(launch_of(duration_s=100.0))
    assert summary(ex.poll(T0 + 9.99)) == [("started", T0, None)]
    assert ex.active() == {RunKey(1, 1)}
    assert summary(ex.poll(T0 + 10.0)) == [("exited", T0 + 10.0, 0)]
    assert ex.poll(T0 + 50.0) == []
    assert ex.active() == set()


def test_default_duration_and_idempotent_start() -> None:
    clock = Clock()
    ex = EmulatedExecutor(speed=2.0, clock=clock, default_duration_s=30.0)
    ex.start(launch_of(duration_s=None))
    clock.now_s = T0 + 5
    ex.start(launch_of(duration_s=None))  # already running: does not restart the clock
    assert summary(ex.poll(T0 + 15.0)) == [("started", T0, None), ("exited", T0 + 15.0, 0)]


def test_periodic_checkpoints_in_emulated_time() -> None:
    ex = EmulatedExecutor(speed=2.0, clock=Clock())
    ex.start(launch_of(duration_s=100.0, interval_s=20.0))  # checkpoints at 20, 40, 60, 80
    assert summary(ex.poll(T0 + 9.0)) == [("started", T0, None)]
    assert summary(ex.poll(T0 + 15.0)) == [("checkpointed", T0 + 10.0, None)]
    assert ex.poll(T0 + 16.0) == []
    # two checkpoints passed since the last poll: the latest is what a restart would use
    assert summary(ex.poll(T0 + 35.0)) == [("checkpointed", T0 + 30.0, None)]
    # none at the very end (emulated 100 s): the job finishes instead
    assert summary(ex.poll(T0 + 99.0)) == [
        ("checkpointed", T0 + 40.0, None),
        ("exited", T0 + 50.0, 0),
    ]


def test_adopt_after_a_restart_keeps_the_original_end() -> None:
    clock = Clock(T0 + 30.0)
    launch = launch_of(duration_s=100.0, interval_s=20.0)
    restarted = EmulatedExecutor(speed=2.0, clock=clock)
    restarted.adopt(launch, started_s=T0, last_checkpoint_s=T0 + 20.0)
    restarted.start(launch)  # known now: a start order does nothing
    restarted.adopt(launch, started_s=T0 + 25.0)  # and neither does a second adopt
    assert restarted.active() == {launch.key}
    assert restarted.poll(T0 + 29.0) == []  # no second `started`, checkpoint at +20 known
    assert summary(restarted.poll(T0 + 60.0)) == [
        ("checkpointed", T0 + 40.0, None),
        ("exited", T0 + 50.0, 0),
    ]
    # without a known checkpoint the latest one due is reported
    other = EmulatedExecutor(speed=2.0, clock=clock)
    other.adopt(launch, started_s=T0)
    assert summary(other.poll(T0 + 30.0)) == [("checkpointed", T0 + 30.0, None)]
    # an attempt that ended while the server was down ends at its planned time
    late = EmulatedExecutor(speed=2.0, clock=Clock(T0 + 500.0))
    late.adopt(launch_of(duration_s=100.0), started_s=T0)
    assert summary(late.poll(T0 + 500.0)) == [("exited", T0 + 50.0, 0)]


def test_sigterm_and_stop_end_with_negative_codes() -> None:
    clock = Clock()
    ex = EmulatedExecutor(clock=clock)
    ex.start(launch_of(job_id=1))
    ex.start(launch_of(job_id=2))
    ex.poll(T0)
    clock.now_s = T0 + 7.0
    ex.signal(RunKey(1, 1), "SIGTERM")
    ex.stop(RunKey(2, 1))
    ex.signal(RunKey(1, 1), "SIGINT")  # already ended: ignored
    events = ex.poll(T0 + 8.0)
    assert summary(events) == [("exited", T0 + 7.0, -15), ("exited", T0 + 7.0, -9)]
    assert [e.detail for e in events] == ["received SIGTERM", "received SIGKILL"]
    assert ex.active() == set()
    ex.stop(RunKey(2, 1))  # no-op
    ex.signal(RunKey(7, 7))  # unknown: no-op
    assert ex.poll(T0 + 9.0) == []


def test_checkpoint_signal_and_harmless_signals() -> None:
    clock = Clock()
    ex = EmulatedExecutor(clock=clock)
    ex.start(launch_of())
    ex.poll(T0)
    clock.now_s = T0 + 3.0
    ex.signal(RunKey(1, 1))  # the default: SIGUSR1, a checkpoint request
    ex.signal(RunKey(1, 1), "SIGCONT")  # ignored, as a process would
    assert summary(ex.poll(T0 + 4.0)) == [("checkpointed", T0 + 4.0, None)]
    assert ex.poll(T0 + 5.0) == []
    with pytest.raises(ValueError, match="unknown signal"):
        ex.signal(RunKey(1, 1), "SIGNOPE")


def test_failure_env_vars() -> None:
    ex = EmulatedExecutor(clock=Clock())
    ex.start(launch_of(job_id=1, env={EXIT_CODE_ENV: "3"}))
    ex.start(launch_of(job_id=2, env={FAIL_AFTER_ENV: "5"}))
    ex.start(launch_of(job_id=3, env={FAIL_AFTER_ENV: "500"}))  # after the end: no failure
    events = ex.poll(T0 + 200.0)
    assert [(e.key.job_id, e.at_s, e.exit_code) for e in events if e.kind == "exited"] == [
        (1, T0 + 100.0, 3),
        (2, T0 + 5.0, 1),
        (3, T0 + 100.0, 0),
    ]
    with pytest.raises(ValueError, match=EXIT_CODE_ENV):
        ex.start(launch_of(job_id=4, env={EXIT_CODE_ENV: "three"}))
    with pytest.raises(ValueError, match=FAIL_AFTER_ENV):
        ex.start(launch_of(job_id=5, env={FAIL_AFTER_ENV: "soon"}))


def test_deterministic_under_the_same_clock() -> None:
    def run() -> list[ExecEvent]:
        clock = Clock()
        ex = EmulatedExecutor(speed=3.0, clock=clock)
        out: list[ExecEvent] = []
        for job in range(1, 6):
            clock.now_s = T0 + job
            ex.start(launch_of(job_id=job, duration_s=10.0 * job, interval_s=7.0))
        for step in range(60):
            clock.now_s = T0 + step * 0.7
            if step == 20:
                ex.signal(RunKey(5, 1), "SIGTERM")
            out.extend(ex.poll(clock.now_s))
        return out

    first = run()
    assert first == run()
    assert sum(e.kind == "exited" for e in first) == 5


def test_logs_are_synthetic_lines() -> None:
    ex = EmulatedExecutor(speed=2.0, clock=Clock())
    ex.start(launch_of(duration_s=100.0, interval_s=40.0))
    ex.poll(T0 + 100.0)
    text = ex.logs(RunKey(1, 1))
    lines = text.splitlines()
    assert lines[0].startswith("[emulated t=0s] started job1")
    assert "100 s at speed 2" in lines[0]
    assert lines[1] == "[emulated t=80s] checkpoint saved"
    assert lines[2] == "[emulated t=100s] exited with code 0"
    assert ex.logs(RunKey(1, 1), tail_bytes=12) == "with code 0\n"
    assert ex.logs(RunKey(2, 1)) == ""


def test_rejects_a_bad_speed() -> None:
    with pytest.raises(ValueError, match="speed"):
        EmulatedExecutor(speed=0.0)
