"""Lean cycles: a caller that keeps its queue between cycles and reads only what a cycle
starts lets `decide()` skip the jobs whose turn cannot end in a start (issue 29, design 0014).

A simulator or a queue-ETA replay asks `decide()` for a cycle after every event, and in a
congested run almost every waiting job waits again: a full cycle looks at each of them
(an order, a memo lookup, a reason noted), so its cost follows the queue, not what changed.
Neither caller reads the reasons or the order considered. For the profiles where a job that
does not fit changes nothing and nothing but freed capacity can make it fit (no eviction, no
reservation, a FIFO order fixed at arrival: `qualifies`), two facts decide most of a cycle
before it starts:

- **Nothing freed since the last cycle** (the state's `free_epoch` unchanged; GPUs were
  only taken, by admissions, failed nodes or draining GPUs; quota usage only grew): every
  job that waited then waits now, since fitting whole GPUs and passing a quota are
  monotone in what is free. Only the jobs that joined the queue since can start, and a
  job that does not fit changes neither the state nor the quota book, so looking at those
  alone, in their order, admits exactly what the full cycle would (`Lean.fresh`).
  Best-effort head-of-line only: under strict FIFO a waiting job blocks the new ones.
- **No node has room for the smallest worker** any job still waiting asks for: nothing
  can start, whatever is left of the queue (`Lean.sizes`, checked after every admission;
  under strict FIFO also once a job blocks the rest).
- **A failure holds while GPUs are only taken**: a shape that did not fit at one free
  epoch does not fit until something is freed, so a lean cycle's memo of failed shapes
  is kept by the free epoch, not the state version (a full cycle's is kept by version:
  its reasons name what is free, which every admission changes).

A lean cycle's admissions, evictions (none), flavors and re-layouts are exactly a full
cycle's (`tests/sim/test_lean_cycles.py` replays profiles both ways, and
`scripts/sim_fingerprints.py` checks its runs again lean); its `pending_reasons` and
`considered` are empty: a caller that shows why jobs wait (the control plane) runs full
cycles.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

from gpufleet.sched.orders import fifo_key
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import Profile

K = TypeVar("K")


@dataclass(frozen=True, slots=True)
class Lean:
    """What the caller of a lean cycle vouches for (see the module docstring).

    `decide(pending, lean=...)` then reads `pending` as the whole queue already in FIFO
    order (`fifo_key`). `fresh`: the jobs that joined it since the caller's last cycle,
    in that order, when nothing was freed since; None: any job may start.
    `sizes`: how many of the jobs the cycle may look at (`fresh`, else `pending`) ask
    for each number of whole GPUs per worker (`worker_gpus`); empty, or a 0 among them
    (a slice, a fraction, a workload-sized job), turns the stop rule off.
    """

    fresh: Sequence[JobSpec] | None = None
    sizes: Mapping[int, int] = field(default_factory=dict)


def qualifies(profile: Profile) -> bool:
    """Whether lean cycles admit what full cycles admit under `profile`: no preemption (a
    waiting job could evict one started since), no backfill reservation (it moves with
    time), FIFO order (fixed at arrival), gangs and requests as asked."""
    return (
        not profile.preemption
        and profile.head_of_line != "backfill"
        and profile.queue_order == "fifo"
        and profile.gang
        and not profile.whole_gpus_only
    )


def uncount(counts: dict[K, int], key: K) -> None:
    """One fewer of `key` in a census; a count that reaches 0 is removed (so the smallest
    key is the smallest still counted). Raises KeyError if `key` is not counted."""
    left = counts[key] - 1
    if left:
        counts[key] = left
    else:
        del counts[key]


def worker_gpus(job: JobSpec) -> int:
    """Whole GPUs one worker asks for; 0 for a slice, a fraction or a workload-sized job."""
    if job.workload is not None or job.gpus is None:
        return 0
    return job.gpus


class LeanQueue:
    """A pending queue kept in FIFO order between cycles, with what a lean cycle needs:
    the jobs that joined since the last cycle, the free epoch it ended at, and how many
    waiting jobs ask for each worker size (so the smallest is known without a scan).

    Kept only while the queue is long (`active_at` jobs and more; dropped below half of
    that): a short queue's full cycle costs less than the bookkeeping. While kept, an
    insertion or a removal costs a binary search and a list move (C memmove), not a sort
    per cycle; the caller's own pending map stays the record of what waits."""

    def __init__(self, *, best_effort: bool, active_at: int = 16) -> None:
        self._best_effort = best_effort
        self.active_at = active_at
        self.kept = False  # whether the queue is kept in order now (long enough)
        self._keys: list[tuple[float, str]] = []
        self._jobs: list[JobSpec] = []
        self._sizes: Counter[int] = Counter()
        self._fresh: list[JobSpec] = []
        self._epoch: int | None = None  # the state's free epoch when the last cycle ended

    @property
    def jobs(self) -> list[JobSpec]:
        """The queue in FIFO order while kept (read-only by contract: `decide()` only
        iterates it); empty while the queue is short."""
        return self._jobs

    def add(self, job: JobSpec) -> None:
        self._fresh.append(job)
        if not self.kept:
            return
        key = fifo_key(job)
        i = bisect.bisect_left(self._keys, key)
        self._keys.insert(i, key)
        self._jobs.insert(i, job)
        self._sizes[worker_gpus(job)] += 1

    def remove(self, job: JobSpec) -> None:
        """`job` left the queue (it started); raises KeyError if the kept queue lacks it."""
        if not self.kept:
            return
        i = self._index(job)
        if i is None:
            raise KeyError(job.name)
        del self._keys[i]
        del self._jobs[i]
        uncount(self._sizes, worker_gpus(job))
        if len(self._jobs) < self.active_at // 2:
            self.kept = False
            self._keys, self._jobs, self._sizes = [], [], Counter()

    def lean(self, free_epoch: int, pending: Collection[JobSpec]) -> Lean | None:
        """This cycle's `Lean` for a state at `free_epoch`, `pending` being every waiting
        job; None: a full cycle (a short queue)."""
        if not self.kept:
            if len(pending) < self.active_at:
                return None
            self._jobs = sorted(pending, key=fifo_key)
            self._keys = [fifo_key(j) for j in self._jobs]
            self._sizes = Counter(worker_gpus(j) for j in self._jobs)
            self.kept = True
        if 0 in self._sizes:  # a slice or fraction waits: full cycles (re-layouts, no stop)
            return Lean()
        if self._best_effort and free_epoch == self._epoch:
            fresh = sorted(self._fresh, key=fifo_key)  # few: those that came since
            fresh = [j for j in fresh if self._index(j) is not None]
            return Lean(fresh, Counter(worker_gpus(j) for j in fresh))
        return Lean(None, self._sizes)

    def cycled(self, free_epoch: int) -> None:
        """A cycle (lean or full) ran and the state is at `free_epoch`: every waiting job
        was decided."""
        self._epoch = free_epoch
        self._fresh.clear()

    def _index(self, job: JobSpec) -> int | None:
        """Where the kept queue holds `job` (this very spec object), if it does."""
        i = bisect.bisect_left(self._keys, fifo_key(job))
        return i if i < len(self._jobs) and self._jobs[i] is job else None
