"""Preemption plugins: which running jobs to evict so a pending job fits (design 0009, phase 6).

Called by `decide()` when a pending job passed its quota check but found no
placement. The profile lists the plugins to try, in order (default: quota
reclaim, then priority). Each plugin names *candidates*; the shared greedy
`choose_victims` picks among them. Two plugins ship:

- **`quota-reclaim`** — a team taking back its guarantee. Applies when the job
  keeps its team within its guaranteed GPUs of the flavor. Candidates are the
  preemptible jobs of *other teams of its cohort* that are borrowing (using more
  than their own guarantee of that flavor), per team only as many (cheapest
  first) as cover what that team borrows. Priority does not matter and the
  minimum runtime does not protect a borrower: a guarantee is a promise, and
  borrowed GPUs are lent on the understanding that they come back (Kueue's
  `reclaimWithinCohort: Any`).
- **`priority`** — jobs of strictly lower priority (a preemptible class, the job
  itself `preemptible`) that have run at least `MIN_RUNTIME_S`, so a job is
  never evicted right after it started (anti-thrashing); a running job with no
  `started_s` is never a candidate (its runtime is unknown).

Both consider only jobs *running at the start of the cycle*, never a
non-preemptible job, and only jobs holding GPUs of the requested accelerator.

- **Lost work** of a victim is its GPUs × the time since its last checkpoint
  (`last_checkpoint_s`, else `started_s`), in GPU-seconds.
- **Choice**: greedy over the candidates sorted by lost work, then by GPUs held
  *descending* (at equal lost work a bigger victim frees more, so fewer victims),
  then by name. On a what-if branch the candidates are released one by one until
  the pending job's placement succeeds; then each chosen victim, most lost work
  first, is tried back in: if the job still fits without it, it is spared.
- If releasing every candidate would still not place the job, nobody is evicted.

All of it runs on nested branches that roll back; the caller applies the result
and hands the eviction out as data: `Decisions.preempted[victim]`, an `Eviction`. The
preemptor is admitted with its placement but only *starts after the victims'
grace period* (`GRACE_PERIOD_S`, or the victim's `checkpoint_time_s` if longer),
during which the victims checkpoint and exit.
"""

from __future__ import annotations

from bisect import bisect_left
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from dataclasses import dataclass
from functools import cached_property
from typing import Literal, Protocol

from gpufleet.cluster import MILLI, Branch
from gpufleet.sched.census import evictable_value
from gpufleet.sched.framework import Eviction, Placed, PlacementPlugin
from gpufleet.sched.las import TIRESIAS_QUEUES, LasQueues
from gpufleet.sched.quota import QuotaBook, gpus_text
from gpufleet.sched.requests import Request
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import PriorityClass, TeamsSpec

MIN_RUNTIME_S = 600.0  # a job runs at least this long before it may be preempted
GRACE_PERIOD_S = 120.0  # time a victim gets to checkpoint and exit before the preemptor starts


@dataclass(frozen=True, slots=True)
class Candidate:
    """A running job that may be evicted, with what evicting it costs and frees."""

    job: JobSpec
    priority: int
    milli: int  # thousandths of a GPU of the requested accelerator it holds
    lost_gpu_s: float  # GPU-seconds of work since its last checkpoint (or start)

    @property
    def name(self) -> str:
        return self.job.name

    @property
    def sort_key(self) -> tuple[float, int, str]:
        return (self.lost_gpu_s, -self.milli, self.job.name)


def last_checkpoint_s(job: JobSpec, now_s: float) -> float | None:
    """The last checkpoint: as reported, else the last multiple of the job's checkpoint
    interval since its start (an assumption: it checkpoints on schedule), else its start."""
    if job.last_checkpoint_s is not None:
        return job.last_checkpoint_s
    start, every = job.started_s, job.checkpoint_interval_s
    if start is None or every is None or now_s <= start:
        return start
    return start + every * ((now_s - start) // every)


def lost_work_gpu_s(job: JobSpec, milli_held: int, now_s: float) -> float:
    """GPUs held × seconds since the last checkpoint (or the start); 0 if neither is known."""
    since = last_checkpoint_s(job, now_s)
    if since is None:
        return 0.0
    return milli_held / MILLI * max(0.0, now_s - since)


@dataclass(frozen=True)
class PreemptContext:
    """What a preemption plugin may look at: the cycle's running jobs, priorities and quota."""

    running: Collection[JobSpec]  # iterated only
    priority: Mapping[str, int]  # pending job -> priority value
    teams: TeamsSpec
    held_milli: Callable[[str], Mapping[str, int]]  # running job -> flavor -> milli held now
    book: QuotaBook
    now_s: float

    @cached_property
    def per_cycle(self) -> dict[object, object]:
        """What a plugin derives once per cycle (its key: the plugin's own), e.g. the running
        jobs ranked by attained service (`LasPreemption`)."""
        return {}

    @cached_property
    def classes(self) -> Mapping[str, PriorityClass | None]:
        """Running job -> its priority class; built on first use (most cycles never preempt)."""
        by_name = {c.name: c for c in self.teams.priority_classes}
        default = {t.name: t.default_priority for t in self.teams.teams}
        return {
            j.name: by_name.get(j.priority_class or default.get(j.team, "")) for j in self.running
        }

    @cached_property
    def evictable_by_priority(self) -> tuple[list[int], list[tuple[JobSpec, PriorityClass]]]:
        """Running jobs that any preemptor may evict, by ascending priority value, with the
        values alone for bisection: a preemptor scans only the jobs below it."""
        ranked = sorted(
            ((job, cls) for job in self.running if (cls := _evictable(job, self)) is not None),
            key=lambda jc: jc[1].value,
        )
        return [cls.value for _, cls in ranked], ranked

    @cached_property
    def lowest_evictable(self) -> Mapping[str, int]:
        """Team -> the lowest priority value among its evictable running jobs: a job beyond
        its team's quota whose priority is not above it has nothing of its own to evict.
        One pass, no sort and no per-job class map: asked in every cycle where a job is
        beyond its quota (5 % of the congested simulator runs' time through `classes` and
        `evictable_by_priority`). The rule is `_evictable`'s (`census.evictable_value`,
        which the simulator's census reads too); a test holds the two equal."""
        value_of = evictable_value(self.teams)
        out: dict[str, int] = {}
        for job in self.running:
            v = value_of(job)
            if v is not None and v < out.get(job.team, v + 1):
                out[job.team] = v
        return out


class PreemptionPlugin(Protocol):
    """Names the running jobs a pending job may evict, cheapest first, and says why."""

    name: str

    def candidates(
        self, job: JobSpec, request: Request, need_milli: int, ctx: PreemptContext
    ) -> list[Candidate]: ...

    def reason(
        self, job: JobSpec, victim: Candidate, request: Request, ctx: PreemptContext
    ) -> Eviction: ...

    def search_key(self, job: JobSpec, ctx: PreemptContext) -> object:
        """What besides its shape and team decides this plugin's candidates for `job`: two
        pending jobs with the same key find the same victims (decide() remembers a search
        that failed by it)."""
        ...


def _evictable(job: JobSpec, ctx: PreemptContext) -> PriorityClass | None:
    cls = ctx.classes.get(job.name)
    if cls is None or not cls.preemptible or not job.preemptible:
        return None  # an unknown class (team not in the teams file) is never evicted
    return cls


def _candidate(
    job: JobSpec, cls: PriorityClass, accelerator: str, ctx: PreemptContext
) -> Candidate | None:
    held = ctx.held_milli(job.name)
    milli = held.get(accelerator, 0)
    if milli <= 0:
        return None  # holds nothing this request could use (or was already evicted)
    total = sum(held.values())
    return Candidate(job, cls.value, milli, lost_work_gpu_s(job, total, ctx.now_s))


def _grace_s(victim: Candidate) -> float:
    return max(GRACE_PERIOD_S, victim.job.checkpoint_time_s or 0.0)


def _eviction(
    job: JobSpec,
    victim: Candidate,
    kind: Literal["priority", "quota-reclaim", "las"],
    cause: str,
    frees: str,
) -> Eviction:
    return Eviction(
        preemptor=job.name,
        kind=kind,
        cause=cause,
        frees=frees,
        lost_gpu_s=victim.lost_gpu_s,
        since_checkpoint=victim.job.checkpoints,
        grace_s=_grace_s(victim),
    )


class PriorityPreemption:
    """Evict strictly lower-priority preemptible jobs past their minimum runtime."""

    name = "priority"

    def candidates(
        self, job: JobSpec, request: Request, need_milli: int, ctx: PreemptContext
    ) -> list[Candidate]:
        mine = ctx.priority.get(job.name, 0)
        values, ranked = ctx.evictable_by_priority
        out: list[Candidate] = []
        for victim, cls in ranked[: bisect_left(values, mine)]:
            if victim.started_s is None or ctx.now_s - victim.started_s < MIN_RUNTIME_S:
                continue
            cand = _candidate(victim, cls, request.accelerator, ctx)
            if cand is not None:
                out.append(cand)
        out.sort(key=lambda c: c.sort_key)
        return out

    def search_key(self, job: JobSpec, ctx: PreemptContext) -> object:
        return ctx.priority.get(job.name, 0)

    def reason(
        self, job: JobSpec, victim: Candidate, request: Request, ctx: PreemptContext
    ) -> Eviction:
        mine = ctx.priority.get(job.name, 0)
        frees = f"{gpus_text(victim.milli)} {request.accelerator} GPUs"
        return _eviction(job, victim, "priority", f"priority {mine} > {victim.priority}", frees)


class QuotaReclaim:
    """A team within its guarantee takes GPUs back from cohort members that borrow them."""

    name = "quota-reclaim"

    def candidates(
        self, job: JobSpec, request: Request, need_milli: int, ctx: PreemptContext
    ) -> list[Candidate]:
        book, flavor = ctx.book, request.accelerator
        team = book.teams.get(job.team)
        if team is None or team.cohort is None:
            return []
        used = book.used.get((job.team, flavor), 0)
        if used + need_milli > book.guaranteed(job.team, flavor):
            return []  # beyond its guarantee: nothing to reclaim
        by_team: dict[str, list[Candidate]] = {}
        for victim in ctx.running:
            other = book.teams.get(victim.team)
            if other is None or other.name == team.name or other.cohort != team.cohort:
                continue
            cls = _evictable(victim, ctx)
            if cls is None:
                continue
            cand = _candidate(victim, cls, flavor, ctx)
            if cand is not None:
                by_team.setdefault(other.name, []).append(cand)
        out: list[Candidate] = []
        for name, cands in by_team.items():
            over = book.borrowed(name, flavor)
            for cand in sorted(cands, key=lambda c: c.sort_key):
                if over <= 0:
                    break
                out.append(cand)
                over -= cand.milli
        out.sort(key=lambda c: c.sort_key)
        return out

    def search_key(self, job: JobSpec, ctx: PreemptContext) -> object:
        return ctx.priority.get(job.name, 0)

    def reason(
        self, job: JobSpec, victim: Candidate, request: Request, ctx: PreemptContext
    ) -> Eviction:
        flavor = request.accelerator
        g = gpus_text(ctx.book.guaranteed(job.team, flavor))
        cause = (
            f"team {job.team} reclaims its guaranteed {g} {flavor} GPUs, "
            f"which team {victim.job.team} was borrowing"
        )
        return _eviction(job, victim, "quota-reclaim", cause, f"{gpus_text(victim.milli)} GPUs")


class LasPreemption:
    """Tiresias's preemption (`sched.las`): a waiting job evicts running jobs that sit in a
    strictly higher least-attained-service queue, the most-served first (highest queue, then
    the latest arrival: the reverse of the queue order). Priority does not matter, the
    class's `preemptible` and the job's do, and only a job that checkpoints (`JobSpec.
    checkpoints`) is a victim: Tiresias suspends and resumes jobs from their checkpoints,
    and evicting a job that keeps nothing throws its run away for a reordering (on a
    congested stream without checkpoints, a job crossing the threshold was evicted again
    after every restart and never finished). No minimum runtime: a job only moves down a
    queue after it has run a threshold's worth of GPU-seconds, and the starvation limit
    brings a waiting job back, so jobs do not thrash."""

    name = "las"

    def __init__(self, queues: LasQueues = TIRESIAS_QUEUES) -> None:
        self.queues = queues

    def search_key(self, job: JobSpec, ctx: PreemptContext) -> object:
        return self.queues.pending(job, ctx.now_s)

    def candidates(
        self, job: JobSpec, request: Request, need_milli: int, ctx: PreemptContext
    ) -> list[Candidate]:
        mine = self.queues.pending(job, ctx.now_s)
        out: list[Candidate] = []
        for queue, victim, cls in self._ranked(ctx):
            if queue <= mine:
                break  # ranked highest queue first: the rest are no higher
            cand = _candidate(victim, cls, request.accelerator, ctx)
            if cand is not None:  # None: holds none of it, or was evicted in this cycle
                out.append(cand)
        return out

    def highest_running(self, ctx: PreemptContext) -> int:
        """The highest queue of an evictable running job (-1: none is): a waiting job in
        this queue or above it has no candidates."""
        ranked = self._ranked(ctx)
        return ranked[0][0] if ranked else -1

    def running_above(self, ctx: PreemptContext, queue: int) -> Iterator[JobSpec]:
        """The evictable running jobs that sit in a queue above `queue` (a waiting job of
        `queue` may evict only these)."""
        for theirs, victim, _ in self._ranked(ctx):
            if theirs <= queue:
                return
            yield victim

    def _ranked(self, ctx: PreemptContext) -> list[tuple[int, JobSpec, PriorityClass]]:
        """The cycle's evictable running jobs with their queues, highest queue first, then
        the latest arrival, then the name: built once per cycle, not per waiting job.

        A running job's holdings change within a cycle only when it is evicted, and an
        evicted job holds nothing, so `_candidate` (which reads its holdings now) turns it
        away; every other job's queue is what it was when the list was built."""
        found = ctx.per_cycle.get(self.queues)
        if found is None:
            ranked: list[tuple[int, float, str, JobSpec, PriorityClass]] = []
            for victim in ctx.running:
                cls = _evictable(victim, ctx)
                if cls is None or victim.started_s is None or not victim.checkpoints:
                    continue  # LAS evicts only jobs that keep their work (`sched.las`)
                held = sum(ctx.held_milli(victim.name).values())
                queue = self.queues.running(victim, held, ctx.now_s)
                ranked.append((-queue, -victim.submitted_s, victim.name, victim, cls))
            ranked.sort(key=lambda r: r[:3])
            found = ctx.per_cycle[self.queues] = [(-r[0], r[3], r[4]) for r in ranked]
        return found  # type: ignore[return-value]

    def reason(
        self, job: JobSpec, victim: Candidate, request: Request, ctx: PreemptContext
    ) -> Eviction:
        # what it held when chosen (it is released by now): the request's accelerator
        served_h = self.queues.run_service_gpu_s(victim.job, victim.milli, ctx.now_s) / 3600
        theirs = self.queues.by_service(served_h * 3600)
        mine = self.queues.pending(job, ctx.now_s)
        cause = (
            f"least attained service: {served_h:.3g} GPU-h in this run put it in queue {theirs}, "
            f"behind queue {mine}"
        )
        frees = f"{gpus_text(victim.milli)} {request.accelerator} GPUs"
        return _eviction(job, victim, "las", cause, frees)


PREEMPTIONS: Mapping[str, PreemptionPlugin] = {
    p.name: p for p in (QuotaReclaim(), PriorityPreemption(), LasPreemption())
}


def _try(
    b: Branch, plugin: PlacementPlugin, job: JobSpec, request: Request, victims: Sequence[str]
) -> Placed:
    with b.branch() as w:  # rolls back
        for v in victims:
            w.release_all(v)
        return plugin.place(w, job, request)


def choose_victims(
    b: Branch,
    plugin: PlacementPlugin,
    job: JobSpec,
    request: Request,
    cands: Sequence[Candidate],
    *,
    enough: Callable[[Sequence[Candidate]], bool] = lambda victims: True,
) -> list[Candidate] | None:
    """The victims to evict so `job` fits `request`, or None if evicting all would not do.

    Greedy: release candidates in order until the placement succeeds and `enough` holds
    for them (a quota reclaim must take back a given amount, not just make room), then
    spare each chosen victim (most lost work first) that the job does not need. `b` is
    left exactly as it was.
    """
    chosen: list[Candidate] = []
    with b.branch() as w:  # rolls back
        for cand in cands:
            w.release_all(cand.name)
            chosen.append(cand)
            if enough(chosen) and plugin.place(w, job, request).status.ok:
                break
        else:
            return None
    for cand in sorted(chosen, key=lambda c: c.sort_key, reverse=True):
        rest = [c for c in chosen if c is not cand]
        # no victim at all never does: the caller asks only when the job cannot start as is
        if (
            rest
            and enough(rest)
            and _try(b, plugin, job, request, [c.name for c in rest]).status.ok
        ):
            chosen = rest
    return chosen
