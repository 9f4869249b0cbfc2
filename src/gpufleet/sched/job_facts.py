"""What a scheduling cycle derives from each pending job, derived once per job, not per cycle.

A congested queue is looked at again every cycle: hundreds or thousands of jobs that
mostly wait, each re-read for its priority class value, its requests on this cluster and
the fields that key the cycle's memo of failed shapes (`decide._Cycle`). Those answers are
pure functions of the job's (frozen) spec, the teams and the cluster, so they are kept per
job object and reused while the same object comes back (the simulator and the ETA hand the
same pending specs to every cycle until a job starts or is requeued; a requeued job is a
new object and gets new facts). Design 0014 says why this is safe.

The cache lives with the cluster (`Cluster.derived`), so a re-laid-out cluster starts a
new one; an entry is reused only for the very same job object, teams index and
whole-GPU flag. Entries hold their job, so an id is never reused while its entry
lives; each cycle keeps only its own queue's entries (`RequestShapes.priorities`).
"""

from __future__ import annotations

from collections.abc import Sequence

from gpufleet.cluster import Cluster
from gpufleet.sched.backfill import expected_runtime_s
from gpufleet.sched.requests import Request, requests_for, whole_gpus
from gpufleet.sched.team_index import TeamIndex
from gpufleet.specs.jobs import JobSpec


class Facts:
    """One job's facts, with what they were derived for: its priority value (at once: every
    cycle reads it), its requests (None until first read) and, once `make` has run (a job
    first asked for its memo key: most jobs of an uncongested run never are), its memo
    shape (None: not memoised), the two memo keys built from it and its expected runtime."""

    __slots__ = (
        "index",
        "job",
        "key_ends",
        "key_no_end",
        "made",
        "priority",
        "requests",
        "runtime_s",
        "shape",
        "whole",
    )

    def __init__(self, job: JobSpec, index: TeamIndex, whole: bool, priority: int) -> None:
        self.job, self.index, self.whole = job, index, whole
        self.priority = priority
        self.requests: tuple[Request, ...] | None = None
        self.made = False

    def make(self) -> None:
        """The memo shape, keys and runtime (read only after this has run)."""
        job = self.job
        shape: tuple[object, ...] | None = None
        if job.workload is None:  # one sized from its model and load is not memoised
            shape = (
                job.team,
                job.gpus,
                job.workers,
                tuple(job.accelerators),
                job.mig_profile,
                job.gpu_fraction,
                job.topology.required,
                job.spot_ok,
                self.priority,
            )
        self.shape = shape
        # the cycle's memo keys when only the reservation flag follows the shape (built
        # here once, not per cycle; `decide._Cycle._memo_key` says what they stand for)
        self.key_no_end = (shape, False)
        self.key_ends = (shape, True)
        self.runtime_s = expected_runtime_s(job)
        self.made = True


class RequestShapes:
    """A cluster's requests per job shape, and its per-job facts.

    `requests_for` is a pure function of a job's request fields and the cluster's
    accelerators, and a queue repeats a few shapes, so each is built once per cluster
    (held by `Cluster.derived`). Jobs sized from an inference workload are not keyed
    (their model and load are the shape)."""

    def __init__(self, cluster: Cluster) -> None:
        self._accelerators = list(cluster.accelerators)
        self._by_shape: dict[tuple[object, ...], tuple[Request, ...]] = {}
        # id(job) -> its facts; read directly by `decide._Cycle.answered` (its hot loop),
        # which checks the entry's job, index and flag as `facts` does
        self.facts_of: dict[int, Facts] = {}

    def requests(self, job: JobSpec, whole: bool) -> tuple[Request, ...]:
        """The job's requests on this cluster; `whole`: slices and fractions as whole GPUs
        (`Profile.whole_gpus_only`)."""
        accelerators = self._accelerators
        if job.workload is not None:
            found = requests_for(job, accelerators)
            return tuple(whole_gpus(found) if whole else found)
        key = (
            job.gpus,
            job.workers,
            tuple(job.accelerators),
            job.mig_profile,
            job.gpu_fraction,
            whole,
        )
        shaped = self._by_shape.get(key)
        if shaped is None:
            found = requests_for(job, accelerators)
            shaped = self._by_shape[key] = tuple(whole_gpus(found) if whole else found)
        return shaped

    def facts(self, job: JobSpec, index: TeamIndex, whole: bool) -> Facts:
        """The job's facts, made on first use (raises what `index.priority` raises)."""
        found = self.facts_of.get(id(job))
        if found is not None and found.job is job and found.index is index and found.whole is whole:
            return found
        made = self.facts_of[id(job)] = Facts(job, index, whole, index.priority(job))
        return made

    def priorities(
        self, pending: Sequence[JobSpec], index: TeamIndex, whole: bool
    ) -> dict[str, int]:
        """Each pending job's priority value, and the facts kept from now on: this queue's.

        Facts of jobs that left the queue (started, or a caller's other queue) are dropped
        here, so the cache holds no spec the caller let go (design 0014: a long run's
        finished jobs keep nothing alive) and is never larger than one queue."""
        old = self.facts_of
        kept: dict[int, Facts] = {}
        out: dict[str, int] = {}
        for job in pending:
            key = id(job)
            f = old.get(key)
            if f is None or f.job is not job or f.index is not index or f.whole is not whole:
                f = Facts(job, index, whole, index.priority(job))
            kept[key] = f
            out[job.name] = f.priority
        self.facts_of = kept
        return out

    def prune(self, pending: Sequence[JobSpec]) -> None:
        """Keep only `pending`'s facts once the cache has grown well past it: what
        `priorities` does every cycle, done by a lean cycle (which reads no priorities)
        only as often as the cache doubles, so it costs O(1) per cycle amortised."""
        if len(self.facts_of) <= 2 * len(pending) + 1024:
            return
        old = self.facts_of
        self.facts_of = {id(j): old[id(j)] for j in pending if id(j) in old}

    def job_requests(self, facts: Facts) -> tuple[Request, ...]:
        """A job's requests, kept in its facts after the first read (a job sized from its
        model and load is sized again: its requests are not keyed)."""
        found = facts.requests
        if found is None:
            found = self.requests(facts.job, facts.whole)
            if facts.job.workload is None:
                facts.requests = found
        return found
