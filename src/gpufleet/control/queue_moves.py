"""Reordering a team's waiting jobs: a lead's moves within a priority class (design 0013).

A move decides which of a class's waiting jobs takes which of the places the class holds in
the cluster's queue; `in_lead_order` hands the scheduler those places every cycle. Pages show
the scheduler's positions only (the API's): its order is not the lead's, since guarantee-first
puts a team's jobs within its guarantee ahead of those that would borrow.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Literal

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.control import lifecycle
from gpufleet.control.admin import audit
from gpufleet.control.auth import ForbiddenError, Principal
from gpufleet.control.jobs import checked_writes, ordered_places, visible_job
from gpufleet.control.models import Job
from gpufleet.errors import UserError
from gpufleet.sched.registry import resolve

MoveTo = Literal["top", "up", "down"]


@dataclass(frozen=True, slots=True)
class Before:
    """Move a job to just before another waiting job of its team and priority class."""

    job_id: int


Where = MoveTo | Before

# The queue orders whose FIFO tie-break is `sched.orders.fifo_key` (which reads
# `JobSpec.order_key_s`); tiresias and multifactor rank by attained service or a score.
REORDERABLE_ORDERS = frozenset({"fifo", "priority", "fair-share"})


def move_job(
    session: Session,
    who: Principal,
    job_id: int,
    where: Where,
    now_s: float,
    *,
    profile: str = "default",
) -> Job:
    """Move a waiting job within its team's jobs of the same priority class: to the top, up
    one, down one, or just before another of them (docs/design/0013). Leads within their
    team, admins anywhere; another team's job (or target) is not found. A move that changes
    nothing (up from the top) is accepted and records nothing; positions change at the
    scheduler's next cycle."""
    job = visible_job(session, who, job_id)
    if who.role not in ("admin", "lead"):
        raise ForbiddenError("only a team lead or an admin reorders the queue")
    if not moves_apply(profile):
        raise UserError(
            f"the {profile} profile orders the queue by {resolve(profile).queue_order.name}, "
            "where the order within a priority class is not by time, so a move would change "
            "nothing; change the job's priority class instead"
        )
    if job.state != "pending":
        raise UserError(f"job {job_id} is {job.state}: only a waiting job moves in the queue")
    target = None
    if isinstance(where, Before):
        target = visible_job(session, who, where.job_id)
        if target.team_id != job.team_id:  # an admin sees both; a move stays in the team
            raise UserError(f"job {target.id} is another team's: a move stays within the team")
        if target.id == job.id:
            raise UserError(f"job {job_id} cannot move before itself")
        if target.priority_class != job.priority_class:
            raise UserError(
                f"job {target.id} is {target.priority_class} and job {job_id} "
                f"{job.priority_class}: a move stays within one priority class; change the "
                "priority class to move a job across classes"
            )
    queue = _class_queue(session, job)  # locked: two moves at once do not interleave
    if job not in queue:
        raise UserError(f"job {job_id} is {job.state}: only a waiting job moves in the queue")
    at = queue.index(job)
    rest = [j for j in queue if j is not job]
    if target is not None:
        if target not in rest:
            raise UserError(f"job {target.id} is {target.state}: move before a waiting job")
        to = rest.index(target)
        what = f"before job {target.id}"
    elif where == "top":
        to, what = 0, "to the top"
    elif where == "up":
        to, what = max(0, at - 1), "up one"
    else:
        to, what = min(len(rest), at + 1), "down one"
    moved = [*rest[:to], job, *rest[to:]]
    if moved == queue:
        return job
    places = [_lead_key(j) for j in queue]  # sorted: the queue's own order
    keys = ordered_places([str(j.id) for j in moved], places, never_ahead=False)
    group = f"{job.team.name}'s {job.priority_class} jobs"
    place = f"{at + 1} -> {to + 1} of {len(queue)}"
    # SQLite locks no rows: a job of the queue may have changed since it was read
    with checked_writes(session, f"the waiting jobs of job {job_id}'s class"):
        for j, key in zip(moved, keys, strict=True):
            if key != queue_order(j):
                j.queue_order_s = key  # its version rises: the scheduler's view refreshes
        message = f"{what} among {group} ({place}) by {who.user}"
        lifecycle.record(session, job, "moved", now_s, message)
        audit(
            session,
            who,
            "job.move",
            f"job/{job_id}",
            now_s,
            to=where if isinstance(where, str) else f"before job/{where.job_id}",
            place_from=at + 1,
            place_to=to + 1,
            of=len(queue),
        )
    return job


def moves_apply(profile: str) -> bool:
    """Whether a move changes the queue under `profile`: its queue order breaks ties within
    a priority class by `sched.orders.fifo_key`, the key a move sets."""
    return resolve(profile).queue_order.name in REORDERABLE_ORDERS


def queue_order(job: Job) -> float:
    """The job's key in its team's class queue: where a lead put it, else its queue time."""
    return job.queued_s if job.queue_order_s is None else job.queue_order_s


def _lead_key(job: Job) -> tuple[float, str]:
    return (queue_order(job), str(job.id))  # as `fifo_key` sorts it (the name is the id)


def class_places(rows: Sequence[Job]) -> dict[int, tuple[int, int]]:
    """Each waiting job's place among its team's waiting jobs of its priority class, in the
    lead's order (what a move changes; the scheduler's positions follow at its next cycle):
    job id -> (place from 1, how many)."""
    classes: dict[tuple[int, str], list[Job]] = {}
    for job in rows:
        if job.state == "pending":
            classes.setdefault((job.team_id, job.priority_class), []).append(job)
    out: dict[int, tuple[int, int]] = {}
    for queue in classes.values():
        for place, job in enumerate(sorted(queue, key=_lead_key), start=1):
            out[job.id] = (place, len(queue))
    return out


def _class_queue(session: Session, job: Job) -> list[Job]:
    """The waiting jobs of `job`'s team and priority class, in the lead's order (the order
    `in_lead_order` gives the scheduler), their rows locked until the commit."""
    rows = session.scalars(
        select(Job)
        .where(
            Job.team_id == job.team_id,
            Job.state == "pending",
            Job.priority_class == job.priority_class,
        )
        .order_by(Job.id)  # locked in id order, as a flush writes them: no deadlock
        .with_for_update()  # PostgreSQL locks the rows; SQLite has one writer anyway
        .execution_options(populate_existing=True)
    ).all()
    return sorted(rows, key=_lead_key)
