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
- `multifactor` — Slurm's `priority/multifactor` plugin: a weighted sum of an
  age, a fair-share, a job-size and a QOS factor, each in [0, 1]; highest
  first, then FIFO (`Multifactor` says how each factor is modelled).
"""

from __future__ import annotations

import heapq
from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass
from itertools import filterfalse

from gpufleet.sched.framework import OrderContext
from gpufleet.sched.las import TIRESIAS_QUEUES, LasQueues
from gpufleet.specs.jobs import JobSpec


def fifo_key(job: JobSpec) -> tuple[float, str]:
    """A job's FIFO place: `order_key_s` where the control plane set one (a lead's move
    within the team's class, docs/design/0013), else when it joined the queue; then the
    name, so the order is total. Age and starvation still read `submitted_s`."""
    at = job.order_key_s
    return (job.submitted_s if at is None else at, job.name)


PriorityKey = tuple[int, tuple[float, str]]  # (-class value, FIFO place)


def priority_key(job: JobSpec, priority: int) -> PriorityKey:
    """A job's place within its team under the priority and fair-share orders: highest
    class value first, then FIFO (a total order: names are unique)."""
    return (-priority, fifo_key(job))


def _priority_key(job: JobSpec, ctx: OrderContext) -> PriorityKey:
    return priority_key(job, ctx.priority.get(job.name, 0))


class Fifo:
    """First submitted, first looked at; ties by name so the order is total."""

    name = "fifo"
    uses_share = False  # reads OrderContext.share (callers may skip usage history if not)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=fifo_key)


class PriorityOrder:
    """Highest priority class value first, then FIFO."""

    name = "priority"
    uses_share = False  # reads OrderContext.share (callers may skip usage history if not)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=lambda j: _priority_key(j, ctx))

    def order_kept(
        self,
        by_team: Mapping[str, Sequence[JobSpec]],
        ctx: OrderContext,
        skips: Callable[[JobSpec], bool] | None = None,
        keys: Mapping[str, Sequence[PriorityKey]] | None = None,
    ) -> Iterator[JobSpec]:
        """`order` for a caller that keeps each team's jobs in `priority_key` order
        (`sched.kept`, with their `keys` if it keeps them): a lazy merge, O(jobs taken ×
        log teams), less the jobs `skips` (a quiet cycle's pass-over rule), each asked at
        its turn (what the cycle did before may change its answer)."""
        if keys is None:
            merged: Iterator[JobSpec] = heapq.merge(
                *by_team.values(), key=lambda j: _priority_key(j, ctx)
            )
        else:  # keys are unique (names are): jobs are never compared
            pairs = heapq.merge(*(zip(keys[t], q, strict=True) for t, q in by_team.items()))
            merged = (job for _, job in pairs)
        return merged if skips is None else filterfalse(skips, merged)


class FairShare:
    """Team with the lowest weighted dominant share first; priority then FIFO within a team.

    A heap of teams keyed by (share, their next job's priority key); the share is
    re-read when a team comes out of the heap, and a team whose share grew since
    it was pushed goes back in, so each pick sees the shares as they are now.
    """

    name = "fair-share"
    uses_share = True  # reads OrderContext.share (callers may skip usage history if not)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterator[JobSpec]:
        # each job's key once; its position breaks ties as a stable sort would, so the
        # jobs themselves are never compared
        queues: dict[str, list[JobSpec]] = {}
        keys: dict[str, list[PriorityKey]] = {}
        priority = ctx.priority.get
        keyed = sorted(
            (
                (
                    -priority(j.name, 0),
                    (j.submitted_s if j.order_key_s is None else j.order_key_s, j.name),
                ),
                i,
                j,
            )  # `_priority_key`, inlined: this runs for every waiting job every cycle
            for i, j in enumerate(jobs)
        )
        for key, _, job in keyed:  # the merge reads the keys already built
            queues.setdefault(job.team, []).append(job)
            keys.setdefault(job.team, []).append(key)
        return self.order_kept(queues, ctx, keys=keys)

    def order_kept(
        self,
        by_team: Mapping[str, Sequence[JobSpec]],
        ctx: OrderContext,
        skips: Callable[[JobSpec], bool] | None = None,
        keys: Mapping[str, Sequence[PriorityKey]] | None = None,
    ) -> Iterator[JobSpec]:
        """The teams taking turns over their queues, each in `priority_key` order (kept so
        by a caller, `sched.kept`, with their `keys` if it keeps them, or sorted by
        `order`): O(jobs taken × log teams).

        `skips` (a quiet cycle's pass-over rule) names jobs to leave out, each asked at its
        turn (what the cycle did before may change its answer). A team's share changes
        only when a job it yielded is admitted, so it is read again only after a yield."""
        share_of = ctx.share
        heap = [
            (share_of(t), _priority_key(q[0], ctx) if keys is None else keys[t][0], t)
            for t, q in by_team.items()
            if q
        ]
        heapq.heapify(heap)
        pop, push = heapq.heappop, heapq.heappush
        taken = dict.fromkeys(by_team, 0)  # per team: its jobs yielded so far
        while heap:
            share, head, team = pop(heap)
            mine = share_of(team)
            if mine > share + 1e-12:
                push(heap, (mine, head, team))
                continue
            queue = by_team[team]
            team_keys = None if keys is None else keys[team]
            i, end = taken[team], len(queue)
            read = True  # `mine` is the team's share now
            while True:
                job = queue[i]
                i += 1
                if skips is None or not skips(job):
                    yield job
                    read = False  # the job may have been admitted
                if i == end:
                    break
                if not read:
                    mine, read = share_of(team), True
                # the team's next job goes back in the heap; when it would come straight
                # out again (it sorts before every other team's head) it is taken at once,
                # which is what the push, the pop and the share re-read would give
                nxt = (
                    mine,
                    _priority_key(queue[i], ctx) if team_keys is None else team_keys[i],
                    team,
                )
                if heap and heap[0] < nxt:
                    push(heap, nxt)
                    break
            taken[team] = i


class Tiresias:
    """Discretised 2D-LAS: fewest attained GPU-seconds first, with starvation promotion
    (`sched.las`); the `las` preemption plugin makes it preemptive."""

    name = "tiresias"
    uses_share = False  # reads OrderContext.share (callers may skip usage history if not)

    def __init__(self, queues: LasQueues = TIRESIAS_QUEUES) -> None:
        self.queues = queues

    def queue_of(self, job: JobSpec, now_s: float) -> int:
        return self.queues.pending(job, now_s)

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        return sorted(jobs, key=lambda j: (self.queue_of(j, ctx.now_s), j.submitted_s, j.name))


DAY_S = 86_400.0


@dataclass(frozen=True, slots=True)
class Factors:
    """One job's multifactor priority factors, each in [0, 1] (Slurm's names)."""

    age: float
    fairshare: float
    job_size: float
    qos: float


def job_gpus(job: JobSpec) -> float:
    """GPUs a job asks for, for the job-size factor: whole GPUs × workers, a fraction as
    itself; a MIG slice or a workload-sized request counts as none (it is under one GPU,
    and its size factor would be at most 1/cluster GPUs: noise against the others)."""
    if job.gpus:
        return float(job.total_gpus)
    return job.gpu_fraction or 0.0


class Multifactor:
    """Slurm's `priority/multifactor`: highest weighted sum of four factors first, then FIFO.

    Slurm (https://slurm.schedmd.com/priority_multifactor.html) computes

        priority = PriorityWeightAge · age + PriorityWeightFairshare · fair_share
                 + PriorityWeightJobSize · job_size + PriorityWeightQOS · qos (+ ...)

    with every factor in [0, 1]; the partition, association, TRES, nice and site terms
    are left out (one partition, no per-user nice). Factors as modelled here:

    - **age** = min(1, time waiting / `max_age_s`); `PriorityMaxAge` defaults to 7 days
      (7-0), after which every job has the full age factor.
    - **fair share** = 2^(−U/S), Slurm's classic formula (`PriorityFlags=NO_FAIR_TREE`;
      Fair Tree, the current default, ranks the same way for a flat set of accounts),
      with U the account's normalised decayed usage and S its normalised shares. U/S is
      approximated by `OrderContext.share(team)`: the team's weighted dominant share
      (GPUs held now plus its decayed past use, over the cluster's GPUs, divided by its
      fair-share weight; the decay half-life is `PriorityDecayHalfLife`'s 7-day default,
      `sched.fairshare`). It grows with the same usage and shrinks with the same weight,
      so teams rank as in Slurm; its scale differs (Slurm normalises usage by everyone's
      usage and shares by everyone's shares: with k equal teams each at its fair 1/k, Slurm
      gives U/S = 1, this proxy 1/k), which only changes how fair share trades off against
      the other factors. Shares are read once when the order is made — Slurm recomputes
      priorities every `PriorityCalcPeriod` (5 min), not between two starts of one pass.
    - **job size** = the job's GPUs / the cluster's GPUs (`PriorityFavorSmall=NO`, the
      default: a job asking for the whole machine gets 1.0, so big jobs are favoured and
      are not starved by small ones); GPUs stand for Slurm's nodes/CPUs. When the cluster
      size is unknown (`OrderContext.cluster_gpus` = 0) the largest job in the queue
      stands for it.
    - **qos** = the job's priority class value / the highest class value
      (`OrderContext.max_priority`, else the highest in the queue): Slurm normalises each
      QOS's priority by the highest QOS priority; priority classes play the role of QOS.
      A negative class value counts as 0.

    Default weights follow the example configuration of the Slurm multifactor docs —
    `PriorityWeightAge=1000`, `PriorityWeightFairshare=10000`, `PriorityWeightJobSize=1000`
    — and set `PriorityWeightQOS=10000` (the docs' example sets 0, as it uses no QOS; here
    priority classes are QOS and should weigh as much as fair share). Slurm's built-in
    default for every weight is 0, which would make the order plain FIFO.
    """

    name = "multifactor"
    uses_share = True  # reads OrderContext.share (callers may skip usage history if not)

    def __init__(
        self,
        *,
        weight_age: float = 1_000.0,
        weight_fairshare: float = 10_000.0,
        weight_job_size: float = 1_000.0,
        weight_qos: float = 10_000.0,
        max_age_s: float = 7 * DAY_S,
    ) -> None:
        self.weight_age = weight_age
        self.weight_fairshare = weight_fairshare
        self.weight_job_size = weight_job_size
        self.weight_qos = weight_qos
        self.max_age_s = max_age_s

    def factors(
        self,
        job: JobSpec,
        ctx: OrderContext,
        *,
        cluster_gpus: float,
        top_priority: int,
        share: float | None = None,
    ) -> Factors:
        """The job's four factors; `share` is its team's, read from `ctx` when not given."""
        waited = max(0.0, ctx.now_s - job.submitted_s)
        age = min(1.0, waited / self.max_age_s) if self.max_age_s > 0 else 1.0
        used = ctx.share(job.team) if share is None else share
        fairshare = 2.0 ** -max(0.0, used)
        size = min(1.0, job_gpus(job) / cluster_gpus) if cluster_gpus > 0 else 0.0
        value = max(0, ctx.priority.get(job.name, 0))
        qos = min(1.0, value / top_priority) if top_priority > 0 else 0.0
        return Factors(age, fairshare, size, qos)

    def score(self, f: Factors) -> float:
        """Slurm's weighted sum of the factors."""
        return (
            self.weight_age * f.age
            + self.weight_fairshare * f.fairshare
            + self.weight_job_size * f.job_size
            + self.weight_qos * f.qos
        )

    def order(self, jobs: Sequence[JobSpec], ctx: OrderContext) -> Iterable[JobSpec]:
        cluster_gpus = float(ctx.cluster_gpus) or max((job_gpus(j) for j in jobs), default=0.0)
        top = ctx.max_priority
        if top is None:
            top = max((ctx.priority.get(j.name, 0) for j in jobs), default=0)
        shares: Mapping[str, float] = {t: ctx.share(t) for t in {j.team for j in jobs}}
        score = self.scorer(ctx, cluster_gpus=cluster_gpus, top_priority=top, shares=shares)
        return sorted(jobs, key=lambda job: (-score(job), job.submitted_s, job.name))

    def scorer(
        self,
        ctx: OrderContext,
        *,
        cluster_gpus: float,
        top_priority: int,
        shares: Mapping[str, float],
    ) -> Callable[[JobSpec], float]:
        """`score(factors(job))` for one cycle's jobs, with what is the same for every job
        (weights, each team's fair-share factor) read once: the order scores every waiting
        job every cycle (slurm-like's congested runs spent half their time there). The
        same operations in the same order, so the floats are equal; a test holds the two
        equal."""
        now, max_age = ctx.now_s, self.max_age_s
        w_age, w_size, w_qos = self.weight_age, self.weight_job_size, self.weight_qos
        fair: dict[str, float] = {
            t: self.weight_fairshare * 2.0 ** -max(0.0, s) for t, s in shares.items()
        }
        priority = ctx.priority.get

        def score(job: JobSpec) -> float:
            age = min(1.0, max(0.0, now - job.submitted_s) / max_age) if max_age > 0 else 1.0
            size = min(1.0, job_gpus(job) / cluster_gpus) if cluster_gpus > 0 else 0.0
            value = max(0, priority(job.name, 0))
            qos = min(1.0, value / top_priority) if top_priority > 0 else 0.0
            return w_age * age + fair[job.team] + w_size * size + w_qos * qos

        return score
