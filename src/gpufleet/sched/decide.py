"""`decide()`: one scheduling cycle, pure from the caller's view (design 0009).

The cycle is numbered and timed (`framework.PHASES`):

1. **snapshot** — open a what-if on the given state (a `State` gets `branch()`, a
   `Snapshot` `what_if()`, a `Branch` a nested branch), allocate running jobs
   from their placement unless the state already holds them, and total each
   team's usage per flavor;
2. **order** — the profile's queue-order plugin sorts the pending jobs;
3. **nominate** — per job and acceptable flavor, the quota check: a team may
   use up to its guaranteed GPUs of a flavor, plus idle quota borrowed from
   the other teams of its cohort (the sum of their lendable GPUs minus what
   they use of it), capped by its `max_gpus`; no cohort → no borrowing; no
   quota for a flavor → that flavor is not used;
4. **place** — the placement plugin picks a complete placement (a gang lands
   whole or not at all), which is allocated on the what-if so later jobs see
   it;
5. **commit** — the decisions go out as data and the what-if rolls back: the
   given state is never changed.

Quota units: a whole GPU is 1, a GPU fraction its share, a MIG slice its
share of the GPU's compute slices.

Preemption by priority (`sched.preempt`, when the profile allows it): a job
that passed its quota check but found no placement may evict running jobs of
strictly lower priority (preemptible class and job, past the minimum runtime),
chosen to minimise lost work then the number of victims. The victims go out in
`Decisions.preempted` with a reason; the preemptor is admitted with its
placement and starts after their grace period. The search time counts under
the "place" phase.

Head-of-line rule in this slice: **best-effort FIFO** — a job that does not
fit does not block later ones (a large gang can be starved by a stream of
small jobs until backfill reservations exist). **Not in this slice:**
preemption by quota reclaim and backfill reservations, so `Decisions.reserved`
is always empty; a team under its guarantee whose GPUs are lent out waits
instead of reclaiming them (unless it outranks the borrowers).
"""

from __future__ import annotations

import math
import time
from collections import Counter
from collections.abc import Iterator, Mapping
from contextlib import contextmanager

from gpufleet.catalog.mig import mig_profiles_for
from gpufleet.cluster import (
    MILLI,
    AllocationError,
    Branch,
    Cluster,
    MigSlice,
    Share,
    Snapshot,
    State,
    StateView,
    Usage,
    Whole,
    to_milli,
)
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched import preempt
from gpufleet.sched.framework import (
    PHASES,
    Decisions,
    InvalidPlacementError,
    OrderContext,
    Placement,
    PlacementPlugin,
    Status,
)
from gpufleet.sched.plugins import MILLI_PER_EIGHTH, PROFILES, resolve
from gpufleet.sched.requests import Request, requests_for
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import PriorityClass, Team, TeamsSpec

QUOTA = "quota"


def gpus_text(milli: int) -> str:
    """Thousandths of a GPU as a person reads them: 64000 -> "64", 250 -> "0.25"."""
    if milli % MILLI == 0:
        return str(milli // MILLI)
    return f"{milli / MILLI:.3f}".rstrip("0")


def slice_milli(accelerator: str, profile: str) -> int:
    """A MIG slice's weight against quota: its share of the GPU's compute slices."""
    profiles = mig_profiles_for(accelerator)
    whole = max((p.compute_slices for p in profiles), default=1)
    compute = next((p.compute_slices for p in profiles if p.profile == profile), whole)
    return math.ceil(MILLI * compute / whole)


def request_milli(request: Request) -> int:
    if request.kind == "gpus":
        return request.total_gpus * MILLI
    if request.kind == "mig":
        return slice_milli(request.accelerator, request.mig_profile or "")
    return request.eighths * MILLI_PER_EIGHTH


def usage_milli(usage: Usage) -> dict[str, int]:
    out = {acc: n * MILLI for acc, n in usage.gpus.items()}
    for (acc, profile), n in usage.slices.items():
        out[acc] = out.get(acc, 0) + n * slice_milli(acc, profile)
    for acc, m in usage.milli.items():
        out[acc] = out.get(acc, 0) + m
    return out


class QuotaBook:
    """Team usage per flavor (milli-GPUs) and the guaranteed + borrowable check."""

    def __init__(self, teams: TeamsSpec, used: dict[tuple[str, str], int]) -> None:
        self.teams = {t.name: t for t in teams.teams}
        self.used = used

    def _lend_pool(self, team: Team, flavor: str) -> int:
        """What the rest of `team`'s cohort can lend now: their lendable GPUs minus what is
        used of them (by themselves beyond what they keep, or by borrowers). Negative when
        others have borrowed part of `team`'s own guarantee (taking it back needs preemption).
        """
        lendable = consumed = 0
        for other in self.teams.values():
            if other.name == team.name or other.cohort != team.cohort:
                continue
            q = other.quota_for(flavor)
            if q is None:
                continue
            lend = q.lendable_gpus * MILLI
            lendable += lend
            kept = q.guaranteed_gpus * MILLI - lend
            consumed += max(0, self.used.get((other.name, flavor), 0) - kept)
        return lendable - consumed

    def limit(self, team: Team, flavor: str) -> int | None:
        """Most milli-GPUs of `flavor` the team may hold now (None: no quota).

        Guaranteed, plus the cohort's idle lendable quota when borrowing, minus any of
        its own guarantee lent out and in use elsewhere; capped by `max_gpus`. This keeps
        a cohort's total use within the sum of its members' guarantees.
        """
        q = team.quota_for(flavor)
        if q is None:
            return None
        allowed = q.guaranteed_gpus * MILLI
        if team.cohort is not None:
            pool = self._lend_pool(team, flavor)
            allowed += pool if q.borrowing else min(0, pool)
        cap = q.max_gpus
        return allowed if cap is None else min(allowed, cap * MILLI)

    def check(self, job: JobSpec, flavor: str, need: int) -> Status:
        team = self.teams.get(job.team)
        if team is None:
            known = ", ".join(sorted(self.teams))
            return Status(
                "unschedulable", f"cannot run: team {job.team} is not in the teams file ({known})"
            )
        q = team.quota_for(flavor)
        if q is None:
            return Status(
                "unschedulable", f"cannot run: team {team.name} has no quota for {flavor}", QUOTA
            )
        used = self.used.get((team.name, flavor), 0)
        allowed = self.limit(team, flavor)
        assert allowed is not None
        if used + need <= allowed:
            return Status(plugin=QUOTA)
        g = q.guaranteed_gpus * MILLI
        head = f"waiting: team {team.name} quota {gpus_text(used)}/{gpus_text(g)} {flavor} in use"
        cap = q.max_gpus
        pool = self._lend_pool(team, flavor) if team.cohort is not None else 0
        if cap is not None and used + need > cap * MILLI:
            why = f"{head}, capped at {cap} with borrowing"
        elif team.cohort is None:
            why = f"{head}, no cohort to borrow from"
        elif pool < 0:
            why = (
                f"{head}, {gpus_text(-pool)} of its guarantee is lent out in cohort "
                f"{team.cohort} (taking it back needs preemption, not implemented yet)"
            )
        elif not q.borrowing:
            why = f"{head}, borrowing is off for this quota"
        else:
            why = f"{head}, cohort {team.cohort} has {gpus_text(pool)} to lend"
        return Status("wait", f"{why} (this job needs {gpus_text(need)})", QUOTA)

    def add(self, team: str, flavor: str, milli: int) -> None:
        self.used[(team, flavor)] = self.used.get((team, flavor), 0) + milli


@contextmanager
def _what_if(view: StateView) -> Iterator[Branch]:
    if isinstance(view, State):
        branch = view.branch()
    elif isinstance(view, Snapshot):
        branch = view.what_if()
    elif isinstance(view, Branch):
        branch = view.branch()
    else:
        raise TypeError(f"decide() needs a State, Snapshot or Branch, got {type(view).__name__}")
    with branch:
        yield branch


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


def _priorities(jobs: list[JobSpec], teams: TeamsSpec) -> dict[str, int]:
    classes = {p.name: p.value for p in teams.priority_classes}
    by_team = {t.name: t for t in teams.teams}
    out: dict[str, int] = {}
    for job in jobs:
        team = by_team.get(job.team)
        name = job.priority_class or (team.default_priority if team else None)
        if name is None:
            out[job.name] = 0
            continue
        if name not in classes:
            raise UnknownNameError(f"priority class (job {job.name})", name, classes)
        out[job.name] = classes[name]
    return out


def _load(b: Branch, running: list[JobSpec], pending: list[JobSpec], teams: TeamsSpec) -> QuotaBook:
    """Phase 1: running jobs in place (unless already held), usage per team and flavor."""
    for job in running:
        if not b.holdings(job.name).empty:
            continue  # the state already holds it
        try:
            b.allocate(job.name, *_running_claims(job))
        except (AllocationError, UnknownNameError, ValueError) as e:
            raise InvalidPlacementError(f"running job {job.name}: {e}") from e
    for job in pending:
        if not b.holdings(job.name).empty:
            raise UserError(f"decide(): pending job {job.name} already holds GPUs")
    team_of = {j.name: j.team for j in running}
    used: dict[tuple[str, str], int] = {}
    for team, usage in b.usage_by(lambda j: team_of.get(j, "")).items():
        if team:
            for acc, m in usage_milli(usage).items():
                used[(team, acc)] = m
    return QuotaBook(teams, used)


class _Cycle:
    """Phases 3, 4 and 6 for one job at a time, accumulating decisions and timings."""

    def __init__(
        self, b: Branch, book: QuotaBook, placement: PlacementPlugin, timings: dict[str, float]
    ) -> None:
        self.b, self.book, self.placement, self.timings = b, book, placement, timings
        self.accelerators = list(b.cluster.accelerators)
        self.admitted: dict[str, tuple[Placement, ...]] = {}
        self.preempted: dict[str, str] = {}
        # set by decide() when the profile preempts: who may be evicted, and the clock
        self.victims: list[JobSpec] = []
        self.priority: Mapping[str, int] = {}
        self.classes: dict[str, PriorityClass | None] = {}
        self.now_s = 0.0
        self.flavors: dict[str, str] = {}
        self.reasons: dict[str, str] = {}
        self.waiting = 0

    def run(self, job: JobSpec) -> None:
        clock = time.perf_counter
        requests = requests_for(job, self.accelerators)
        why: list[str] = []
        if not requests:
            accepts = ", ".join(job.accelerators) or "any"
            why.append(
                "cannot run here: no accelerator of this cluster fits the request "
                f"(accepts: {accepts})"
            )
        blocked: list[tuple[Request, int]] = []  # quota allows, placement does not
        for req in requests:
            t = clock()
            need = request_milli(req)
            status = self.book.check(job, req.accelerator, need)
            t_nom = clock()
            self.timings["nominate"] += t_nom - t
            if not status.ok:
                why.append(status.reason)
                continue
            placed = self.placement.place(self.b, job, req)
            if placed.status.ok:
                self._admit(job, req, need, placed.placements)
                self.timings["place"] += clock() - t_nom
                return
            why.append(placed.status.reason)
            blocked.append((req, need))
            self.timings["place"] += clock() - t_nom
        if blocked and self.victims:
            t = clock()
            done = self._preempt_for(job, blocked, why)
            self.timings["place"] += clock() - t
            if done:
                return
        self.reasons[job.name] = _sentence(why, self.waiting)
        self.waiting += 1

    def _admit(
        self, job: JobSpec, req: Request, need: int, placements: tuple[Placement, ...]
    ) -> None:
        claims = [c for p in placements for c in p.claims()]
        with self.b.branch() as gang:  # all workers or nothing
            gang.allocate(job.name, *claims)
            gang.commit()
        self.book.add(job.team, req.accelerator, need)
        self.admitted[job.name] = placements
        self.flavors[job.name] = req.accelerator

    def _preempt_for(
        self, job: JobSpec, blocked: list[tuple[Request, int]], why: list[str]
    ) -> bool:
        """Phase 6: evict lower-priority running jobs so `job` fits one of its blocked requests."""
        mine = self.priority.get(job.name, 0)
        tried = False
        for req, need in blocked:
            cands = preempt.candidates(
                mine,
                req.accelerator,
                self.victims,
                classes=self.classes,
                held_milli=lambda name: usage_milli(self.b.usage(name)),
                now_s=self.now_s,
            )
            if not cands:
                continue
            tried = True
            chosen = preempt.choose_victims(self.b, self.placement, job, req, cands)
            if chosen is None:
                continue
            freed = {v.name: usage_milli(self.b.usage(v.name)) for v in chosen}
            with self.b.branch() as w:  # evict, then place; kept only if the placement holds
                for v in chosen:
                    w.release_job(v.name)
                placed = self.placement.place(w, job, req)
                if not placed.status.ok:  # not expected: choose_victims checked it
                    continue
                w.commit()
            for v in chosen:
                for acc, m in freed[v.name].items():
                    self.book.add(v.job.team, acc, -m)
            for v in chosen:
                self.preempted[v.name] = preempt.reason(job, mine, v, req.accelerator)
            self._admit(job, req, need, placed.placements)
            return True
        if tried:
            why.append(preempt.WOULD_NOT_HELP)
        return False


def decide(
    cluster: Cluster,
    state: StateView,
    running: list[JobSpec],
    pending: list[JobSpec],
    teams: TeamsSpec,
    *,
    profile: str = "default",
    now_s: float = 0.0,
) -> Decisions:
    """One scheduling cycle over `state` (never changed); see the module docstring.

    `state` is a `State`, a `Snapshot` or an open `Branch`; the cycle runs on a
    what-if of it that always rolls back. Running jobs the state does not yet
    hold are allocated from their placement (an invalid one raises
    `InvalidPlacementError`); jobs the state holds but `running` does not list
    occupy GPUs but count against no team.
    """
    clock = time.perf_counter
    timings = dict.fromkeys(PHASES, 0.0)
    order_plugin, placement = resolve(profile)
    if state.cluster is not cluster:
        raise UserError("decide(): the state belongs to a different cluster")
    seen = Counter(j.name for j in [*running, *pending])
    dupes = sorted(n for n, k in seen.items() if k > 1)
    if dupes:
        raise UserError(f"decide(): job names repeat: {', '.join(dupes)}")
    t0 = clock()
    with _what_if(state) as b:
        book = _load(b, running, pending, teams)  # 1. snapshot
        t1 = clock()
        timings["snapshot"] = t1 - t0
        ctx = OrderContext(_priorities(pending, teams), now_s)  # 2. order
        queue = sorted(pending, key=lambda j: order_plugin.key(j, ctx))
        timings["order"] = clock() - t1
        cycle = _Cycle(b, book, placement, timings)  # 3 + 4. nominate and place (+ 6. preempt)
        if PROFILES[profile].preemption:
            cycle.victims = list(running)  # only jobs running at the start of the cycle
            cycle.priority = ctx.priority
            cycle.classes = {j.name: preempt.priority_class(j, teams) for j in running}
            cycle.now_s = now_s
        for job in queue:
            cycle.run(job)
        t3 = clock()
    # 5. commit: the what-if has rolled back; decisions go out as data
    decisions = Decisions(
        admitted=cycle.admitted,
        preempted=cycle.preempted,
        pending_reasons=cycle.reasons,
        flavors=cycle.flavors,
        timings_s=timings,
    )
    timings["commit"] = clock() - t3
    return decisions


def _sentence(why: list[str], ahead: int) -> str:
    parts = list(dict.fromkeys(why)) or ["waiting"]
    text = parts[0] + "".join(
        "; " + p.removeprefix("waiting: ").removeprefix("cannot run: ") for p in parts[1:]
    )
    if ahead:
        text += f"; {ahead} job{'s' if ahead > 1 else ''} ahead of you"
    return text
