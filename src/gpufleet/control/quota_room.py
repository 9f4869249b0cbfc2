"""What a team's quotas let a job ever hold: the submit's refusal of a job that can never
run, and the same rule for jobs already waiting when quotas shrink.

Apart from `control.jobs` (submits, listings, moves) because both the submit path and the
reconciler's cycle read it: one rule, so a job refused at submit and one stranded later by a
smaller quota read the same.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, ClassVar, Protocol

from sqlalchemy import bindparam, or_, select
from sqlalchemy.orm import Session

from gpufleet.cluster import MILLI, Cluster, Node
from gpufleet.control.models import Quota, Team
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched.quota import QuotaBook, request_milli
from gpufleet.sched.requests import requests_for
from gpufleet.specs.jobs import JobSpec
from gpufleet.specs.teams import Quota as QuotaSpec
from gpufleet.specs.teams import TeamsSpec


class _Shape(Protocol):
    """What `fitting` reads of a job: a submit's `JobRequest`, or a stored job's spec."""

    @property
    def gpus(self) -> int | None: ...
    @property
    def workers(self) -> int: ...
    @property
    def mig_profile(self) -> str | None: ...


def fitting(req: _Shape, nodes: Sequence[Node]) -> list[str]:
    """The accelerators whose `nodes` can hold the request when nothing else runs (a gang:
    one worker per node's share of GPUs); UserError, saying what to change, where none can."""
    accs = list(dict.fromkeys(n.accelerator for n in nodes))
    if req.gpus:
        # a GPU cut into MIG slices is never whole again (`Node.whole_gpus`)
        whole = [n for n in nodes if n.whole_gpus]
        if not whole:
            profiles = sorted({p for n in nodes for lay in n.mig for p, _ in lay})
            raise UserError(
                f"gpus: every {' or '.join(accs)} GPU of this cluster is cut into MIG slices, "
                f"so whole GPUs never free up there; ask for a slice (mig_profile: "
                f"{', '.join(profiles)}) or another accelerator"
            )
        accs = list(dict.fromkeys(n.accelerator for n in whole))
        per_node = max(n.whole_gpus for n in whole)
        if req.gpus > per_node:
            raise UserError(
                f"gpus: {req.gpus} per worker, but the largest node has {per_node} whole GPUs; "
                "use more workers with fewer GPUs each"
            )
        total = max(sum(n.whole_gpus for n in whole if n.accelerator == a) for a in accs)
        if req.gpus * req.workers > total:
            raise UserError(
                f"{req.gpus} x {req.workers} = {req.gpus * req.workers} GPUs, but the cluster "
                f"has at most {total} of one accelerator type"
            )
        slots = {
            a: sum(n.whole_gpus // req.gpus for n in whole if n.accelerator == a) for a in accs
        }
        fit = [a for a in accs if slots[a] >= req.workers]
        if not fit:
            raise UserError(
                f"workers: {req.workers} workers of {req.gpus} GPUs each, but the nodes of one "
                f"accelerator type hold at most {max(slots.values())} of them (a worker's GPUs "
                "are on one node); use fewer GPUs per worker"
            )
        return fit
    if req.mig_profile:
        has = {
            a: {p for n in nodes if n.accelerator == a for lay in n.mig for p, _ in lay}
            for a in accs
        }
        fit = [a for a in accs if req.mig_profile in has[a]]
        if not fit:
            profiles = sorted(set().union(*has.values()))
            raise UnknownNameError("MIG profile in this cluster", req.mig_profile, profiles)
        return fit
    fit = [a for a in accs if any(n.fractions for n in nodes if n.accelerator == a)]
    if not fit:
        raise UserError("gpu_fraction: no node of this cluster shares GPUs by fraction")
    return fit


def quota_refusal(job: JobSpec, fit: Sequence[str], room: QuotaRoom) -> str | None:
    """None where the team's quotas let the job start on one of the accelerators `fit` (with
    the most its cohort could lend); else why on each, as the scheduler would weigh it
    (`sched.quota.QuotaBook.check`: no quota entry, or more than the team may ever hold)."""
    reasons: list[str] = []
    requests = requests_for(job, list(fit))
    for r in requests:
        need_milli = request_milli(r)
        most = room.most_gpus.get(r.accelerator)
        if most is not None and need_milli <= most * MILLI:
            return None
        reasons.append(room.why_not(r.accelerator, need_milli))
    if not requests:
        return None  # nothing to weigh here: the scheduler says why
    elsewhere = sorted(set(room.most_gpus) - set(fit))
    hint = f" (it has quota for {', '.join(elsewhere)})" if elsewhere else ""
    return "; ".join(reasons) + hint + "; an admin can change the team's quotas"


@dataclass(frozen=True, slots=True)
class QuotaRoom:
    """The most GPUs of each flavor a team may ever hold under the quotas of now: the
    scheduler's own `QuotaBook.limit` with nothing in use (its guarantee, plus, when it may
    borrow, all that the rest of its cohort lends, capped by its limits). A flavor missing
    from `most_gpus` is one it has no quota for, which the scheduler never starts its jobs
    on, cohort or not. `parts` says how each most is made up."""

    team: str
    most_gpus: dict[str, int]
    parts: dict[str, str]

    def why_not(self, flavor: str, need_milli: int) -> str:
        most = self.most_gpus.get(flavor)
        if most is None:
            return f"team {self.team} has no quota for {flavor}"
        return (
            f"team {self.team} may hold at most {most} {flavor} GPUs ({self.parts[flavor]}) "
            f"and this job needs {need_milli / MILLI:g}"
        )


# the quotas of a team and of its cohort, in one query (a submit reads no other team's)
_QUOTAS = (
    select(Team.name.label("team_name"), Team.cohort.label("team_cohort"), *Quota.__table__.c)
    .join(Quota, Quota.team_id == Team.id)
    .where(or_(Team.id == bindparam("team"), Team.cohort == bindparam("cohort")))
)


def quota_room(session: Session, team: Any) -> QuotaRoom:
    """The `QuotaRoom` of `team` (a row of `_TEAM`): its cohort's quotas as a `TeamsSpec`,
    weighed by `QuotaBook` as the scheduler weighs them."""
    members: dict[str, dict[str, Any]] = {}
    for row in session.execute(_QUOTAS, {"team": team.id, "cohort": team.cohort}):
        member = members.setdefault(
            row.team_name, {"name": row.team_name, "cohort": row.team_cohort, "quotas": []}
        )
        member["quotas"].append({k: getattr(row, k) for k in QuotaSpec.model_fields})
    if team.name not in members:
        return QuotaRoom(team.name, {}, {})  # no quota for any flavor
    book = QuotaBook(TeamsSpec.model_validate({"kind": "teams", "teams": [*members.values()]}), {})
    return room_in(book, team.name)


def room_in(book: QuotaBook, name: str) -> QuotaRoom:
    """The `QuotaRoom` of team `name` in `book` (built with nothing in use); a team the book
    does not know has no quota for any flavor."""
    me = book.teams.get(name)
    if me is None:
        return QuotaRoom(name, {}, {})
    most: dict[str, int] = {}
    parts: dict[str, str] = {}
    for q in me.quotas:
        limit = book.limit(me, q.flavor)
        if limit is None:
            continue
        most[q.flavor] = limit // MILLI
        pool = book.lend_pool(me, q.flavor) // MILLI if q.borrowing else 0
        parts[q.flavor] = f"{q.guaranteed_gpus} guaranteed"
        if pool > 0:
            parts[q.flavor] += f" + {pool} that cohort {me.cohort} can lend"
        if most[q.flavor] < q.guaranteed_gpus + max(pool, 0):
            parts[q.flavor] += f", capped at {most[q.flavor]}"
    return QuotaRoom(name, most, parts)


# how a `QuotaNever` reason begins (stored as the job's reason: the reconciler finds them by it)
NEVER_MARK = "cannot run under its team's quotas of now"


@dataclass(frozen=True, slots=True)
class QuotaNever:
    """A pending job's reason (a `sched.waits.Wait` record) when its team's quotas of now
    never let it start: accepted at submit under larger quotas, then an admin shrank them
    (or the cohort lends less). The scheduler only read it as waiting ("quota 8/2 in use,
    capped at 2"), with nothing saying it would wait for ever or what to change.

    `why` is the submit's refusal for the same job (`quota_refusal`), so a job refused at
    submit and one stranded later read the same."""

    kind: ClassVar[str] = "quota-never"
    team: str
    why: str
    needed_gpus: float
    most_gpus: tuple[tuple[str, int | None], ...]  # per accelerator it accepts; None: no quota
    made_of: tuple[tuple[str, str], ...] = ()  # how each most is made up (`QuotaRoom.parts`)

    def text(self) -> str:
        return f"{NEVER_MARK}: {self.why}, or cancel this job and submit one that fits"

    def numbers(self) -> dict[str, object]:
        out: dict[str, object] = {
            "team": self.team,
            "needed_gpus": self.needed_gpus,
            "most_gpus": dict(self.most_gpus),
            "made_of": dict(self.made_of),
        }
        if len(self.most_gpus) == 1:
            out["accelerator"] = self.most_gpus[0][0]
        return out


def quota_never(job: JobSpec, cluster: Cluster, room: QuotaRoom) -> QuotaNever | None:
    """The submit's quota rule (`_request`) applied to a job already waiting: why its team's
    quotas of now never let it start on any accelerator that can hold it, or None. None too
    where no node can hold it at all: that is the cluster's doing, and the scheduler's reason
    says so."""
    usable = set(job.accelerators or cluster.gpus_by_accelerator)
    nodes = [n for n in cluster.nodes if n.accelerator in usable]
    if not job.spot_ok:
        nodes = [n for n in nodes if n.capacity != "spot"]
    try:
        fit = fitting(job, nodes)
    except UserError:
        return None
    why = quota_refusal(job, fit, room)
    if why is None:
        return None
    requests = requests_for(job, list(fit))
    return QuotaNever(
        room.team,
        why,
        max(request_milli(r) for r in requests) / MILLI,
        tuple((r.accelerator, room.most_gpus.get(r.accelerator)) for r in requests),
        tuple(
            (r.accelerator, room.parts[r.accelerator])
            for r in requests
            if r.accelerator in room.parts
        ),
    )


def never_under_quota(
    pending: Sequence[JobSpec], teams: TeamsSpec, cluster: Cluster
) -> dict[str, QuotaNever]:
    """The waiting jobs (by name) that their team's quotas of now never let start, with why:
    `quota_never` for each, weighed once per team and job shape (a long queue has few)."""
    book = QuotaBook(teams, {})
    rooms: dict[str, QuotaRoom] = {}
    seen: dict[tuple[Any, ...], QuotaNever | None] = {}
    out: dict[str, QuotaNever] = {}
    for job in pending:
        shape = (
            job.team,
            job.gpus,
            job.workers,
            job.mig_profile,
            job.gpu_fraction,
            tuple(job.accelerators),
            job.spot_ok,
        )
        if shape not in seen:
            if job.team not in rooms:
                rooms[job.team] = room_in(book, job.team)
            seen[shape] = quota_never(job, cluster, rooms[job.team])
        found = seen[shape]
        if found is not None:
            out[job.name] = found
    return out
