"""Discretised least-attained-service queues (Tiresias, Gu et al., NSDI'19, §3.2 and §4.2).

Tiresias orders jobs by the GPU-service they have received, attained GPU-seconds (the
"2D" of 2D-LAS: GPUs × time), without knowing how long they will run. The service is
discretised into K queues by thresholds: a job starts in queue 0 and moves down a queue each
time its attained service crosses a threshold. Jobs in a lower queue go first; within a queue
they go in arrival order. A job that has waited longer than `starve_factor` × the time it has
run is promoted back to queue 0 (the paper's STARVELIMIT), so a long job is never starved.

The same queues serve the queue order (`orders.Tiresias`) and the preemption that makes the
policy Tiresias and not FIFO (`preempt.LasPreemption`): a waiting job in a lower queue evicts
running jobs of higher queues. Without it, every waiting job has zero attained service and the
order collapses to arrival order. Only jobs that checkpoint are evicted (Tiresias suspends a
job and resumes it from its checkpoint): a workload that declares no checkpoints gets the
LAS order without preemption.

A running job's queue counts the service of its current run only; a waiting job's, all its
runs. A job restarted after a preemption or a starvation promotion therefore runs in queue 0
again until this run crosses the first threshold. Counting all its runs while it runs (as
the control plane did) livelocks: a promoted job restarts with its old service, sits in the
last queue at once and is evicted by the next queue-0 job, which in turn starves and is
promoted, and so on. On the Pollux workloads that variant made 4,654 preemptions on one
160-job workload (26 with this rule) and three of the eight did not finish in a minute.
Tiresias resets a promoted job's service (its STARVELIMIT promotion puts it back in the
first queue as new); this rule does so at every restart, which the simulator and the live
service share.

Both moves happen on the clock, with no arrival or finish: a running job's service crosses a
threshold (`crossings_s`) and a waiting job reaches its promotion (`promoted_at_s`). A caller
that schedules in cycles asks for one at those times (the simulator queues an event for
each), else the move waits for whatever happens next.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from functools import cached_property

from gpufleet.cluster import MILLI
from gpufleet.specs.jobs import JobSpec

# the service a running job's queue counts from when its run starts (see the docstring)
RUN_STARTS_AT_GPU_S = 0.0


@dataclass(frozen=True)
class LasQueues:
    """Queue thresholds in attained GPU-seconds and the starvation limit.

    Default: two queues split at 16 GPU-hours (57,600 GPU-seconds), starvation after twice
    the running time spent waiting. On the Pollux workloads (tests/sim/test_tiresias_pollux.py)
    this gives a mean JCT of 3,900 s against the published Tiresias 4,038 s, with 92
    preemptions over the 1,280 jobs (the simulator acting on each crossing and promotion when
    it happens, a preempted job requeued as of its stop); the earlier split at 1 and 100
    GPU-hours gave 5,674 s and 1,718 preemptions (a job crossing 1 GPU-hour is evicted by
    every newcomer, and pays a restart each time).
    """

    thresholds_gpu_s: tuple[float, ...] = (57_600.0,)
    starve_factor: float = 2.0

    @cached_property
    def unserved(self) -> int:
        """The queue of a job with no attained service (asked for most waiting jobs, for
        every cycle's order and memo keys)."""
        return self.by_service(0.0)

    def by_service(self, attained_gpu_s: float) -> int:
        """The queue a job with this attained service sits in (0 = served least)."""
        return sum(1 for t in self.thresholds_gpu_s if attained_gpu_s >= t)

    def pending(self, job: JobSpec, now_s: float) -> int:
        """A waiting job's queue, with starvation promotion: a job that has waited at least
        `starve_factor` × its running time since it was last queued (`submitted_s`: the
        simulator and the control plane requeue a stopped job as of its stop) goes back to
        queue 0."""
        attained = job.attained_gpu_s
        if attained == 0.0:  # most waiting jobs have never run: no promotion, the first queue
            return self.unserved
        executed_s = _executed_s(job)
        waited_s = now_s - job.submitted_s  # since it was last queued (`submitted_s`)
        if attained > 0 and waited_s >= self.starve_factor * executed_s:
            return 0
        return self.by_service(attained)

    def served(self, job: JobSpec) -> int:
        """A waiting job's queue by its attained service alone (`pending` before any
        promotion)."""
        attained = job.attained_gpu_s
        return self.unserved if attained == 0.0 else self.by_service(attained)

    def promoted_at_s(self, job: JobSpec) -> float:
        """When a waiting job that has run goes back to queue 0 (`pending`'s starvation
        rule, solved for the time: it waits from then on at least `starve_factor` × its
        running time). Callers that keep the queues compare with `pending` near this time:
        the two roundings may differ by an ulp."""
        executed_s = _executed_s(job)
        return job.submitted_s + self.starve_factor * executed_s

    @staticmethod
    def run_service_gpu_s(job: JobSpec, held_milli: int, now_s: float) -> float:
        """A running job's GPU-seconds in its current run so far: its queue's measure (the
        module's docstring says why earlier runs do not count while it runs)."""
        return attained_at(RUN_STARTS_AT_GPU_S, job.started_s, held_milli, now_s)

    def crossings_s(self, attained_gpu_s: float, started_s: float, held_milli: int) -> list[float]:
        """When a running job's attained service reaches each threshold (`running` puts it
        in the next queue from about then; a caller that keeps these compares with
        `attained_at` near them: the two roundings may differ by an ulp). A job that holds
        nothing never gets there (inf)."""
        gpus = held_milli / MILLI
        return [
            started_s
            if attained_gpu_s >= t
            else (math.inf if gpus <= 0 else started_s + (t - attained_gpu_s) / gpus)
            for t in self.thresholds_gpu_s
        ]

    def running(self, job: JobSpec, held_milli: int, now_s: float) -> int:
        """A running job's queue by the service of its current run."""
        return self.by_service(self.run_service_gpu_s(job, held_milli, now_s))


def _executed_s(job: JobSpec) -> float:
    """Seconds a job has run, from its attained GPU-seconds (the starvation rule's clock)."""
    return job.attained_gpu_s / max(1.0, float(job.total_gpus or 1))


def attained_at(
    attained_gpu_s: float, started_s: float | None, held_milli: int, now_s: float
) -> float:
    """Attained GPU-seconds of a job that had `attained_gpu_s` before a run that started at
    `started_s` (None: not running) holding `held_milli`, at `now_s`."""
    ran_s = 0.0 if started_s is None else max(0.0, now_s - started_s)
    return attained_gpu_s + held_milli / MILLI * ran_s


TIRESIAS_QUEUES = LasQueues()
