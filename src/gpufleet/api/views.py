"""Store rows -> API bodies, including queue positions read from the last cycle's snapshot."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from dataclasses import dataclass
from threading import Lock

from sqlalchemy import select, text
from sqlalchemy.orm import Session

from gpufleet.api.schemas import EventOut, JobOut, QueuePosition
from gpufleet.control.models import Allocation, Job, JobEvent, QueueSnapshot, Team


@dataclass(frozen=True)
class QueueIndex:
    """Positions by job id, computed once per reconciler cycle (not per request)."""

    cycle: int
    at_s: float
    eta_at_s: float | None
    cluster_pos: dict[int, int]
    team_pos: dict[int, int]
    reasons: dict[str, str]
    etas: dict[str, float | None]
    order: tuple[tuple[int, str], ...]  # (job id, team), first considered first

    def first_of_team(self, team: str, n: int) -> Iterator[int]:
        return itertools.islice((j for j, t in self.order if t == team), n)


@dataclass
class _Cached:
    index: QueueIndex
    rebuilding: bool = False


_cache: dict[int, _Cached] = {}
_lock = Lock()
_HEAD = text("SELECT cycle, at_s, eta_at_s FROM queue_snapshot WHERE name = 'main'")


def queue_index(s: Session) -> QueueIndex | None:
    """The last cycle's queue, indexed once per cycle (or ETA refresh), not per request.

    Each request compares the store's snapshot head (one small query, a plain text
    statement: the hot path's cheapest); when a cycle wrote a new snapshot, the first
    request to see it rebuilds the index while concurrent ones keep answering from the
    previous one (a cycle older). Only the very first build makes others wait."""
    key = id(s.get_bind())
    cached = _cache.get(key)
    if cached is not None and cached.rebuilding:
        return cached.index
    head = s.execute(_HEAD).first()
    if head is None:
        return None
    if cached is not None and _head(cached.index) == tuple(head):
        return cached.index
    with _lock:
        cached = _cache.get(key)
        if cached is None:  # the first build: everyone waits for it
            index = _build(s)
            _cache[key] = _Cached(index)
            return index
        if cached.rebuilding or _head(cached.index) == tuple(head):
            return cached.index  # another request rebuilds it (or just did)
        cached.rebuilding = True
    try:
        index = _build(s)
    finally:
        cached.rebuilding = False
    _cache[key] = _Cached(index)
    return index


def _head(index: QueueIndex) -> tuple[int, float, float | None]:
    return (index.cycle, index.at_s, index.eta_at_s)


def _build(s: Session) -> QueueIndex:
    row = s.get(QueueSnapshot, "main")
    assert row is not None
    order = tuple((int(job_id), str(team)) for job_id, team in row.order)
    per_team: dict[str, int] = {}
    team_pos: dict[int, int] = {}
    for job_id, team in order:
        per_team[team] = per_team.get(team, 0) + 1
        team_pos[job_id] = per_team[team]
    return QueueIndex(
        row.cycle,
        row.at_s,
        row.eta_at_s,
        {job_id: i + 1 for i, (job_id, _) in enumerate(order)},
        team_pos,
        dict(row.reasons),
        dict(row.etas),
        order,
    )


_team_names: dict[tuple[int, int], str] = {}


def _team_name(s: Session, team_id: int) -> str:
    """A team's name, asked of the store once per process: teams are never renamed or
    deleted (jobs and the ledger refer to them)."""
    key = (id(s.get_bind()), team_id)
    name = _team_names.get(key)
    if name is None:
        name = s.execute(select(Team.name).where(Team.id == team_id)).scalar_one()
        _team_names[key] = name
    return name


def job_out(
    s: Session, job: Job, now_s: float, *, events: bool = False, index: QueueIndex | None = None
) -> JobOut:
    team = _team_name(s, job.team_id)
    position = None
    reason = job.reason
    eta = None
    if job.state == "pending":
        index = index or queue_index(s)
        if index is not None and job.id in index.cluster_pos:
            position = QueuePosition(team=index.team_pos[job.id], cluster=index.cluster_pos[job.id])
            reason = index.reasons.get(str(job.id), reason)
            eta = index.etas.get(str(job.id))
        if job.not_before_s is not None and job.not_before_s > now_s:
            reason = f"restart backoff: eligible in {job.not_before_s - now_s:.0f} s"
    elif job.state in ("admitted", "starting") and job.started_s is None:
        eta = now_s
    gpu_s = job.attained_gpu_s
    if job.state in ("starting", "running", "stopping"):
        rows = s.scalars(
            select(Allocation).where(Allocation.job_id == job.id, Allocation.released_s.is_(None))
        ).all()
        gpu_s += sum(r.milli / 1000 * max(0.0, now_s - r.allocated_s) for r in rows)
    out = JobOut(
        id=job.id,
        name=job.name,
        team=team,
        project=job.project,
        user=job.user_name,
        kind=job.kind,
        state=job.state,
        priority_class=job.priority_class,
        preemptible=job.preemptible,
        request=job.request,
        command=[str(c) for c in job.command],
        attempt=job.attempt,
        submitted_s=job.submitted_s,
        queued_s=job.queued_s,
        started_s=job.started_s,
        finished_s=job.finished_s,
        exit_code=job.exit_code,
        flavor=job.flavor,
        placement=job.placement,
        reason=reason,
        queue_position=position,
        eta_s=eta,
        gpu_hours=gpu_s / 3600,
        lost_gpu_hours=job.lost_gpu_s / 3600,
        last_checkpoint_s=job.last_checkpoint_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        runtime_estimate_s=job.runtime_estimate_s,
    )
    if events:
        history = s.execute(
            select(JobEvent.at_s, JobEvent.kind, JobEvent.attempt, JobEvent.message)
            .where(JobEvent.job_id == job.id)
            .order_by(JobEvent.id)
        )
        out.events = [
            EventOut(at_s=at_s, kind=kind, attempt=attempt, message=message)
            for at_s, kind, attempt, message in history
        ]
    return out
