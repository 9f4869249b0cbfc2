"""A queue kept in priority order between cycles, for quiet cycles of the priority and
fair-share orders (issue 29, design 0014 "Kept order").

A full cycle sorts the whole queue and reads every waiting job's priority before it looks
at the first job: O(queue) however early the cycle ends. A caller that runs quiet cycles
(`decide(quiet=True)`: the simulator, the queue ETA) can keep each team's waiting jobs in
the order both plugins use within a team (`orders.priority_key`: class value, then FIFO),
each job's class value, and how many wait at each value. A cycle handed that (`Kept`) takes
jobs off the teams' heads lazily, so its cost follows the jobs it looks at: with the stop
rule (no room for the smallest waiting worker), a congested queue's cycle looks at a few.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from typing import Protocol

from gpufleet.sched.framework import OrderContext
from gpufleet.sched.lean import uncount
from gpufleet.sched.orders import PriorityKey, priority_key
from gpufleet.sched.team_index import TeamIndex
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import Profile

KEPT_ORDERS = frozenset({"priority", "fair-share"})  # orders with `order_kept`


def keeps(profile: Profile) -> bool:
    """Whether a quiet caller may keep the queue for `profile` (its order is fixed per job;
    Tiresias's and Slurm's multifactor keys move with time)."""
    return profile.queue_order in KEPT_ORDERS


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


class KeptQueue:
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
        if not self.kept:
            if len(pending) < self.active_at:
                return None
            self.kept = True
            for job in pending:
                self.add(job)
        return Kept(self._jobs, self._priority, max(self._values, default=0), self._keys)
