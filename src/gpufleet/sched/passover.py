"""Which waiting jobs a quiet cycle may pass over without looking: those whose look would
change nothing.

A job changes nothing by being looked at when it cannot be placed, seeks no reservation
(one was sought or set aside for an earlier job, or the profile has none) and cannot evict
(no waiting job can, `_Cycle.nothing_evicts`). It cannot be placed when one of its workers
needs more whole GPUs than any node has room for: the free ones, and for a job that ends
before the backfill reservation also the GPUs the reservation masks. Quiet cycles word no
reasons, so a job passed over leaves no trace.

The cycle's stop rule arms a `PassOver` after every look (`_StopRule.__call__`); kept
orders ask it as they take jobs off the teams' heads, before computing a job's sort key,
so a congested queue of jobs too big for the room costs a check each.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

from gpufleet.sched.backfill import expected_runtime_s
from gpufleet.specs.jobs import JobSpec


@dataclass(slots=True)
class PassOver:
    """The rule as armed now (mutable: the stop rule re-arms it as the cycle goes)."""

    on: bool = False  # no look can seek a reservation or evict
    free_room: int = 0  # most free whole GPUs on one node, the reservation's mask aside
    room: int = 0  # the same counting the masked GPUs (a job ending before may use them)
    now_s: float = 0.0
    start_s: float = -math.inf  # the reservation's start (-inf: none, nothing masked)

    def skips(self, job: JobSpec) -> bool:
        """Whether `job` may be passed over (False for a slice, a fraction or a job sized
        from a workload: no room rule speaks for them)."""
        if not self.on:
            return False
        size = job.gpus
        if not size or size <= self.free_room or job.workload is not None:
            return False
        if size > self.room:
            return True
        runtime = expected_runtime_s(job)  # `backfill.ends_before`, against the start alone
        return runtime is None or self.now_s + runtime > self.start_s
