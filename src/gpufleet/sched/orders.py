"""Queue-order plugins: which pending job the cycle looks at next.

- `fifo` — submission time, then name (a total order).
- `priority` — priority class value, highest first, then FIFO.
- `fair-share` — teams take turns by weighted dominant share (design 0009): the
  team furthest below its fair share goes next; within a team, priority then
  FIFO. The share is live (`OrderContext.share`), so admissions in this cycle
  count, and decayed past use (`sched.fairshare`) keeps a team that ran a lot
  recently behind one that did not.
- `tiresias` — discretised two-dimensional least-attained-service (Tiresias,
  NSDI'19): jobs sit in queues by the GPU-seconds they have received
  (`attained_gpu_s`), fewest first; FIFO within a queue; a job that has waited
  longer than `starve_factor` × its executed time is promoted to the first
  queue, so long jobs are not starved.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable, Iterator, Sequence

from gpufleet.sched.framework import OrderContext
from gpufleet.specs.jobs import JobSpec


def _priority_key(job: JobSpec, ctx: OrderContext) -> tuple[float, float, str]:
    return (-ctx.priority.get(job.name, 0), job.submitted_s, job.name)


class Fifo:
    """First submitted, first looked at; ties by name so the order is total."""

    name = "fifo"

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=lambda j: (j.submitted_s, j.name))


class PriorityOrder:
    """Highest priority class value first, then FIFO."""

    name = "priority"

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=lambda j: _priority_key(j, ctx))


class FairShare:
    """Team with the lowest weighted dominant share first; priority then FIFO within a team.

    A heap of teams keyed by (share, their next job's priority key); the share is
    re-read when a team comes out of the heap, and a team whose share grew since
    it was pushed goes back in, so each pick sees the shares as they are now.
    """

    name = "fair-share"

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterator[JobSpec]:
        queues: dict[str, list[JobSpec]] = {}
        for job in sorted(jobs, key=lambda j: _priority_key(j, ctx)):
            queues.setdefault(job.team, []).append(job)
        heap = [(ctx.share(t), _priority_key(q[0], ctx), t) for t, q in queues.items()]
        heapq.heapify(heap)
        nxt = dict.fromkeys(queues, 0)
        while heap:
            share, key, team = heapq.heappop(heap)
            now = ctx.share(team)
            if now > share + 1e-12:
                heapq.heappush(heap, (now, key, team))
                continue
            queue, i = queues[team], nxt[team]
            yield queue[i]
            nxt[team] = i + 1
            if i + 1 < len(queue):
                heapq.heappush(heap, (ctx.share(team), _priority_key(queue[i + 1], ctx), team))


class Tiresias:
    """Discretised 2D-LAS: fewest attained GPU-seconds first, with starvation promotion."""

    name = "tiresias"

    def __init__(
        self, thresholds_gpu_s: tuple[float, ...] = (3_600.0, 360_000.0), starve_factor: float = 2.0
    ) -> None:
        self.thresholds_gpu_s = thresholds_gpu_s
        self.starve_factor = starve_factor

    def queue_of(self, job: JobSpec, now_s: float) -> int:
        attained = job.attained_gpu_s
        executed_s = attained / max(1, job.total_gpus or 1)
        waited_s = now_s - job.submitted_s
        if attained > 0 and waited_s >= self.starve_factor * executed_s:
            return 0  # promoted: waited too long relative to what it ran
        return sum(1 for t in self.thresholds_gpu_s if attained >= t)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=lambda j: (self.queue_of(j, ctx.now_s), j.submitted_s, j.name))
