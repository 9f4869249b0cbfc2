"""`decide()`: one scheduling cycle, pure from the caller's view (design 0009).

The cycle is numbered (by the caller) and timed (`framework.PHASES`):

1. **snapshot** — open a what-if on the given state (a `State` gets `branch()`, a
   `Snapshot` `what_if()`, a `Branch` a nested branch), allocate running jobs
   from their placement unless the state already holds them, and total each
   team's usage per flavor;
2. **order** — the profile's queue-order plugin yields pending jobs one at a
   time (fair share re-ranks teams after every admission);
3. **nominate** — per job and acceptable flavor, the quota check
   (`sched.quota`): its guarantee less what borrowers hold of it, plus what its
   cohort has idle to lend when it may borrow, capped by its limits. With
   `guaranteed_first` (default), jobs that would borrow are set aside until
   every job that fits within its team's guarantee has been looked at;
4. **place** — the placement plugin picks a complete placement (a gang lands
   whole or not at all), which is allocated on the what-if so later jobs see
   it. When it finds none, the profile's preemption plugins are tried in order
   (`sched.preempt`: quota reclaim, then priority) — and quota reclaim also
   for a job within its guarantee that borrowers hold; victims go out in
   `Decisions.preempted`, and the preemptor is admitted and starts after their
   grace period. Then the head-of-line rule: with `backfill`, the first job
   still blocked by capacity gets a reservation (`sched.backfill`) and later
   jobs may not delay it; with `strict`, it blocks every later job; with
   `best-effort`, nothing. Preemption and reservation time counts under "place";
5. **commit** — MIG re-layout proposals for slice requests left unplaced
   (`sched.relayout`), then the decisions go out as data and the what-if rolls
   back: the given state is never changed.

Every job left pending gets one sentence naming what binds it (quota, room,
topology, spot, a reservation ahead of it, strict order) and how many jobs are
ahead of it in this cycle's order.

Why one file (about 1,000 lines; the reasons' wording is in `sched.reasons`): the five
phases share one `_Cycle` (the what-if, each team's usage, the reasons) that lives only
while a cycle runs. The policies it calls have modules
of their own (`orders`, `quota`, `plugins`, `scoring`, `fgd`, `preempt`, `backfill`,
`relayout`); what stays here is the cycle's control flow, which reads best in one place.
"""

from __future__ import annotations

import math
import sys
import time
from collections import Counter
from collections.abc import Callable, Collection, Iterator, Mapping, Sequence
from functools import cached_property, partial
from itertools import chain, filterfalse
from typing import cast, overload

from gpufleet.cluster import (
    MILLI,
    AllocationError,
    Branch,
    Cluster,
    Holdings,
    MigSlice,
    Share,
    Snapshot,
    State,
    StateView,
    Whole,
    to_milli,
)
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched import backfill, preempt, relayout
from gpufleet.sched.census import Census, RunningLas
from gpufleet.sched.fairshare import DecayedUsage
from gpufleet.sched.framework import (
    PHASES,
    Decisions,
    Eviction,
    InvalidPlacementError,
    OrderContext,
    Placed,
    Placement,
    QueueOrder,
    Relayout,
)
from gpufleet.sched.held_as_asked import check_running_placement
from gpufleet.sched.job_facts import Facts, RequestShapes
from gpufleet.sched.kept import Kept, KeptLevels, KeptOrder, keeps, keeps_levels
from gpufleet.sched.lean import Lean, qualifies, worker_gpus
from gpufleet.sched.passover import PassOver
from gpufleet.sched.plugins import TopologyBestFit
from gpufleet.sched.quota import QuotaBook, request_milli, team_usage_milli, usage_milli
from gpufleet.sched.reasons import NEVER, Reasons, reason_parts, with_ahead
from gpufleet.sched.registry import Resolved, resolve
from gpufleet.sched.requests import Request
from gpufleet.sched.team_index import TeamIndex, team_index
from gpufleet.sched.too_large import StaticRoom
from gpufleet.sched.waits import (
    PREEMPTION_FUTILE,
    NoAccelerator,
    NoEstimates,
    ReservationAhead,
    ReservedFor,
    ShareWait,
    StrictFifo,
    Wait,
    text_of,
)
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.profiles import Profile
from gpufleet.specs.teams import TeamsSpec


def _what_if(view: StateView) -> Branch:
    """The cycle's what-if on `view`; a `Branch` is its own context manager (rolls back)."""
    if type(view) in _BRANCHABLE or isinstance(view, State | Branch):  # exact types first:
        return cast(State | Branch, view).branch()  # isinstance on an ABC costs more
    if isinstance(view, Snapshot):
        return view.what_if()
    raise TypeError(f"decide() needs a State, Snapshot or Branch, got {type(view).__name__}")


_BRANCHABLE = frozenset({State, Branch})


def _no_share(team: str) -> float:
    """`OrderContext.share` for an order that never reads it (`QueueOrder.uses_share`)."""
    return 0.0


def _running_claims(job: JobSpec) -> list[Whole | MigSlice | Share]:
    claims: list[Whole | MigSlice | Share] = []
    for p in job.placement:
        if p.fraction is not None:
            if len(p.gpus) != 1:
                raise InvalidPlacementError(
                    f"running job {job.name}: a fraction on {p.node} needs exactly one GPU "
                    f"index in gpus, got {p.gpus}"
                )
            claims.append(Share(p.node, p.gpus[0], to_milli(p.fraction)))
        elif p.gpus:
            claims.append(Whole(p.node, tuple(p.gpus)))
        claims.extend(MigSlice(s) for s in p.mig_slices)
        if not (p.gpus or p.mig_slices):
            raise InvalidPlacementError(
                f"running job {job.name}: placement on {p.node} names no GPUs or MIG slices"
            )
    return claims


def _placed(job: JobSpec) -> list[Placement]:
    """A running job's placement as `decide` places jobs (a share as thousandths of one
    GPU), for the check that it holds what it asks (`held_as_asked`)."""
    return [
        Placement(p.node, gpu=p.gpus[0], milli=to_milli(p.fraction))
        if p.fraction is not None
        else Placement(p.node, tuple(p.gpus), tuple(p.mig_slices))
        for p in job.placement
    ]


def _priorities(
    jobs: list[JobSpec],
    index: TeamIndex,
    shapes: RequestShapes,
    whole: bool,
    *,
    given: Mapping[str, int] | None,
    lean: bool,
) -> Mapping[str, int]:
    """Each pending job's priority value, from its facts (kept from cycle to cycle). A lean
    cycle reads none (a FIFO order, no preemption), and a caller that keeps its queue
    (`Kept`) keeps them too: their facts cache is only pruned."""
    if lean or given is not None:
        shapes.prune(jobs)
        return {} if given is None else given
    return shapes.priorities(jobs, index, whole)


def _queue(
    order: QueueOrder,
    pending: list[JobSpec],
    ctx: OrderContext,
    lean: Lean | None,
    kept: Kept | KeptLevels | None,
    *,
    passes: PassOver | None = None,
    cyc: _Cycle,
) -> Iterator[JobSpec]:
    """The pending jobs in the profile's order; a lean cycle's are in FIFO order already
    (its caller keeps them so), and only `lean.fresh` when it names them; a kept queue's
    are taken off its teams' heads or its queues (`sched.kept`), without those `passes`
    skips."""
    if isinstance(kept, KeptLevels):
        return _by_levels(kept, cyc, passes)
    skips = None if passes is None else passes.skips
    if kept is not None:
        return iter(cast(KeptOrder, order).order_kept(kept.by_team, ctx, skips, kept.keys))
    if lean is None:
        return iter(order.order(pending, ctx))
    return iter(pending if lean.fresh is None else lean.fresh)


def _by_levels(kept: KeptLevels, cyc: _Cycle, passes: PassOver | None) -> Iterator[JobSpec]:
    """A kept Tiresias queue in `orders.Tiresias`'s order: its least-attained-service queues
    one after the other, each in submission order, less the jobs `passes` skips, each
    asked at its turn. `cyc.las_floor` follows the queue being taken: every job not taken
    yet sits in it or a later one (the LAS eviction guard, `_Cycle.nothing_evicts`, reads
    it).

    A run of jobs whose workers exceed every node's room is jumped over in one step
    (`KeptLevels.next_fitting`): `passes` skips each of them, and its answer cannot change
    before the next job is yielded."""
    jump = passes is not None and bool(kept.by_size)
    for level, jobs in enumerate(kept.levels):
        if not jobs:
            continue
        cyc.las_floor = level
        if passes is None:
            yield from jobs
            continue
        i, end = 0, len(jobs)
        while i < end:
            job = jobs[i]
            if jump and passes.on and (job.gpus or 0) > passes.room:
                i = kept.next_fitting(level, i, passes.room)
                continue
            i += 1
            if not passes.skips(job):
                yield job


def _load(
    b: Branch,
    running: Collection[JobSpec],
    pending: list[JobSpec],
    teams: TeamsSpec,
    *,
    usage: Mapping[tuple[str, str], int] | None,
    index: TeamIndex,
    cluster: Cluster,
    profile: str,
    whole_only: bool,
) -> QuotaBook:
    """Phase 1: running jobs in place (unless already held: each first checked to hold
    what it asks, as `profile` places it), usage per team and flavor."""
    if usage is not None:  # the caller keeps it, and vouches for the state (see decide())
        return QuotaBook(teams, dict(usage), index)
    for job in running:
        if b.holds(job.name):
            continue  # the state already holds it
        claims = _running_claims(job)  # first: it words a malformed placement itself
        check_running_placement(
            job,
            _placed(job),
            cluster,
            profile=profile,
            whole_only=whole_only,
            what="running job",
        )
        try:
            b.allocate(job.name, *claims)
        except (AllocationError, UnknownNameError, ValueError) as e:
            raise InvalidPlacementError(f"running job {job.name}: {e}") from e
    for job in pending:
        if b.holds(job.name):
            raise UserError(f"decide(): pending job {job.name} already holds GPUs")
    used = team_usage_milli(b, {j.name: j.team for j in running})
    return QuotaBook(teams, used, index)


class _Cycle:
    """Phases 3 and 4 for one job at a time, accumulating decisions and timings."""

    # what most cycles never change, as class defaults (an instance sets its own when it does)
    waiting = 0  # jobs left pending so far: "N jobs ahead of you"
    # backfill: the reservation (running jobs' expected ends are read only to seek one)
    reservation: backfill.Reservation | None = None
    reservation_tried = False
    blocker: str | None = None  # strict FIFO: the job blocking everyone
    _reserved_now = False
    # a quiet cycle's reservation not sought yet: (job, its blocked requests, its reason)
    _unreserved: tuple[JobSpec, list[tuple[Request, int, int]], list[str | Wait]] | None = None
    _evicts_seen: tuple[int, bool] | None = None  # `_others_quiet` at a quota book's `adds`
    # a kept Tiresias queue's lowest least-attained-service queue of the jobs not looked at
    # yet (`_by_levels`); None: not known, LAS may evict
    las_floor: int | None = None
    census: Census | None = None  # what the caller keeps between cycles (`decide(census=)`)

    def __init__(
        self,
        b: Branch,
        book: QuotaBook,
        plugins: Resolved,
        timings: dict[str, float],
        context: tuple[Collection[JobSpec], Mapping[str, int], TeamsSpec, float],
        *,
        lean: bool = False,
        quiet: bool = False,
    ) -> None:
        self.b, self.book, self.plugins, self.timings = b, book, plugins, timings
        self._quiet = quiet  # nobody reads the reasons: the reservation is sought lazily
        # what a memoised failure holds for: the state version (a reason names what is
        # free, which every allocation changes), or in a lean cycle, which words no
        # reasons, the free epoch (a failure holds while GPUs are only taken)
        self._by_epoch = lean
        self.placement = plugins.placement
        self.running, self.priority, self.teams, self.now_s = context
        # end of the last timed stretch: each clock reading closes one phase's stretch and
        # opens the next (order, nominate, place), so a job costs three readings
        self.mark = 0.0
        self.admitted: dict[str, tuple[Placement, ...]] = {}
        self.preempted: dict[str, Eviction] = {}
        self.flavors: dict[str, str] = {}
        self.reasons = Reasons()
        self.considered: list[str] = []  # pending jobs in the order they were looked at
        self.ends: list[tuple[float, str]] = []  # expected ends of jobs admitted in this cycle
        self.team_blocker: dict[str, str] = {}  # strict FIFO: per team the job blocking it
        self.unplaced_slices: list[tuple[str, Request]] = []
        self._requests: dict[str, Sequence[Request]] = {}
        self._shapes = b.cluster.derived(RequestShapes)
        self._static_room = b.cluster.derived(StaticRoom)  # gangs no node set could hold
        self._whole_only = plugins.profile.whole_gpus_only
        self._index = team_index(self.teams)
        self._last: Facts | None = None  # the facts last read (a job is read 2-3 times in a row)
        # would_borrow per (team, requests): valid while the team's usage is unchanged
        self._borrows_memo: dict[tuple[str, int], tuple[int, bool]] = {}
        self._strict_whys: dict[str, list[str | Wait]] = {}
        # `_place`'s failures by (request, level, spot), for the plugin whose answer reads
        # only those of the job (an exact type: a subclass may read more)
        self._placement_by_request = type(self.placement) is TopologyBestFit
        self._placement_failed: dict[tuple[object, ...], tuple[int, Placed]] = {}
        self._no_victims: dict[tuple[object, ...], tuple[int, bool]] = {}
        self._borrowers: dict[tuple[str, str], tuple[int, bool]] = {}  # see _cohort_borrows
        # failed evaluations by job shape, valid while the state version is unchanged
        self._memo: dict[tuple[object, ...], tuple[int, list[str | Wait], tuple[Request, ...]]] = {}
        self._why: list[str | Wait] = []
        # ids of noted reasons that say the job cannot run: such a job is in no one's way,
        # so it is not counted in the "N jobs ahead of you" of those behind it
        self._never_whys: set[int] = set()

    @cached_property
    def _lowest_preemptible_class(self) -> float:
        """The lowest value of a preemptible priority class (infinite: none is)."""
        values = [c.value for c in self.teams.priority_classes if c.preemptible]
        return min(values, default=math.inf)

    @cached_property
    def keyed_preemptions(self) -> tuple[preempt.PreemptionPlugin, ...]:
        """Plugins whose victims depend on more than the job's priority (already keyed)."""
        by_priority = {preempt.PriorityPreemption.name, preempt.QuotaReclaim.name}
        return tuple(p for p in self.plugins.preemptions if p.name not in by_priority)

    @cached_property
    def pctx(self) -> preempt.PreemptContext:
        """What preemption plugins read; built when first needed (most cycles evict none)."""
        b = self.b
        return preempt.PreemptContext(
            running=self.running,
            priority=self.priority,
            teams=self.teams,
            held_milli=lambda name: usage_milli(b.usage(name)),
            book=self.book,
            now_s=self.now_s,
        )

    def _stamp(self) -> int:
        """What a memo entry filed now is valid for (see `_by_epoch`)."""
        return self.b.free_epoch if self._by_epoch else self.b.version

    def facts(self, job: JobSpec) -> Facts:
        """The job's facts (`sched.job_facts`), kept from cycle to cycle."""
        last = self._last
        if last is None or last.job is not job:
            last = self._last = self._shapes.facts(job, self._index, self._whole_only)
        return last

    def requests(self, job: JobSpec) -> Sequence[Request]:
        if job.workload is None:  # keyed by shape, per cluster, and kept in the job's facts
            return self._shapes.job_requests(self.facts(job))
        found = self._requests.get(job.name)  # sized from its model: once per cycle
        if found is None:
            found = self._requests[job.name] = self._shapes.requests(job, self._whole_only)
        return found

    def _borrows(self, job: JobSpec, req: Request) -> bool:
        book = self.book
        used = book.used.get((job.team, req.accelerator), 0)
        return used + request_milli(req) > book.guaranteed(job.team, req.accelerator)

    def would_borrow(self, job: JobSpec) -> bool:
        """True when every way to run `job` takes its team beyond its guarantee.

        The answer depends only on the team's usage and the requests, so it is kept per
        (team, requests) until the team's usage changes (`QuotaBook.changes`): a long
        queue asks it for every job of every cycle."""
        requests = self.requests(job)
        team = job.team
        key = (team, id(requests))  # requests of a shape are one tuple, kept by the cluster
        changes = self.book.changes.get(team, 0)
        seen = self._borrows_memo.get(key)
        if seen is not None and seen[0] == changes and job.workload is None:
            return seen[1]
        if len(requests) == 1:
            answer = self._borrows(job, requests[0])
        else:
            answer = all(self._borrows(job, r) for r in requests)
        if job.workload is None:
            self._borrows_memo[key] = (changes, answer)
        return answer

    def _memo_key(self, job: JobSpec, facts: Facts | None = None) -> tuple[object, ...] | None:
        """What decides a job's fate in this cycle besides the state; None: do not memoise.

        Two pending jobs with the same key meet the same quota, placement, preemption and
        backfill answers at the same state version, so a long queue of look-alike jobs
        (a simulator's, a busy cluster's) costs one evaluation per shape, not per job.
        """
        if facts is None:
            facts = self.facts(job)
        if not facts.made:
            facts.make()
        shape = facts.shape
        if shape is None:
            return None  # sized from its model and load: not worth keying
        keyed = self.keyed_preemptions
        res = self.reservation
        if not keyed:  # the commonest keys, built once per job (equal to the tuple below)
            if res is None:
                return facts.key_no_end
            runtime = facts.runtime_s
            ends = runtime is not None and self.now_s + runtime <= res.start_s
            return facts.key_ends if ends else facts.key_no_end
        return (
            shape,  # team, request, placement constraints, priority value
            # what else decides its victims (Tiresias: its attained-service queue)
            *(p.search_key(job, self.pctx) for p in keyed),
            # a reservation lets only jobs that end before it use its GPUs
            res is not None and backfill.ends_before(job, res, self.now_s),
        )

    def answered(
        self, queue: Iterator[JobSpec], deferred: list[JobSpec], guaranteed_first: bool
    ) -> JobSpec | None:
        """Take from `queue` every job whose turn this cycle is already decided, and return
        the first that is not (None: the queue is done).

        In a congested queue most jobs are decided before their turn: one of their shape
        failed at this state version (`run`'s memo), a strict-FIFO blocker is ahead of
        them, or (with `guaranteed_first`) their team's usage, unchanged since it was read,
        defers them. Each such job gets exactly what `run` or the caller's deferral would
        give it (in order: considered, reason, jobs ahead), in one tight loop instead of
        three method calls and a key built per job: this loop is what a long queue costs
        per cycle. Anything else (a job never seen, a slice request, a shape sized from a
        workload, a key not filed) goes back to the full path. With nothing filed and no
        blocker, only a known deferral can decide a job: the first job is checked for that
        before anything else is read (an uncongested cycle's common case).
        """
        memo = self._memo
        if not memo and self.blocker is None and not self.team_blocker:
            first = next(queue, None)
            if first is None or not guaranteed_first:
                return first
            f = self._shapes.facts_of.get(id(first))
            if f is None or f.requests is None:
                return first  # its deferral is not known yet
            queue = chain((first,), queue)
        return self._take_decided(queue, deferred, guaranteed_first)

    def _take_decided(
        self, queue: Iterator[JobSpec], deferred: list[JobSpec], guaranteed_first: bool
    ) -> JobSpec | None:
        """`answered`'s loop (its locals read once per call, not once per job)."""
        memo, version, facts_of = self._memo, self._stamp(), self._shapes.facts_of
        index, whole, keyed = self._index, self._whole_only, bool(self.keyed_preemptions)
        res, now = self.reservation, self.now_s
        res_start = math.inf if res is None else res.start_s
        borrows, changes = self._borrows_memo, self.book.changes
        considered, parts, waiting = self.considered, self.reasons.parts, self.waiting
        blocker, team_blocker, nevers = self.blocker, self.team_blocker, self._never_whys
        strict = blocker is not None or bool(team_blocker)
        try:
            for job in queue:
                f = facts_of.get(id(job))
                if f is None or f.job is not job or f.index is not index or f.whole is not whole:
                    return job
                if not f.made:
                    f.make()
                if f.shape is None:
                    return job
                team = job.team
                if guaranteed_first:
                    requests = f.requests
                    if requests is None:
                        return job
                    seen = borrows.get((team, id(requests)))
                    if seen is None or seen[0] != changes.get(team, 0):
                        return job
                    if seen[1]:
                        deferred.append(job)
                        continue
                if strict:
                    ahead = blocker or team_blocker.get(team)
                    if ahead is not None:
                        considered.append(job.name)
                        parts[job.name] = (self._strict_why(ahead), waiting)
                        waiting += 1
                        continue
                if not memo:
                    return job
                if keyed:
                    key = self._memo_key(job, f)
                elif res is None:
                    key = f.key_no_end
                else:
                    runtime = f.runtime_s
                    ends = runtime is not None and now + runtime <= res_start
                    key = f.key_ends if ends else f.key_no_end
                hit = memo.get(key) if key is not None else None
                if hit is None or hit[0] != version or hit[2]:
                    return job
                name = job.name
                considered.append(name)
                parts[name] = (hit[1], waiting)
                if not nevers or id(hit[1]) not in nevers:
                    waiting += 1
            return None
        finally:
            self.waiting = waiting

    def _strict_why(self, blocker: str) -> list[str | Wait]:
        """The strict-FIFO reason, one list per blocker (reasons never change a noted list)."""
        why = self._strict_whys.get(blocker)
        if why is None:
            why = self._strict_whys[blocker] = [StrictFifo(blocker)]
        return why

    def run(self, job: JobSpec) -> None:
        self.considered.append(job.name)
        if (self.blocker is not None or self.team_blocker) and self._strictly_blocked(job):
            return
        # with nothing memoised yet there is nothing to look up: the key is only built
        # when a failure is filed (it is the same then: only a reservation found by this
        # evaluation would change it, and such a failure is not filed)
        looked = bool(self._memo)
        key = self._memo_key(job) if looked else None
        if key is not None:
            hit = self._memo.get(key)
            if hit is not None and hit[0] == self._stamp():
                if hit[2]:
                    self.unplaced_slices.extend((job.name, r) for r in hit[2])
                self.reasons.note(job.name, hit[1], self.waiting)
                if id(hit[1]) not in self._never_whys:
                    self.waiting += 1
                return
        version = self.b.version
        self._reserved_now = False
        self._evaluate(job)
        failed_quietly = job.name in self.reasons and not self._reserved_now
        if failed_quietly and self.b.version == version:
            if not looked:
                key = self._memo_key(job)
            if key is not None:
                # a failure that changed nothing: the same shape fails the same way until it does
                slices = tuple(r for n, r in self.unplaced_slices if n == job.name)
                self._memo[key] = (self._stamp(), self._why, slices)

    def _evaluate(self, job: JobSpec) -> None:
        clock = time.perf_counter
        timings = self.timings
        # flavors within the team's guarantee first, then those that would borrow (Kueue's
        # flavor fungibility: never borrow one flavor while another is owed)
        requests = self.requests(job)
        if len(requests) > 1:
            requests = sorted(requests, key=lambda r: self._borrows(job, r))
        why: list[str | Wait] = []
        if not requests:
            why.append(NoAccelerator(tuple(job.accelerators)))
        requests = self._placeable(job, requests, why)
        # (request, milli-GPUs, milli-GPUs of the team's guarantee that borrowers hold and it
        # must take back first) for requests the quota allows, or would but for what is
        # lent, and for which evicting may help
        blocked: list[tuple[Request, int, int]] = []  # no room
        reclaim: list[tuple[Request, int, int]] = []  # room, but the guarantee is lent
        over: list[tuple[Request, int]] = []  # beyond the team's quota: its own jobs may yield
        for req in requests:
            need = request_milli(req)
            status = self.book.check(job, req.accelerator, need)
            t = clock()
            timings["nominate"] += t - self.mark
            self.mark = t
            owed = 0
            if not status.ok:
                why.append(status.detail or status.reason)
                owed = self.book.reclaim_milli(job.team, req.accelerator, need)
                if not owed:
                    over.append((req, need))
                    continue
            placed = self._place(job, req)
            if placed.status.ok and not owed:
                self._admit(job, req, need, placed.placements)
                t = clock()
                timings["place"] += t - self.mark
                self.mark = t
                return
            if placed.status.ok:
                reclaim.append((req, need, owed))
            else:
                why += self._placement_why(placed, job, req)
                blocked.append((req, need, owed))
            t = clock()
            timings["place"] += t - self.mark
            self.mark = t
        try:
            if (blocked or reclaim) and self._preempt_for(job, blocked + reclaim, why):
                return
            if over and self._preempt_own(job, over, why):
                return
            self._blocked(job, blocked, why)
        finally:
            t = clock()
            timings["place"] += t - self.mark
            self.mark = t
        self._note(job, why)

    def _note(self, job: JobSpec, why: list[str | Wait]) -> None:
        """`job` waits for `why`: one more job ahead of those behind it, unless it cannot run."""
        self._why = why
        self.reasons.note(job.name, why, self.waiting)
        if self._quiet or not _cannot_run(why):  # (a quiet cycle words no reasons)
            self.waiting += 1
        else:
            self._never_whys.add(id(why))

    def _placeable(
        self, job: JobSpec, requests: Sequence[Request], why: list[str | Wait]
    ) -> Sequence[Request]:
        """`requests` less those that could never be placed, each said in `why`: a share on an
        accelerator none of whose GPUs takes fractions, a whole-GPU gang larger than the
        cluster's nodes could hold even empty (`sched.too_large`). No quota, eviction or
        reservation is worth weighing for them (the quota check spoke first, and a share no
        GPU takes read as a quota wait; a gang too large took the cycle's one reservation)."""
        never: list[Request] = []
        for r in requests:
            if r.kind == "gpus":
                large = self._static_room.too_large(job, r)
                if large is not None:
                    never.append(r)
                    why.append(large)
            elif r.kind == "fraction" and not self.b.takes_fractions(r.accelerator):
                never.append(r)
                why.append(ShareWait(r.accelerator, request_milli(r), unshared=True))
        if not never:
            return requests
        return [r for r in requests if r not in never]

    # -- head-of-line rules -------------------------------------------------------------

    def _strictly_blocked(self, job: JobSpec) -> bool:
        blocker = self.blocker or self.team_blocker.get(job.team)
        if blocker is None:
            return False
        self.reasons.note(job.name, self._strict_why(blocker), self.waiting)
        self.waiting += 1
        return True

    def _blocked(
        self, job: JobSpec, blocked: list[tuple[Request, int, int]], why: list[str | Wait]
    ) -> None:
        rule = self.plugins.profile.head_of_line
        if rule == "strict":
            if blocked:
                self.blocker = job.name
            elif self.requests(job):
                self.team_blocker.setdefault(job.team, job.name)
        elif rule == "backfill" and blocked and not self.reservation_tried:
            if not self._quiet:
                self._reserve(job, blocked, why)
            elif any(req.kind == "gpus" for req, _, _ in blocked):
                self.reservation_tried = True  # sought only if a later job could start
                self._unreserved = (job, blocked, why)
        for req, _, _ in blocked:
            if req.kind == "mig":
                self.unplaced_slices.append((job.name, req))

    def _reserve(
        self, job: JobSpec, blocked: list[tuple[Request, int, int]], why: list[str | Wait]
    ) -> None:
        """EASY: the first job blocked by capacity gets the earliest reservation it can."""
        whole = [req for req, _, _ in blocked if req.kind == "gpus"]
        if not whole:
            return
        self.reservation_tried = True
        self._reserved_now = True
        ends = self.running_ends()
        if self.preempted or self.census is None:  # (a census's caller vouches they are held)
            ends = [(end, name) for end, name in ends if self.b.holds(name)]
        best: backfill.Reservation | None = None
        for req in whole:
            res = backfill.find(self.b, self.placement, job, req, ends=ends, now_s=self.now_s)
            if res is not None and (best is None or res.start_s < best.start_s):
                best = res
        if best is None:
            why.append(NoEstimates())
            return
        self.reservation = best
        backfill.mask(self.b, best)
        why.append(
            ReservedFor(
                best.gpus,
                best.accelerator,
                tuple(best.nodes()),
                best.start_s - self.now_s,
                len(best.waits_for),
            )
        )

    def _reserve_late(self) -> None:
        """A quiet cycle seeks the reservation only when a later job could start (its
        placement succeeds on the unmasked state) or a victim search begins: the mask only
        takes GPUs away, so a job that does not fit without it does not fit with it, and
        until then the state is what it was when the head-of-line job was blocked. A
        congested cycle that starts nothing never seeks it (a fifth of its cost)."""
        found = self._unreserved
        if found is not None:
            self._unreserved = None
            self._reserve(*found)

    def running_ends(self) -> list[tuple[float, str]]:
        """Expected ends of the jobs running at the start of the cycle (ascending when the
        caller keeps a census), then of those admitted."""
        if self.census is not None and self.census.running_ends is not None:
            return [*self.census.running_ends, *self.ends]
        out = []
        for job in self.running:
            end = backfill.expected_end_s(job)
            if end is not None:
                out.append((end, job.name))
        return out + self.ends

    def _placement_why(self, placed: Placed, job: JobSpec, req: Request) -> list[str | Wait]:
        """A failed placement's part of the reason, and the reservation it meets if any."""
        why: list[str | Wait] = [placed.status.detail or placed.status.reason]
        note = self._reservation_note(job, req)
        if note is not None:
            why.append(note)
        return why

    def _reservation_note(self, job: JobSpec, req: Request) -> ReservationAhead | None:
        res = self.reservation
        if res is None or res.accelerator != req.accelerator or req.kind != "gpus":
            return None
        return ReservationAhead(res.job, res.gpus, res.accelerator, res.start_s - self.now_s)

    # -- placing and admitting -------------------------------------------------------

    def _place(self, job: JobSpec, req: Request) -> Placed:
        """`_placed`, after seeking a quiet cycle's reservation if `job` could start."""
        placed = self._placed(job, req)
        if self._unreserved is not None and placed.status.ok:
            self._reserve_late()
            placed = self._placed(job, req)
        return placed

    def _placed(self, job: JobSpec, req: Request) -> Placed:
        """Place avoiding reserved GPUs; a job that ends before the reservation may use them.

        With `topology-best-fit`, whose answer reads of the job only its request, its
        required topology level and whether it may use spot, a failure is kept per
        (request, level, spot) until the state changes: a congested queue's shapes differ
        by team and priority far more often than by what placement reads."""
        if self._placement_by_request and self._placement_failed:
            key = (req, job.topology.required, job.spot_ok)
            failed = self._placement_failed.get(key)
            version = self._stamp()
            if failed is not None and failed[0] == version:
                placed = failed[1]
            else:
                placed = self.placement.place(self.b, job, req)
                if not placed.status.ok:
                    self._placement_failed[key] = (version, placed)
        else:
            placed = self.placement.place(self.b, job, req)
            if self._placement_by_request and not placed.status.ok:  # the first failure
                key = (req, job.topology.required, job.spot_ok)
                self._placement_failed[key] = (self._stamp(), placed)
        res = self.reservation
        if placed.status.ok or res is None or not backfill.ends_before(job, res, self.now_s):
            return placed
        with self.b.branch() as w:  # rolls back
            w.release_all(backfill.HOLDER)
            unmasked = self.placement.place(w, job, req)
        if unmasked.status.ok:
            backfill.unmask(self.b, unmasked.placements)
            return unmasked
        return placed

    def _admit(
        self, job: JobSpec, req: Request, need: int, placements: tuple[Placement, ...]
    ) -> None:
        name = job.name
        if len(placements) == 1:
            self.b.allocate(name, *placements[0].claims())
        else:  # all workers or nothing: allocate is atomic
            self.b.allocate(name, *[c for p in placements for c in p.claims()])
        flavor = req.accelerator
        self.book.add(job.team, flavor, need)
        self.admitted[name] = placements
        self.flavors[name] = flavor
        runtime = backfill.expected_runtime_s(job)
        if runtime is not None:
            self.ends.append((self.now_s + runtime, name))

    def _preempt_for(
        self, job: JobSpec, targets: list[tuple[Request, int, int]], why: list[str | Wait]
    ) -> bool:
        """Evict running jobs so `job` starts with one of its requests, plugin by plugin.

        A target is (request, milli-GPUs, owed): owed is what of the team's guarantee
        borrowers hold and must give back first; only quota reclaim may help with that,
        and its victims must return at least as much.
        """
        tried = False
        targets = [  # evicting cannot make a slice of a profile no GPU is cut into
            (r, n, o)
            for r, n, o in targets
            if r.kind != "mig" or self.b.has_slices(r.accelerator, r.mig_profile or "")
        ]
        for plugin in self.plugins.preemptions:
            reclaims = plugin.name == preempt.QuotaReclaim.name
            if plugin.name == preempt.PriorityPreemption.name and not self._any_below(job):
                continue  # no running job of a lower class may be evicted: no candidates
            for req, need, owed in targets:
                if owed and not reclaims:
                    continue
                if reclaims and not self._cohort_borrows(job.team, req.accelerator):
                    continue  # nobody borrows what quota reclaim could take back
                mine = plugin.search_key(job, self.pctx)
                where = (job.topology.required, job.spot_ok)
                # LAS victims and their test read nothing of the team (it never reclaims a
                # guarantee: owed is 0), so teams share its failed searches
                team = None if plugin.name == preempt.LasPreemption.name else job.team
                admitted, searched = self._search_victims(
                    (plugin.name, mine, team, req, need, owed, where),
                    job,
                    req,
                    need,
                    plugin,
                    partial(plugin.candidates, job, req, need, self.pctx),
                    partial(self._gives_back, req.accelerator, owed),
                )
                if admitted:
                    return True
                tried |= searched
        if tried:
            why.append(PREEMPTION_FUTILE)
        return False

    def _preempt_own(
        self, job: JobSpec, targets: list[tuple[Request, int]], why: list[str | Wait]
    ) -> bool:
        """A job beyond its team's quota evicts the team's own jobs until it fits the quota
        and the cluster, by the profile's plugins that may act within a team: priority
        (Kueue's `withinClusterQueue: LowerPriority`; a strictly lower, preemptible class and
        the minimum runtime) and least attained service (Tiresias: a job of a lower queue
        evicts one of a higher queue, whoever's team)."""
        tried = False
        for plugin in self.plugins.preemptions:
            if plugin.name == preempt.QuotaReclaim.name:
                continue  # takes back what other teams borrow: not the team's own jobs
            if plugin.name == preempt.PriorityPreemption.name and not self._lower_own(job):
                continue
            mine = plugin.search_key(job, self.pctx)
            for req, need in targets:
                where = (job.topology.required, job.spot_ok)
                admitted, searched = self._search_victims(
                    ("own", plugin.name, mine, job.team, req, need, where),
                    job,
                    req,
                    need,
                    plugin,
                    partial(self._own_candidates, plugin, job, req, need),
                    partial(self._fits_quota_without, job, req.accelerator, need),
                )
                if admitted:
                    return True
                tried |= searched
        if tried:
            why.append(PREEMPTION_FUTILE)
        return False

    def nothing_evicts(self) -> bool:
        """Whether no waiting job can evict any running job now (conservative: True only
        where every victim search would find no candidates): no running job evictable by
        priority below the highest waiting class, nobody borrowing what quota reclaim could
        take back (`_others_quiet`), and no LAS victim (`_las_quiet`); no other plugin
        whose victims depend on more."""
        return self._las_quiet() and self._others_quiet()

    def las_alone_evicts(self) -> bool:
        """Whether LAS is the only plugin that may evict for the jobs not looked at yet, and
        the cycle knows their lowest queue (`las_floor`): their victims are then the
        evictable running jobs above it (`las_victim_gpus`)."""
        return (
            self.las_floor is not None
            and all(isinstance(p, preempt.LasPreemption) for p in self.keyed_preemptions)
            and self._others_quiet()
        )

    def las_victims(self) -> Iterator[Holdings]:
        """What the evictable running jobs that sit in a queue above `las_floor` hold (the
        only jobs LAS could evict for a job not looked at yet; none without a floor). A
        job evicted in this cycle holds nothing any more."""
        floor = self.las_floor
        if floor is None:
            return
        for plugin in self.keyed_preemptions:
            for victim in self._las_above(cast(preempt.LasPreemption, plugin), floor):
                yield self.b.holdings(victim)

    def _las_census(self, plugin: preempt.LasPreemption) -> RunningLas | None:
        """The caller's census of running jobs' LAS queues, when it keeps one for the
        plugin's thresholds."""
        census = self.census
        las = None if census is None else census.running_las
        return las if las is not None and las.queues == plugin.queues else None

    def _las_highest(self, plugin: preempt.LasPreemption) -> int:
        """The highest LAS queue of an evictable running job (-1: none), off the census
        when the caller keeps one."""
        las = self._las_census(plugin)
        if las is None:
            return plugin.highest_running(self.pctx)
        return las.highest(self.now_s)

    def _las_above(self, plugin: preempt.LasPreemption, queue: int) -> Iterator[str]:
        """The evictable running jobs in a LAS queue above `queue`, by name."""
        las = self._las_census(plugin)
        if las is None:
            return (job.name for job in plugin.running_above(self.pctx, queue))
        return las.above(queue, self.now_s)

    def _others_quiet(self) -> bool:
        """`nothing_evicts` for the plugins keyed by priority and quota. Admissions in the
        cycle can only make a team borrow, so the answer is kept until the quota book
        changes (the cycle's running jobs and highest waiting class are fixed for the
        cycle)."""
        seen = self._evicts_seen
        adds = self.book.adds
        if seen is not None and seen[0] == adds:
            return seen[1]
        answer = not any(
            (plugin.name == preempt.PriorityPreemption.name and self._below(self.highest_waiting))
            or (plugin.name == preempt.QuotaReclaim.name and self._anyone_borrows())
            for plugin in self.plugins.preemptions
        )
        self._evicts_seen = (adds, answer)
        return answer

    def _las_quiet(self) -> bool:
        """Whether no plugin keyed by more than priority and quota can evict for the jobs
        not looked at yet: none is, or each is LAS, the cycle knows the lowest queue those
        jobs sit in (`las_floor`) and no evictable running job sits above it (a waiting
        job evicts only jobs of a strictly higher queue). Evictions in the cycle only
        remove running jobs: the test stays conservative."""
        keyed = self.keyed_preemptions
        if not keyed:
            return True
        floor = self.las_floor
        return floor is not None and all(
            isinstance(p, preempt.LasPreemption) and self._las_highest(p) <= floor for p in keyed
        )

    @cached_property
    def highest_waiting(self) -> int:
        """The highest class value among the cycle's pending jobs (jobs that start in the
        cycle are still counted: the guard stays conservative); a kept queue sets it."""
        return max(self.priority.values(), default=0)

    def _anyone_borrows(self) -> bool:
        """Whether any team holds more of a flavor than it is guaranteed (`nothing_evicts`
        keeps the answer until the quota book next changes)."""
        book = self.book
        return any(
            milli > book.guaranteed(team, flavor) for (team, flavor), milli in book.used.items()
        )

    def _any_below(self, job: JobSpec) -> bool:
        """Whether any running job is evictable by priority below `job`'s: where none is,
        `PriorityPreemption.candidates` is empty and its search is skipped (a congested
        queue of one class fails its placement for most jobs of every cycle)."""
        return self._below(self.priority.get(job.name, 0))

    def _below(self, value: int) -> bool:
        """Whether a running job of a class below `value` may be evicted by priority."""
        if self._lowest_preemptible_class >= value:
            return False
        return self._lowest_evictable < value

    @cached_property
    def _lowest_evictable(self) -> float:
        """The lowest class value of the cycle's evictable running jobs (infinite: none),
        off the caller's census when it keeps one. Jobs evicted in this cycle are still
        counted: the test stays conservative."""
        census = self.census
        if census is not None and census.running_evictable is not None:
            return min(census.running_evictable, default=math.inf)
        return min(self.pctx.lowest_evictable.values(), default=math.inf)

    def _cohort_borrows(self, team: str, flavor: str) -> bool:
        """Whether another team of `team`'s cohort borrows `flavor` now: quota reclaim's
        candidates are those borrowers' jobs, so where none borrows there are none. Kept
        until the quota book next changes."""
        book = self.book
        key = (team, flavor)
        seen = self._borrowers.get(key)
        if seen is not None and seen[0] == book.adds:
            return seen[1]
        mine = book.teams.get(team)
        answer = (
            mine is not None
            and mine.cohort is not None
            and any(
                other.cohort == mine.cohort
                and other.name != team
                and book.borrowed(other.name, flavor) > 0
                for other in book.teams.values()
            )
        )
        self._borrowers[key] = (book.adds, answer)
        return answer

    def _lower_own(self, job: JobSpec) -> bool:
        """Whether the team runs a preemptible job of a class below `job`'s (cheap checks
        before any scan)."""
        mine = self.priority.get(job.name, 0)
        if not self._below(mine):
            return False  # no running job below it may be evicted: nothing to scan
        return self.pctx.lowest_evictable.get(job.team, mine) < mine

    def _own_candidates(
        self, plugin: preempt.PreemptionPlugin, job: JobSpec, req: Request, need: int
    ) -> list[preempt.Candidate]:
        return [c for c in plugin.candidates(job, req, need, self.pctx) if c.job.team == job.team]

    def _search_victims(  # noqa: PLR0917 - one search's parts, as its callers hold them
        self,
        key: tuple[object, ...],
        job: JobSpec,
        req: Request,
        need: int,
        plugin: preempt.PreemptionPlugin,
        candidates: Callable[[], Sequence[preempt.Candidate]],
        enough: Callable[[], Callable[[Sequence[preempt.Candidate]], bool]],
    ) -> tuple[bool, bool]:
        """One victim search for `job`'s request: (admitted, searched), searched meaning some
        candidates existed. A search that failed fails again until the state changes (any
        allocation, release or eviction bumps its version), so it is remembered by `key`: a
        full cluster with a long queue must not repeat the same hopeless search for every
        job of the same shape."""
        self._reserve_late()  # victims are chosen on the masked state
        failed = self._no_victims.get(key)
        if failed is not None and failed[0] == self.b.version:
            return False, failed[1]
        found = candidates()
        if not found:
            self._no_victims[key] = (self.b.version, False)
            return False, False
        chosen = preempt.choose_victims(self.b, self.placement, job, req, found, enough=enough())
        if chosen is None:
            self._no_victims[key] = (self.b.version, True)
            return False, True
        return self._evict_and_admit(job, req, need, chosen, plugin), True

    def _fits_quota_without(
        self, job: JobSpec, flavor: str, need: int
    ) -> Callable[[Sequence[preempt.Candidate]], bool]:
        """Whether the team's quota admits `job` once the given victims (its own) are gone."""
        book = self.book

        def enough(victims: Sequence[preempt.Candidate]) -> bool:
            freed = sum(v.milli for v in victims if v.job.team == job.team)
            book.add(job.team, flavor, -freed)
            try:
                return book.check(job, flavor, need).ok
            finally:
                book.add(job.team, flavor, freed)

        return enough

    def _evict_and_admit(
        self,
        job: JobSpec,
        req: Request,
        need: int,
        chosen: Sequence[preempt.Candidate],
        plugin: preempt.PreemptionPlugin,
    ) -> bool:
        """Evict `chosen`, place `job` and admit it; False (nothing changed) if it then does
        not fit after all."""
        freed = {v.name: usage_milli(self.b.usage(v.name)) for v in chosen}
        with self.b.branch() as w:  # evict, then place; kept only if the placement holds
            for v in chosen:
                w.release_all(v.name)
            placed = self.placement.place(w, job, req)
            if not placed.status.ok:  # not expected: choose_victims checked it
                return False
            w.commit()
        for v in chosen:
            for acc, m in freed[v.name].items():
                self.book.add(v.job.team, acc, -m)
            self.preempted[v.name] = plugin.reason(job, v, req, self.pctx)
        self._admit(job, req, need, placed.placements)
        return True

    def _gives_back(self, flavor: str, owed: int) -> Callable[[Sequence[preempt.Candidate]], bool]:
        """Whether evicting some victims returns `owed` milli-GPUs of `flavor` to the
        cohort: each victim's team gives back at most what it borrows."""
        book = self.book

        def enough(victims: Sequence[preempt.Candidate]) -> bool:
            if owed <= 0:
                return True
            freed: dict[str, int] = {}
            for v in victims:
                freed[v.job.team] = freed.get(v.job.team, 0) + v.milli
            back = sum(min(m, book.borrowed(t, flavor)) for t, m in freed.items())
            return back >= owed

        return enough


def _cannot_run(why: Sequence[str | Wait]) -> bool:
    """Whether a reason says only that the job cannot run (on any accelerator it accepts)."""
    return bool(why) and all(text_of(p).startswith(NEVER) for p in why)


def decide(
    cluster: Cluster,
    state: StateView,
    running: Collection[JobSpec],
    pending: list[JobSpec],
    teams: TeamsSpec,
    *,
    profile: str = "default",
    now_s: float = 0.0,
    history: DecayedUsage | None = None,
    cycle: int = 0,
    usage: Mapping[tuple[str, str], int] | None = None,
    keep: bool = False,
    lean: Lean | None = None,
    quiet: bool = False,
    census: Census | None = None,
    kept: Kept | KeptLevels | None = None,
) -> Decisions:
    """One scheduling cycle over `state` (never changed); see the module docstring.

    `state` is a `State`, a `Snapshot` or an open `Branch`; the cycle runs on a
    what-if of it that always rolls back. `running` may be any collection (a caller
    keeping its running jobs in a dict passes `values()`: it is only iterated, never
    copied). Running jobs the state does not yet hold are allocated from their
    placement (an invalid one raises `InvalidPlacementError`); jobs the state holds
    but `running` does not list occupy GPUs but count against no team and are never
    expected to end.
    `history` is the teams' decayed past use, for fair share; `cycle` is the
    caller's cycle number, echoed in the decisions.

    `usage` ((team, flavor) -> milli-GPUs held by its running jobs) is for callers
    that keep it incrementally (the simulator, the control plane): with it, the
    caller vouches that `state` already holds every running job and that names do
    not repeat, and the cycle skips those O(running) checks and the usage total,
    so its cost follows the pending queue, not the cluster. Running jobs' placements
    are then not read.

    `keep=True` (a `State` or `Branch` only) commits the cycle's what-if instead of
    rolling it back, leaving `state` exactly as applying the decisions would
    (victims released, admitted jobs allocated; the reservation placeholder
    removed): a simulator then does not redo every allocation. The decisions are
    the same either way.

    `lean` (`sched.lean`, profiles that `qualify` only): the caller keeps `pending` in
    FIFO order between cycles and reads no reasons; the cycle looks only at the jobs
    that can start (those `lean.fresh` names, when nothing was freed since the caller's
    last cycle) and stops once no node has room for the smallest worker. It admits
    exactly what a full cycle admits; `pending_reasons` and `considered` are empty.

    `quiet` (any profile; implied by `lean`): the caller reads what the cycle starts and
    evicts, never why jobs wait. `pending_reasons` and `considered` are then empty, and a
    backfill reservation is sought only when a job after the blocked one could start (so
    `reserved` is empty when none could); admissions and evictions are a full cycle's.
    `census` (quiet only, with `usage`; `sched.census`): what the caller keeps of its queue
    and running jobs. With it the cycle ends once no node has room for the smallest
    waiting worker while no waiting job can evict, counting a backfill reservation's
    masked GPUs as room only while a waiting job small enough ends before it; and reads
    the running jobs' ends and lowest evictable class off the census instead of scanning
    them. (A lean cycle's stop rule reads `Lean.sizes`.)
    `kept` (quiet only, profiles that `kept.keeps`): the caller keeps the queue in each
    team's order and every job's class value (`sched.kept`); the cycle takes jobs off the
    teams' heads instead of sorting `pending`, which it then reads only for FGD's mix.
    For the tiresias order (`kept.keeps_levels`) the caller keeps `KeptLevels`, the queue
    by least-attained-service queue: the cycle takes the queues one after the other, and
    with a census its stop rule knows that LAS evicts nothing once no evictable running
    job sits in a queue above those of the jobs still to come.
    """
    clock = time.perf_counter
    timings = dict.fromkeys(PHASES, 0.0)
    plugins = resolve(profile)
    _check_inputs(cluster, state, running, pending, usage=usage, keep=keep)
    if lean is not None and not qualifies(plugins.profile):
        raise ValueError(f"decide(lean=...): profile {profile!r} does not allow lean cycles")
    if kept is not None:
        _check_kept(kept, profile, plugins.profile, lean=lean, quiet=quiet)
    if census is not None and usage is None:
        raise ValueError("decide(census=...) needs usage=...: the census's caller keeps both")
    quiet = quiet or lean is not None
    t0 = clock()
    index = team_index(teams)
    with _what_if(state) as b:
        book = _load(  # 1. snapshot
            b,
            running,
            pending,
            teams,
            usage=usage,
            index=index,
            cluster=cluster,
            profile=profile,
            whole_only=plugins.profile.whole_gpus_only,
        )
        t1 = clock()
        timings["snapshot"] = t1 - t0
        shapes = cluster.derived(RequestShapes)
        priority = _priorities(
            pending,
            index,
            shapes,
            plugins.profile.whole_gpus_only,
            given=None if kept is None else kept.priority,
            lean=lean is not None,
        )
        order = plugins.queue_order
        ctx = OrderContext(
            priority,
            now_s,
            # an order that says it never reads shares gets the context's default
            _dominant_share(cluster, book, history, now_s, index)
            if order.uses_share
            else _no_share,
            cluster_gpus=cluster.gpu_count,
            max_priority=index.max_priority,
        )
        plugins = _observed(plugins, pending, cluster)
        cyc = _Cycle(
            b,
            book,
            plugins,
            timings,
            (running, priority, teams, now_s),
            lean=lean is not None,
            quiet=quiet,
        )
        if kept is not None:
            cyc.highest_waiting = kept.highest
        if quiet:
            cyc.census = census
        stop, queue = _ordered(cyc, order, pending, ctx, lean, kept)  # 2. order, lazily
        cyc.mark = clock()
        timings["order"] = cyc.mark - t1
        deferred = _walk(cyc, queue, stop)
        for job in deferred:
            if stop is not None and stop():
                break
            cyc.run(job)
            if stop is not None:
                stop.looked(job)
        t3 = clock()
        relayouts = _relayouts(b, cyc, now_s)
        reserved = cyc.reservation
        if keep:
            if b.holds(backfill.HOLDER):
                b.release_all(backfill.HOLDER)
            b.commit()
    # 5. commit: the what-if has rolled back (or been kept); decisions go out as data
    decisions = Decisions(
        admitted=cyc.admitted,
        preempted=cyc.preempted,
        reserved={reserved.job: reserved.placements} if reserved else {},
        reserved_start_s={reserved.job: reserved.start_s} if reserved else {},
        pending_reasons=Reasons() if quiet else cyc.reasons,
        flavors=cyc.flavors,
        relayouts=relayouts,
        cycle=cycle,
        timings_s=timings,
        considered=() if quiet else tuple(cyc.considered),
    )
    timings["commit"] = clock() - t3
    return decisions


def _ordered(  # noqa: PLR0917 - the order's inputs, as decide() holds them
    cyc: _Cycle,
    order: QueueOrder,
    pending: list[JobSpec],
    ctx: OrderContext,
    lean: Lean | None,
    kept: Kept | KeptLevels | None,
) -> tuple[_StopRule | None, Iterator[JobSpec]]:
    """Phase 2, lazily: the pending jobs in the profile's order (`_queue`), less those the
    cycle's stop rule passes over, and the stop rule (None: the cycle walks the queue)."""
    if isinstance(kept, KeptLevels):  # the lowest queue with a job in it
        cyc.las_floor = next((i for i, jobs in enumerate(kept.levels) if jobs), None)
    stop = _stop_rule(cyc.b, cyc, lean, cyc.census, len(pending))
    passes = None if stop is None else stop.passes
    queue = _queue(order, pending, ctx, lean, kept, passes=passes, cyc=cyc)
    if stop is not None and (kept is None or passes is None):
        queue = stop.unlooked(queue)  # (a kept order passes over jobs itself)
    return stop, queue


def _walk(cyc: _Cycle, queue: Iterator[JobSpec], stop: _StopRule | None) -> list[JobSpec]:
    """Phases 3 and 4 for each job of `queue` in turn (a lean cycle's `stop` may end it
    early); returns the jobs that would borrow, set aside under `guaranteed_first` until
    every job within its team's guarantee has been looked at.

    Jobs already decided (a shape that failed at this state, a strict blocker ahead, a
    team whose deferral is known) are taken in one tight loop (`_Cycle.answered`); the
    rest go through the full path one by one."""
    clock, timings = time.perf_counter, cyc.timings
    deferred: list[JobSpec] = []
    guaranteed_first = cyc.plugins.profile.guaranteed_first
    done = stop is not None and stop()
    job = None if done else cyc.answered(queue, deferred, guaranteed_first)
    while job is not None:
        t = clock()
        timings["order"] += t - cyc.mark
        cyc.mark = t
        if guaranteed_first and cyc.would_borrow(job):
            deferred.append(job)
        else:
            cyc.run(job)  # 3 + 4. nominate and place (+ preempt, reserve)
            if stop is not None:
                stop.looked(job)
        if stop is not None and stop():
            break
        job = cyc.answered(queue, deferred, guaranteed_first)
    t = clock()
    timings["order"] += t - cyc.mark
    cyc.mark = t
    cyc.las_floor = None  # the set-aside jobs sit in any queue
    return deferred


# a quiet cycle over fewer waiting jobs than this has no stop rule: its bookkeeping (the
# room after every admission) costs more than the looks it saves (as `LeanQueue.active_at`)
QUIET_STOP_AT = 16


def _stop_rule(
    b: Branch, cyc: _Cycle, lean: Lean | None, census: Census | None, waiting: int
) -> _StopRule | None:
    """A lean cycle's stop rule; a quiet one's when its caller keeps a census, `waiting`
    reaches `QUIET_STOP_AT`, and no profile plugin's victims depend on more than priority
    and quota, or only LAS's do and the queue is kept by level (its guard reads the
    lowest queue of the jobs still to come, `_Cycle.las_floor`). Full cycles have none."""
    if lean is not None:
        return _StopRule(b, lean.sizes, cyc, lean=True)
    if census is None or waiting < QUIET_STOP_AT:
        return None
    if cyc.keyed_preemptions and cyc.las_floor is None:
        return None
    return _StopRule(b, census.waiting_sizes, cyc, lean=False, runtimes=census.waiting_runtimes)


class _StopRule:
    """A lean or quiet cycle's "nothing more can start": no node has room for the smallest
    worker still waiting, or (strict FIFO, lean) a job blocks the rest; and, under best
    effort in a lean cycle, which jobs cannot start (`unlooked`: a worker larger than the
    room of the roomiest node, where a job that cannot start changes nothing). What is free
    changes only when the cycle admits, so the room is read again only then.

    A quiet cycle (any profile) stops only while no waiting job can evict (`_Cycle.
    nothing_evicts`: else a job with no room could still start by evicting), counts the
    GPUs a backfill reservation masks as room (a job that ends before the reservation may
    use them), and passes jobs over only once no look can seek the reservation (`passes`,
    `sched.passover`: under backfill the first blocked job may take it, which decides
    what later jobs may use). With the waiting jobs' runtimes it counts the masked GPUs
    only while a waiting job of a size they could hold ends before the reservation (the
    jobs this cycle has looked at aside: none is looked at twice): else only free GPUs
    are room."""

    def __init__(
        self,
        b: Branch,
        sizes: Mapping[int, int],
        cyc: _Cycle,
        *,
        lean: bool,
        runtimes: Mapping[int, Sequence[float]] | None = None,
    ) -> None:
        self._b, self._cyc = b, cyc
        self._runtimes = runtimes
        self._looked: dict[int, list[float]] = {}  # per size, runtimes of jobs looked at here
        # waiting jobs per whole GPUs per worker, less those this cycle admits
        self._sizes = Counter(sizes)
        self._smallest = 0 if 0 in self._sizes else min(self._sizes, default=0)
        head_of_line = cyc.plugins.profile.head_of_line
        self._strict = lean and head_of_line == "strict"
        self._skips = lean and head_of_line == "best-effort"
        self._guarded = not lean
        # a quiet cycle passes over jobs that cannot start once no look can place the
        # reservation: always under best effort, after the first blocked job under backfill
        self.passes = (
            PassOver(now_s=cyc.now_s)
            if not lean and head_of_line in ("best-effort", "backfill")
            else None
        )
        self._backfill = head_of_line == "backfill"
        self._version = -1
        self._full = False
        self.room = b.most_free_gpus() if self._skips else 0  # most free GPUs on one node
        self._free_room = 0  # quiet: most free GPUs on one node, the reservation's mask aside
        self._las_seen: tuple[tuple[int, int | None], int] | None = None  # see `_las_room`

    def unlooked(self, queue: Iterator[JobSpec]) -> Iterator[JobSpec]:
        """Best effort: a job whose worker is larger than any node's room waits, unlooked at
        (it would change nothing); `room` is kept up to date by each call of the rule.
        A quiet cycle passes over the jobs `passes` skips (a kept order asks it itself)."""
        if self.passes is not None:
            return filterfalse(self.passes.skips, queue)
        if not self._skips:
            return queue
        # `worker_gpus`, written out: this runs once per waiting job
        return (j for j in queue if (j.gpus or 0) <= self.room)

    def looked(self, job: JobSpec) -> None:
        """`job` had its turn (it is not looked at again in this cycle, whether it started
        or not): if it started, the smallest worker may have grown."""
        size = worker_gpus(job)
        if self._runtimes is not None:
            runtime = backfill.expected_runtime_s(job)
            if runtime is not None:
                self._looked.setdefault(size, []).append(runtime)
        if not self._smallest or job.name not in self._cyc.admitted:
            return
        sizes = self._sizes
        left = sizes[size] - 1
        if left > 0:
            sizes[size] = left
        else:
            del sizes[size]
            self._smallest = min(sizes, default=0)

    def __call__(self) -> bool:
        if self._strict and self._cyc.blocker is not None:
            return True
        if self._b.version != self._version:
            self._refresh()
        if self.passes is not None:
            self._arm(self.passes)
        if not self._full or not self._guarded:
            return self._full
        cyc = self._cyc
        if cyc.nothing_evicts():
            return True
        return cyc.las_alone_evicts() and self._smallest > self._las_room()

    def _refresh(self) -> None:
        """Read the rooms again (the state changed since they were read)."""
        self._version = self._b.version
        self._free_room, self.room = self._rooms()
        smallest = self._smallest
        self._full = bool(smallest) and (
            self.room < smallest
            or (
                self._free_room < smallest
                and self._runtimes is not None
                and not self._ends_in_time(self.room)
            )
        )

    def _arm(self, passes: PassOver) -> None:
        """Re-arm the pass-over rule after a look (the rooms, the reservation, whether a
        look could still seek one or evict may all have changed)."""
        cyc = self._cyc
        sought = cyc.reservation_tried or not self._backfill
        passes.on = sought and cyc.nothing_evicts()
        passes.free_room, passes.room = self._free_room, self.room
        if sought and not passes.on and cyc.las_alone_evicts():
            # a job whose worker no node could hold even if LAS evicted every job it may
            # changes nothing either
            las = self._las_room()
            passes.on = True
            passes.free_room, passes.room = max(self._free_room, las), max(self.room, las)
        res = cyc.reservation
        passes.start_s = -math.inf if res is None else res.start_s

    def _ends_in_time(self, room: int) -> bool:
        """Whether a waiting job with a worker of at most `room` GPUs (the reservation's
        masked ones included) ends before the reservation starts, the jobs looked at in
        this cycle aside: only such a job may use the masked GPUs. With no reservation,
        none is masked and the free room alone counts."""
        res, runtimes = self._cyc.reservation, self._runtimes
        if res is None or runtimes is None:
            return False
        start, now = res.start_s, self._cyc.now_s
        for size, ascending in runtimes.items():
            if not size or size > room or not ascending:
                continue
            looked = self._looked.get(size)
            if not looked:
                if now + ascending[0] <= start:  # as `backfill.ends_before` compares
                    return True
                continue
            aside = Counter(looked)
            for runtime in ascending:
                if now + runtime > start:
                    break
                if aside[runtime]:
                    aside[runtime] -= 1
                    continue
                return True
        return False

    def _las_room(self) -> int:
        """The most whole GPUs one worker could get on one node if LAS evicted every
        running job it may for the jobs not looked at yet (`_Cycle.las_victims`): their
        GPUs, the free ones and those a reservation masks; at least `room`. Counting stops
        once it reaches the largest waiting worker (a larger room passes over and stops
        nothing more). Kept until the state or the LAS floor changes."""
        key = (self._b.version, self._cyc.las_floor)
        if self._las_seen is not None and self._las_seen[0] == key:
            return self._las_seen[1]
        room = self._las_room_upto(max(self._sizes, default=0))
        self._las_seen = (key, room)
        return room

    def _las_room_upto(self, cap: int) -> int:
        room = self.room
        if room >= cap:
            return room
        b = self._b
        masked = (
            Counter(node for node, _ in b.holdings(backfill.HOLDER).gpus)
            if b.holds(backfill.HOLDER)
            else Counter()
        )
        held: Counter[str] = Counter()  # per node, the GPUs victims hold
        base: dict[str, int] = {}  # per node, its free and masked GPUs
        for holdings in self._cyc.las_victims():
            if holdings.slices or holdings.shares:
                return sys.maxsize  # no whole-GPU bound speaks for a slice or a share
            for node, _ in holdings.gpus:
                held[node] += 1
                if node not in base:
                    base[node] = len(b.free_gpu_ids(node)) + masked[node]
                room = max(room, base[node] + held[node])
            if room >= cap:
                return room
        return room

    def _rooms(self) -> tuple[int, int]:
        """The most whole GPUs one worker could get on one node: (free ones, free ones and
        in a quiet cycle also those a backfill reservation masks, which a job that ends
        before it may use). A lean cycle holds no mask."""
        b = self._b
        room = b.most_free_gpus()
        if not self._guarded or not b.holds(backfill.HOLDER):
            return room, room
        masked = Counter(node for node, _ in b.holdings(backfill.HOLDER).gpus)
        return room, max(room, *(len(b.free_gpu_ids(n)) + k for n, k in masked.items()))


def _check_kept(
    kept: Kept | KeptLevels, name: str, profile: Profile, *, lean: Lean | None, quiet: bool
) -> None:
    """`decide(kept=...)` is for quiet cycles of the orders a caller may keep."""
    allowed = keeps_levels(profile) if isinstance(kept, KeptLevels) else keeps(profile)
    if lean is not None or not quiet or not allowed:
        raise ValueError(
            f"decide(kept=...): profile {name!r}: only quiet cycles of a priority or "
            "fair-share order take a kept queue, and of the tiresias order kept levels"
        )


def _check_inputs(
    cluster: Cluster,
    state: StateView,
    running: Collection[JobSpec],
    pending: list[JobSpec],
    *,
    usage: Mapping[tuple[str, str], int] | None,
    keep: bool,
) -> None:
    if state.cluster is not cluster:
        raise UserError("decide(): the state belongs to a different cluster")
    if keep and type(state) not in _BRANCHABLE and isinstance(state, Snapshot):
        raise UserError("decide(keep=True) needs a State or Branch: a snapshot is read-only")
    if usage is None:
        seen = Counter(j.name for j in [*running, *pending])
        dupes = sorted(n for n, k in seen.items() if k > 1)
        if dupes:
            raise UserError(f"decide(): job names repeat: {', '.join(dupes)}")
        if backfill.HOLDER in seen:
            raise UserError("decide(): a job name may not be the reservation placeholder")


class _PendingRequests(Sequence[Request]):
    """Each pending job's first request, built only if a plugin reads them: most placement
    plugins ignore `observe`'s argument, and building them is O(pending) per cycle."""

    def __init__(self, pending: Sequence[JobSpec], cluster: Cluster, whole: bool) -> None:
        self._args = (pending, cluster.derived(RequestShapes), whole)
        self._items: list[Request] | None = None

    def _all(self) -> list[Request]:
        if self._items is None:  # requests of one shape are one tuple, kept by the cluster
            pending, shapes, whole = self._args
            self._items = [r for job in pending for r in shapes.requests(job, whole)[:1]]
        return self._items

    def __len__(self) -> int:
        return len(self._all())

    def __iter__(self) -> Iterator[Request]:  # not Sequence's index walk
        return iter(self._all())

    @overload
    def __getitem__(self, i: int) -> Request: ...
    @overload
    def __getitem__(self, i: slice) -> Sequence[Request]: ...
    def __getitem__(self, i: int | slice) -> Request | Sequence[Request]:
        return self._all()[i]


def _observed(plugins: Resolved, pending: Sequence[JobSpec], cluster: Cluster) -> Resolved:
    """Let the placement plugin see this cycle's pending requests (FGD's distribution)."""
    requests = _PendingRequests(pending, cluster, plugins.profile.whole_gpus_only)
    placement = plugins.placement.observe(requests)
    if placement is plugins.placement:
        return plugins
    return Resolved(plugins.profile, plugins.queue_order, placement, plugins.preemptions)


def _dominant_share(
    cluster: Cluster,
    book: QuotaBook,
    history: DecayedUsage | None,
    now_s: float,
    index: TeamIndex,
) -> Callable[[str], float]:
    """team -> weighted dominant share, read live from the quota book (see OrderContext)."""
    capacity = cluster.gpus_by_accelerator
    weights = index.weights
    known: dict[str, tuple[int, float]] = {}  # team -> (its book changes, share): orders re-read
    changes = book.changes

    def share(team: str) -> float:
        seen = known.get(team)
        if seen is not None and seen[0] == changes.get(team, 0):
            return seen[1]
        most = 0.0
        for acc, cap in capacity.items():
            gpus = book.used.get((team, acc), 0) / MILLI
            if history is not None:
                gpus += history.mean_gpus(team, acc, now_s)
            most = max(most, gpus / cap)
        value = most / weights.get(team, 1.0)
        known[team] = (changes.get(team, 0), value)
        return value

    return share


def _relayouts(b: Branch, cyc: _Cycle, now_s: float) -> tuple[Relayout, ...]:
    """Re-layout proposals for the slice requests that found no free slice this cycle."""
    if not cyc.unplaced_slices:
        return ()
    ends: dict[str, float | None] = {j.name: backfill.expected_end_s(j) for j in cyc.running}
    ends.update({name: end for end, name in cyc.ends})  # admitted in this cycle
    return relayout.propose(b, cyc.unplaced_slices, ends, now_s)


__all__ = ["decide", "reason_parts", "with_ahead"]  # the reasons' wording, re-exported
