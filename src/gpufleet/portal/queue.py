"""Who is ahead of a pending job, within what the caller may see.

Users asked to see "the other workloads pending ... who submitted them, how much resources
each takes" (kueue#2833). The order is the scheduler's own (the last cycle's snapshot, as
the API's positions are); jobs of teams the caller may not see are counted, not named,
which the cluster position reveals anyway.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.api.views import QueueIndex
from gpufleet.control.auth import Principal
from gpufleet.control.models import Job

MAX_NAMED = 20  # jobs ahead listed by name; the rest are counted


@dataclass(frozen=True, slots=True)
class AheadJob:
    id: int
    name: str
    team: str
    user: str
    request: dict[str, object]
    priority_class: str
    queued_s: float


@dataclass(frozen=True, slots=True)
class Ahead:
    """The jobs ahead of one pending job: the nearest ones the caller may see (in queue
    order, at most `MAX_NAMED`), how many the caller may see in all, and how many jobs of
    other teams are ahead."""

    named: tuple[AheadJob, ...]
    visible: int
    other_teams: int

    @property
    def further_visible(self) -> int:
        return max(0, self.visible - len(self.named))

    @property
    def total(self) -> int:
        return self.visible + self.other_teams


def ahead_of(
    s: Session, index: QueueIndex | None, who: Principal, job_ids: Sequence[int]
) -> dict[int, Ahead]:
    """For each of `job_ids` (pending, visible to `who`): the jobs ahead of it."""
    if index is None:
        return {}
    wanted = set(job_ids)
    found: dict[int, tuple[list[int], int, int]] = {}  # job -> (nearest, visible, hidden)
    visible: list[int] = []
    hidden = 0
    for job_id, team in index.order:
        if job_id in wanted:
            found[job_id] = (visible[-MAX_NAMED:], len(visible), hidden)
        if who.is_admin or team == who.team:
            visible.append(job_id)
        else:
            hidden += 1
    ids = {j for nearest, _, _ in found.values() for j in nearest}
    rows = {j.id: j for j in s.scalars(select(Job).where(Job.id.in_(ids)))} if ids else {}
    return {
        job_id: Ahead(
            tuple(_ahead_job(rows[j]) for j in nearest if j in rows),
            n_visible,
            n_hidden,
        )
        for job_id, (nearest, n_visible, n_hidden) in found.items()
    }


def _ahead_job(job: Job) -> AheadJob:
    return AheadJob(
        id=job.id,
        name=job.name,
        team=job.team.name,
        user=job.user_name,
        request=dict(job.request),
        priority_class=job.priority_class,
        queued_s=job.queued_s,
    )
