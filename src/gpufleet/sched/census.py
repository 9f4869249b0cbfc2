"""What a quiet caller keeps of its queue and running jobs between cycles (`decide(census=)`).

A congested cycle should cost what changed, not the length of the queue or the number
of running jobs. The simulator (and through it the queue ETA) keeps these summaries as
jobs join, start and end, each in O(log n) per change, and a cycle reads them instead of
scanning: the stop rule reads the waiting sizes and runtimes, the backfill reservation the
running jobs' ends, the eviction guard the running jobs' lowest evictable class. The
caller mutates the containers in place between cycles; a cycle only reads them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.sched.backfill import expected_end_s, expected_runtime_s
from gpufleet.sched.lean import uncount, worker_gpus
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import TeamsSpec


@dataclass(frozen=True, slots=True)
class Census:
    """`waiting_sizes`: pending jobs per whole GPUs per worker (`lean.worker_gpus`; 0: a
    slice, a fraction, a workload-sized job). `waiting_runtimes`: per the same sizes, the
    ascending `expected_runtime_s` of the pending jobs that have one. `running_ends`: the
    running jobs' (expected end, name), ascending, for those with one (`backfill.
    expected_end_s`). `running_evictable`: class value -> running jobs that priority
    preemption may evict (`evictable_value`)."""

    waiting_sizes: Mapping[int, int]
    waiting_runtimes: Mapping[int, Sequence[float]]  # (no default: "none has one" is a claim)
    running_ends: Sequence[tuple[float, str]] | None = None
    running_evictable: Mapping[int, int] | None = None


def evictable_value(teams: TeamsSpec) -> Callable[[JobSpec], int | None]:
    """A job -> its class value when priority preemption may evict it, else None: the job
    and its class (its own, else its team's default) preemptible; a job of an unknown team
    without a class of its own is never evicted. `PreemptContext.lowest_evictable` and the
    simulator's census read the same rule."""
    value = {c.name: c.value for c in teams.priority_classes if c.preemptible}
    default = {t.name: t.default_priority for t in teams.teams}

    def of(job: JobSpec) -> int | None:
        if not job.preemptible:
            return None
        return value.get(job.priority_class or default.get(job.team, ""))

    return of


class RunningCensus:
    """The running jobs' sorted expected ends and evictable classes, kept as they start and
    stop (a job's end is its start plus `expected_runtime_s`, as `backfill.expected_end_s`
    reads a running job)."""

    __slots__ = ("_evictable_value", "_of", "ends", "evictable")

    def __init__(self, teams: TeamsSpec) -> None:
        self._evictable_value = evictable_value(teams)
        self._of: dict[str, tuple[float | None, int | None]] = {}  # name -> (end, value)
        self.ends: list[tuple[float, str]] = []
        self.evictable: dict[int, int] = {}

    def rebuild(self, running: Iterable[tuple[JobSpec, float]]) -> None:
        """Start over from (job, start) pairs (a caller that keeps the census only while
        its queue is long rebuilds it when the queue grows again)."""
        self._of.clear()
        self.ends.clear()
        self.evictable.clear()
        for job, started_s in running:
            self.add(job, started_s)

    def add(self, job: JobSpec, started_s: float) -> None:
        runtime = expected_runtime_s(job)
        end = None if runtime is None else started_s + runtime
        value = self._evictable_value(job)
        self._of[job.name] = (end, value)
        if end is not None:
            insort(self.ends, (end, job.name))
        if value is not None:
            self.evictable[value] = self.evictable.get(value, 0) + 1

    def remove(self, name: str) -> None:
        end, value = self._of.pop(name)
        if end is not None:
            ends = self.ends
            del ends[bisect_left(ends, (end, name))]
        if value is not None:
            uncount(self.evictable, value)


def recount(pending: Iterable[JobSpec], running: Iterable[JobSpec], teams: TeamsSpec) -> Census:
    """The census from scratch (`running`: the running jobs as `decide` reads them, with
    `started_s`): what a kept census must equal, checked under GPUFLEET_DEBUG_CHECKS."""
    sizes: dict[int, int] = {}
    runtimes: dict[int, list[float]] = {}
    for job in pending:
        size = worker_gpus(job)
        sizes[size] = sizes.get(size, 0) + 1
        runtime = expected_runtime_s(job)
        if runtime is not None:
            runtimes.setdefault(size, []).append(runtime)
    value_of = evictable_value(teams)
    ends: list[tuple[float, str]] = []
    evictable: dict[int, int] = {}
    for job in running:
        end = expected_end_s(job)
        if end is not None:
            ends.append((end, job.name))
        value = value_of(job)
        if value is not None:
            evictable[value] = evictable.get(value, 0) + 1
    return Census(sizes, {k: sorted(v) for k, v in runtimes.items()}, sorted(ends), evictable)


def differences(kept: Census, fresh: Census) -> list[str]:
    """What a kept census gets wrong against a `recount` (empty: nothing)."""
    out = []
    if dict(kept.waiting_sizes) != dict(fresh.waiting_sizes):
        out.append(f"waiting sizes {dict(kept.waiting_sizes)} != {dict(fresh.waiting_sizes)}")
    mine = {k: list(v) for k, v in kept.waiting_runtimes.items() if v}
    if mine != dict(fresh.waiting_runtimes):
        out.append("waiting runtimes differ from a recount")
    if kept.running_ends is not None and list(kept.running_ends) != fresh.running_ends:
        out.append("running ends differ from a recount")
    if kept.running_evictable is not None and dict(kept.running_evictable) != dict(
        fresh.running_evictable or {}
    ):
        out.append(f"evictable classes {dict(kept.running_evictable)} != {fresh.running_evictable}")
    return out
