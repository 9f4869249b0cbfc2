"""A queue kept in priority order between cycles, for quiet cycles of the priority and
fair-share orders (issue 29, design 0014 "Kept order").

A full cycle sorts the whole queue and reads every waiting job's priority before it looks
at the first job: O(queue) however early the cycle ends. A caller that runs quiet cycles
(`decide(quiet=True)`: the simulator, the queue ETA) can keep each team's waiting jobs in
the order both plugins use within a team (`orders.priority_key`: class value, then FIFO),
each job's class value, and how many wait at each value. A cycle handed that (`Kept`) takes
jobs off the teams' heads lazily, so its cost follows the jobs it looks at: with the stop
rule (no room for the smallest waiting worker), a congested queue's cycle looks at a few.

The Tiresias order's key moves with time, but only at known times: a waiting job's
least-attained-service queue changes only when it is promoted for starving. A caller keeps
each queue in submission order and a heap of promotion times (`KeptLasQueue`), and hands
the cycle the queues (`KeptLevels`), which it takes one after the other.
"""

from __future__ import annotations

import bisect
import heapq
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import count
from typing import Protocol

from gpufleet.sched.framework import OrderContext
from gpufleet.sched.las import LasQueues
from gpufleet.sched.lean import uncount
from gpufleet.sched.orders import PriorityKey, priority_key
from gpufleet.sched.team_index import TeamIndex
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import Profile

KEPT_ORDERS = frozenset({"priority", "fair-share"})  # orders with `order_kept`
KEPT_LEVELS = "tiresias"  # the order a `KeptLasQueue` keeps


def keeps(profile: Profile) -> bool:
    """Whether a quiet caller may keep the queue for `profile` in each team's order
    (`KeptQueue`: the order is fixed per job; Slurm's multifactor keys move with time)."""
    return profile.queue_order in KEPT_ORDERS


def keeps_levels(profile: Profile) -> bool:
    """Whether a quiet caller may keep the queue for `profile` by least-attained-service
    queue (`KeptLasQueue`: a waiting job's queue moves only when it is promoted)."""
    return profile.queue_order == KEPT_LEVELS


class KeptOrder(Protocol):
    """A queue order that can take jobs off kept per-team queues (`PriorityOrder`,
    `FairShare`): the same order `order` gives over all their jobs."""

    def order_kept(
        self,
        by_team: Mapping[str, Sequence[JobSpec]],
        ctx: OrderContext,
        skips: Callable[[JobSpec], bool] | None = None,
        keys: Mapping[str, Sequence[PriorityKey]] | None = None,
    ) -> Iterator[JobSpec]: ...


@dataclass(frozen=True, slots=True)
class Kept:
    """What a caller that keeps its queue hands `decide(kept=...)`.

    `by_team`: each team's waiting jobs in `priority_key` order (no empty team);
    `priority`: every waiting job's class value by name; `highest`: the highest of them;
    `keys`: each team's jobs' `priority_key`s, in the same order.
    """

    by_team: Mapping[str, Sequence[JobSpec]]
    priority: Mapping[str, int]
    highest: int
    keys: Mapping[str, Sequence[PriorityKey]] | None = None


class _KeptWhileLong:
    """A queue a caller keeps from `active_at` waiting jobs on (dropped below half of that:
    a short queue's sort costs less than the bookkeeping)."""

    active_at: int
    kept: bool

    def add(self, job: JobSpec) -> None: ...

    def _keeping(self, pending: Collection[JobSpec]) -> bool:
        """Whether the queue is kept for this cycle, filled from `pending` (every waiting
        job) when it starts to be."""
        if not self.kept:
            if len(pending) < self.active_at:
                return False
            self.kept = True
            for job in pending:
                self.add(job)
        return True


class KeptQueue(_KeptWhileLong):
    """Each team's waiting jobs in `priority_key` order, kept while the queue is long.

    Kept from `active_at` waiting jobs (dropped below half of that): a short queue's sort
    costs less than the bookkeeping. While kept, an arrival or a start costs a binary search
    and a list move."""

    def __init__(self, index: TeamIndex, *, active_at: int = 16) -> None:
        self._index = index
        self.active_at = active_at
        self.kept = False
        self._keys: dict[str, list[PriorityKey]] = {}
        self._jobs: dict[str, list[JobSpec]] = {}
        self._priority: dict[str, int] = {}
        self._values: dict[int, int] = {}  # class value -> waiting jobs of it

    def add(self, job: JobSpec) -> None:
        if not self.kept:
            return
        value = self._index.priority(job)
        key = priority_key(job, value)
        keys = self._keys.setdefault(job.team, [])
        i = bisect.bisect_left(keys, key)
        keys.insert(i, key)
        self._jobs.setdefault(job.team, []).insert(i, job)
        self._priority[job.name] = value
        self._values[value] = self._values.get(value, 0) + 1

    def remove(self, job: JobSpec) -> None:
        """`job` left the queue (it started); raises KeyError if the kept queue lacks it."""
        if not self.kept:
            return
        value = self._priority.pop(job.name)
        team = job.team
        keys, jobs = self._keys[team], self._jobs[team]
        i = bisect.bisect_left(keys, priority_key(job, value))
        if i == len(jobs) or jobs[i] is not job:
            raise KeyError(job.name)
        del keys[i]
        del jobs[i]
        if not jobs:
            del self._keys[team], self._jobs[team]
        uncount(self._values, value)
        if len(self._priority) < self.active_at // 2:
            self.kept = False
            self._keys, self._jobs, self._priority, self._values = {}, {}, {}, {}

    def view(self, pending: Collection[JobSpec]) -> Kept | None:
        """This cycle's `Kept`, `pending` being every waiting job; None while the queue is
        short (the cycle sorts it)."""
        if not self._keeping(pending):
            return None
        return Kept(self._jobs, self._priority, max(self._values, default=0), self._keys)


LevelKey = tuple[float, str]  # a job's place within its LAS queue: submission, then name


@dataclass(frozen=True, slots=True)
class KeptLevels:
    """What a caller that keeps a Tiresias queue hands `decide(kept=...)`.

    `levels`: the waiting jobs of each least-attained-service queue (`sched.las`: index =
    queue, starvation promotion applied at the cycle's time), each in the order
    `orders.Tiresias` gives within a queue (submission time, then name); `priority` and
    `highest`: as `Kept`'s (quota reclaim keys its searches by class value). `keys`: each
    queue's jobs' (submission time, name), in the same order; `by_size`: per queue, the
    keys of its jobs by whole GPUs per worker (`JobSpec.gpus`, 0 for any other request), so
    a cycle passing over jobs too big for any node's room can jump to the next that fits
    (`next_fitting`).
    """

    levels: Sequence[Sequence[JobSpec]]
    priority: Mapping[str, int]
    highest: int
    keys: Sequence[Sequence[LevelKey]] = ()
    by_size: Sequence[Mapping[int, Sequence[LevelKey]]] = ()

    def next_fitting(self, level: int, start: int, room: int) -> int:
        """The first position from `start` in queue `level` of a job whose worker asks for
        at most `room` whole GPUs, or any other request (its length: none)."""
        keys = self.keys[level]
        if start >= len(keys):
            return start
        at = keys[start]
        first: LevelKey | None = None
        for size, sized in self.by_size[level].items():
            if size > room and size:
                continue
            i = bisect.bisect_left(sized, at)
            if i < len(sized) and (first is None or sized[i] < first):
                first = sized[i]
        return len(keys) if first is None else bisect.bisect_left(keys, first, start)


# a promotion due within this many seconds of the cycle is checked with `LasQueues.pending`
# itself: `promoted_at_s` and `pending` round differently (by an ulp of the clock)
PROMOTION_SLACK_S = 1e-3


class KeptLasQueue(_KeptWhileLong):
    """The waiting jobs of each least-attained-service queue, kept while the queue is long.

    The Tiresias order sorts the whole queue by (queue, submission, name) every cycle, and
    a job's queue is its attained service's, or queue 0 once it has starved. Attained
    service does not grow while a job waits, so a waiting job changes queue only when it
    is promoted, at a time known when it joins (`LasQueues.promoted_at_s`): kept per queue
    in submission order with a heap of promotion times, the order is the queues one after
    the other, and a cycle takes jobs off them lazily. Kept from `active_at` waiting jobs
    (dropped below half of that), as `KeptQueue`."""

    def __init__(self, index: TeamIndex, queues: LasQueues, *, active_at: int = 16) -> None:
        self._index, self._queues = index, queues
        self.active_at = active_at
        self.kept = False
        self._seq = count()  # ties in the promotion heap: jobs are never compared
        self._clear()

    def _clear(self) -> None:
        levels = len(self._queues.thresholds_gpu_s) + 1
        self._keys: list[list[LevelKey]] = [[] for _ in range(levels)]
        self._jobs: list[list[JobSpec]] = [[] for _ in range(levels)]
        self._by_size: list[dict[int, list[LevelKey]]] = [{} for _ in range(levels)]
        self._waiting: dict[str, tuple[JobSpec, int]] = {}  # name -> (job, its queue)
        self._priority: dict[str, int] = {}
        self._values: dict[int, int] = {}  # class value -> waiting jobs of it
        # (promotion time, tie, job) of waiting jobs above queue 0; a job that left the
        # queue leaves its entry, dropped when it comes up (`_promote`)
        self._promotions: list[tuple[float, int, JobSpec]] = []

    def add(self, job: JobSpec) -> None:
        if not self.kept:
            return
        level = self._queues.served(job)
        self._insert(job, level)
        if level:
            entry = (self._queues.promoted_at_s(job), next(self._seq), job)
            heapq.heappush(self._promotions, entry)
        value = self._index.priority(job)
        self._priority[job.name] = value
        self._values[value] = self._values.get(value, 0) + 1

    def remove(self, job: JobSpec) -> None:
        """`job` left the queue (it started); raises KeyError if the kept queue lacks it."""
        if not self.kept:
            return
        self._take(job)
        uncount(self._values, self._priority.pop(job.name))
        if len(self._waiting) < self.active_at // 2:
            self.kept = False
            self._clear()

    def view(self, pending: Collection[JobSpec], now_s: float) -> KeptLevels | None:
        """This cycle's `KeptLevels` at `now_s`, `pending` being every waiting job; None
        while the queue is short (the cycle sorts it)."""
        if not self._keeping(pending):
            return None
        self._promote(now_s)
        return KeptLevels(
            self._jobs, self._priority, max(self._values, default=0), self._keys, self._by_size
        )

    def _insert(self, job: JobSpec, level: int) -> None:
        key = (job.submitted_s, job.name)
        keys = self._keys[level]
        i = bisect.bisect_left(keys, key)
        keys.insert(i, key)
        self._jobs[level].insert(i, job)
        self._waiting[job.name] = (job, level)
        bisect.insort(self._by_size[level].setdefault(job.gpus or 0, []), key)

    def _take(self, job: JobSpec) -> None:
        found = self._waiting.get(job.name)
        if found is None or found[0] is not job:
            raise KeyError(job.name)
        level = found[1]
        keys, jobs = self._keys[level], self._jobs[level]
        key = (job.submitted_s, job.name)
        i = bisect.bisect_left(keys, key)
        del keys[i]
        del jobs[i]
        del self._waiting[job.name]
        by_size = self._by_size[level]
        size = job.gpus or 0
        sized = by_size[size]
        del sized[bisect.bisect_left(sized, key)]
        if not sized:
            del by_size[size]

    def _promote(self, now_s: float) -> None:
        """Move the jobs that have starved by `now_s` to queue 0."""
        heap, queues = self._promotions, self._queues
        early = []  # due by the clock's rounding, not by `pending`'s: not yet
        while heap and heap[0][0] <= now_s + PROMOTION_SLACK_S:
            entry = heapq.heappop(heap)
            job = entry[2]
            found = self._waiting.get(job.name)
            if found is None or found[0] is not job:
                continue  # it left the queue (and may be back as a new spec, with its own)
            if queues.pending(job, now_s) != 0:
                early.append(entry)
                continue
            self._take(job)
            self._insert(job, 0)
        for entry in early:
            heapq.heappush(heap, entry)
