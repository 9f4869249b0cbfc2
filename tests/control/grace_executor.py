"""A test engine whose jobs behave as real ones do around a preemption: they take a while to
start, and they take their grace period to exit after SIGTERM (the emulated executor ends
them at the signal). Deterministic, on the test's clock."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

from gpufleet.control.executors.base import CHECKPOINT_SIGNAL, ExecEvent, Launch, RunKey


@dataclass
class _Run:
    asked_s: float  # when the reconciler asked the engine to start it
    started_s: float | None = None
    term_s: float | None = None  # SIGTERM received
    killed_s: float | None = None
    ended: bool = False


class GraceExecutor:
    """`start_s`: seconds from `start()` until the engine runs the attempt (a queued sbatch,
    an image pull); `term_s`: seconds a running attempt takes to exit after SIGTERM (a job
    writing its checkpoint; `None`: it waits for the kill). An attempt stopped before it
    started never runs and is forgotten, as Slurm forgets a job cancelled before it ran."""

    name = "grace-test"

    def __init__(
        self, clock: Callable[[], float], *, start_s: float = 0.0, term_s: float | None = None
    ) -> None:
        self.clock, self.start_s, self.term_s = clock, start_s, term_s
        self.runs: dict[RunKey, _Run] = {}
        self.ran: set[RunKey] = set()  # attempts the engine really ran

    def start(self, launch: Launch) -> None:
        self.runs.setdefault(launch.key, _Run(self.clock()))

    def signal(self, key: RunKey, signal: str = CHECKPOINT_SIGNAL) -> None:
        run = self.runs.get(key)
        if run is None or run.ended:
            return
        if signal in ("SIGTERM", "TERM", "15"):
            if run.started_s is None:
                del self.runs[key]  # cancelled before it ran: the engine keeps no record
            elif run.term_s is None:
                run.term_s = self.clock()

    def ask_to_stop(self, key: RunKey, checkpoint_signal: str | None) -> None:
        if checkpoint_signal is not None:
            self.signal(key, checkpoint_signal)
        self.signal(key, "SIGTERM")

    def stop(self, key: RunKey) -> None:
        run = self.runs.get(key)
        if run is None or run.ended:
            return
        if run.started_s is None:
            del self.runs[key]
        else:
            run.killed_s = self.clock()

    def poll(self, now_s: float) -> Sequence[ExecEvent]:
        events: list[ExecEvent] = []
        for key, run in sorted(self.runs.items()):
            if run.ended:
                continue
            if run.started_s is None and now_s >= run.asked_s + self.start_s:
                run.started_s = run.asked_s + self.start_s
                self.ran.add(key)
                events.append(ExecEvent(key, "started", run.started_s))
            if run.started_s is None:
                continue
            if run.killed_s is not None:
                run.ended = True
                events.append(ExecEvent(key, "exited", run.killed_s, exit_code=-9))
            elif (
                run.term_s is not None
                and self.term_s is not None
                and now_s >= run.term_s + self.term_s
            ):
                run.ended = True
                events.append(ExecEvent(key, "exited", run.term_s + self.term_s, exit_code=-15))
        return events

    def active(self) -> set[RunKey]:
        return {k for k, r in self.runs.items() if not r.ended}

    def logs(self, key: RunKey, tail_bytes: int = 65536) -> str:
        return ""
