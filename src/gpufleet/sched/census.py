"""What a quiet caller keeps of its queue and running jobs between cycles (`decide(census=)`).

A congested cycle should cost what changed, not the length of the queue or the number
of running jobs. The simulator (and through it the queue ETA) keeps these summaries as
jobs join, start and end, each in O(log n) per change, and a cycle reads them instead of
scanning: the stop rule reads the waiting sizes and runtimes, the backfill reservation the
running jobs' ends, the eviction guard the running jobs' lowest evictable class and, for
least-attained-service preemption, when each evictable running job moves to a higher queue.
The caller mutates the containers in place between cycles; a cycle only reads them.
"""

from __future__ import annotations

from bisect import bisect_left, insort
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass

from gpufleet.sched.backfill import expected_end_s, expected_runtime_s
from gpufleet.sched.las import RUN_STARTS_AT_GPU_S, LasQueues, attained_at
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
    preemption may evict (`evictable_value`). `running_las`: the evictable running jobs'
    least-attained-service queues (`RunningLas`)."""

    waiting_sizes: Mapping[int, int]
    waiting_runtimes: Mapping[int, Sequence[float]]  # (no default: "none has one" is a claim)
    running_ends: Sequence[tuple[float, str]] | None = None
    running_evictable: Mapping[int, int] | None = None
    running_las: RunningLas | None = None


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


# a crossing within this many seconds of the cycle is checked with `las.attained_at` itself
CROSSING_SLACK_S = 1e-3


class RunningLas:
    """When each evictable running job's attained service reaches each threshold of
    `queues`: the highest queue an evictable running job sits in, and the jobs above a
    queue, at any time, in O(thresholds) and O(answer) instead of a pass over the running
    jobs with their holdings (`preempt.LasPreemption`'s ranking). A job's service grows
    at the rate of what it holds, so the times are known when it starts."""

    __slots__ = ("_service", "crossings", "queues")

    def __init__(self, queues: LasQueues) -> None:
        self.queues = queues
        # name -> (service this run starts from, start, milli-GPUs held)
        self._service: dict[str, tuple[float, float, int]] = {}
        # per threshold, (time the service reaches it, name) ascending
        self.crossings: list[list[tuple[float, str]]] = [[] for _ in queues.thresholds_gpu_s]

    def clear(self) -> None:
        self._service.clear()
        for times in self.crossings:
            times.clear()

    def add(self, name: str, started_s: float, held_milli: int) -> None:
        """`name` runs from `started_s` holding `held_milli`; its queue counts this run's
        service only (`sched.las`)."""
        self._service[name] = (RUN_STARTS_AT_GPU_S, started_s, held_milli)
        at = self.queues.crossings_s(RUN_STARTS_AT_GPU_S, started_s, held_milli)
        for times, at_s in zip(self.crossings, at, strict=True):
            insort(times, (at_s, name))

    def remove(self, name: str) -> None:
        """Out of the census; a name it does not hold (a job that is not evictable) is
        ignored."""
        service = self._service.pop(name, None)
        if service is None:
            return
        for times, at_s in zip(self.crossings, self.queues.crossings_s(*service), strict=True):
            del times[bisect_left(times, (at_s, name))]

    def highest(self, now_s: float) -> int:
        """The highest queue of an evictable running job at `now_s` (-1: none runs), as
        `LasPreemption.highest_running` ranks them."""
        for k in range(len(self.crossings) - 1, -1, -1):
            if next(self._crossed(k, now_s), None) is not None:
                return k + 1
        return 0 if self._service else -1

    def above(self, queue: int, now_s: float) -> Iterator[str]:
        """The evictable running jobs in a queue above `queue` at `now_s`."""
        if queue < 0:
            yield from self._service
        elif queue < len(self.crossings):
            yield from self._crossed(queue, now_s)

    def _crossed(self, k: int, now_s: float) -> Iterator[str]:
        threshold = self.queues.thresholds_gpu_s[k]
        service = self._service
        for at_s, name in self.crossings[k]:
            if at_s > now_s + CROSSING_SLACK_S:
                return
            if attained_at(*service[name], now_s) >= threshold:  # as `by_service` compares
                yield name

    def same_as(self, other: RunningLas) -> bool:
        return self._service == other._service and self.crossings == other.crossings


class RunningCensus:
    """The running jobs' sorted expected ends and evictable classes, kept as they start and
    stop (a job's end is its start plus `expected_runtime_s`, as `backfill.expected_end_s`
    reads a running job)."""

    __slots__ = ("_evictable_value", "_of", "ends", "evictable", "las")

    def __init__(self, teams: TeamsSpec, las: LasQueues | None = None) -> None:
        self._evictable_value = evictable_value(teams)
        self._of: dict[str, tuple[float | None, int | None]] = {}  # name -> (end, value)
        self.ends: list[tuple[float, str]] = []
        self.evictable: dict[int, int] = {}
        self.las = None if las is None else RunningLas(las)  # for LAS preemption only

    def rebuild(
        self,
        running: Iterable[tuple[JobSpec, float, int]],
    ) -> None:
        """Start over from (job, start, milli-GPUs held) triples (a caller that keeps the
        census only while its queue is long rebuilds it when the queue grows again)."""
        self._of.clear()
        self.ends.clear()
        self.evictable.clear()
        if self.las is not None:
            self.las.clear()
        for job, started_s, held_milli in running:
            self.add(job, started_s, held_milli)

    def add(
        self,
        job: JobSpec,
        started_s: float,
        held_milli: int = 0,
    ) -> None:
        """`job` runs from `started_s` holding `held_milli` (read by the LAS census only)."""
        runtime = expected_runtime_s(job)
        end = None if runtime is None else started_s + runtime
        value = self._evictable_value(job)
        self._of[job.name] = (end, value)
        if end is not None:
            insort(self.ends, (end, job.name))
        if value is not None:
            self.evictable[value] = self.evictable.get(value, 0) + 1
            if self.las is not None and job.checkpoints:  # what LAS may evict
                self.las.add(job.name, started_s, held_milli)

    def remove(self, name: str) -> None:
        end, value = self._of.pop(name)
        if end is not None:
            ends = self.ends
            del ends[bisect_left(ends, (end, name))]
        if value is not None:
            uncount(self.evictable, value)
            if self.las is not None:
                self.las.remove(name)


def recount(
    pending: Iterable[JobSpec],
    running: Iterable[JobSpec],
    teams: TeamsSpec,
    *,
    las: LasQueues | None = None,
    held_milli: Callable[[str], int] | None = None,
) -> Census:
    """The census from scratch (`running`: the running jobs as `decide` reads them, with
    `started_s`; `held_milli`: what each holds, for the LAS census of `las`): what a kept
    census must equal, checked under GPUFLEET_DEBUG_CHECKS."""
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
    running_las = None if las is None or held_milli is None else RunningLas(las)
    for job in running:
        end = expected_end_s(job)
        if end is not None:
            ends.append((end, job.name))
        value = value_of(job)
        if value is not None:
            evictable[value] = evictable.get(value, 0) + 1
            if (
                running_las is not None
                and held_milli is not None
                and job.started_s is not None
                and job.checkpoints
            ):
                held = held_milli(job.name)
                running_las.add(job.name, job.started_s, held)
    return Census(
        sizes,
        {k: sorted(v) for k, v in runtimes.items()},
        sorted(ends),
        evictable,
        running_las,
    )


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
    if kept.running_las is not None and (
        fresh.running_las is None or not kept.running_las.same_as(fresh.running_las)
    ):
        out.append("running jobs' least-attained-service crossings differ from a recount")
    return out
