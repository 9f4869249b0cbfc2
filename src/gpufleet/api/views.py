"""Store rows -> API bodies, including queue positions read from the last cycle's snapshot."""

from __future__ import annotations

import itertools
import re
from collections import OrderedDict
from collections.abc import Iterator
from dataclasses import dataclass
from threading import Lock
from typing import Any
from weakref import WeakKeyDictionary

from sqlalchemy import Row, bindparam, select, text
from sqlalchemy.orm import Session

from gpufleet.api.schemas import EventOut, JobOut, JobUtilizationOut, QueuePosition, WaitOut
from gpufleet.control.auth import Principal
from gpufleet.control.eta_refresh import EtaKind, eta_kind
from gpufleet.control.jobs import Submitted, require_visible
from gpufleet.control.lifecycle import FINAL, PREEMPTED_AUDIT
from gpufleet.control.models import (
    Allocation,
    AuditEntry,
    Job,
    JobEvent,
    JobUtilization,
    QueueSnapshot,
    Team,
)
from gpufleet.control.snapshot import Queue


@dataclass(frozen=True)
class QueueIndex:
    """The last cycle's queue and the latest ETAs, decoded once per cycle (not per request).

    `queue` holds positions and reasons (`control.snapshot.Queue`), `etas` pending job id
    (text) -> expected start or None."""

    cycle: int
    at_s: float
    eta_at_s: float | None
    queue: Queue
    etas: dict[str, float | None]

    @property
    def order(self) -> Iterator[tuple[int, str]]:
        """(job id, team), first considered first."""
        return iter(self.queue)

    def first_of_team(self, team: str, n: int) -> Iterator[int]:
        return itertools.islice((j for j, t in self.queue if t == team), n)


# A pending job's reason may name other waiting jobs ("strict FIFO, job '12' ahead of it",
# "a reservation for job '12'"): the control plane's job names are ids, quoted
_QUOTED_JOB = re.compile(r"(?:job )?'(\d+)'")
_TEAMS_LISTED = re.compile(r" is not in the teams file \([^)]*\)")


def public_reason(reason: str, team: str, index: QueueIndex | None) -> str:
    """A pending job's reason as its own team may read it: another team's job id becomes
    "another team's job" (its own team's stay; they are on its queue page anyway), and no
    list of team names. Admins read the scheduler's sentence as it is."""
    if "'" not in reason and "teams file" not in reason:
        return reason

    def named(m: re.Match[str]) -> str:
        quoted = index.queue.team_of(int(m[1])) if index is not None else None
        return m[0] if quoted == team else "another team's job"

    return _TEAMS_LISTED.sub(" is not in the teams file", _QUOTED_JOB.sub(named, reason))


def public_waits(
    records: list[dict[str, Any]], team: str, index: QueueIndex | None, full: bool
) -> list[WaitOut]:
    """The reason's records as the API shows them; for a team member, a job of another
    team they name is "another team's job", as in `public_reason`."""
    out = []
    for r in records:
        numbers = {k: v for k, v in r.items() if k not in ("kind", "text")}
        text = str(r.get("text", ""))
        blocking = numbers.get("blocking_job")
        if not full:
            text = public_reason(text, team, index)
            if blocking is not None and _team_of_job(index, blocking) != team:
                blocking = numbers["blocking_job"] = "another team's job"
        needed, acc = numbers.get("needed_gpus"), numbers.get("accelerator")
        out.append(
            WaitOut(
                kind=str(r.get("kind", "other")),
                text=text,
                accelerator=acc if isinstance(acc, str) else None,
                needed_gpus=float(needed) if isinstance(needed, int | float) else None,
                blocking_job=None if blocking is None else str(blocking),
                numbers=numbers,
            )
        )
    return out


def _team_of_job(index: QueueIndex | None, name: object) -> str | None:
    """The team of a waiting job named by its id (control-plane job names are ids)."""
    if index is None or not str(name).isdigit():
        return None
    return index.queue.team_of(int(str(name)))


def attributed(s: Session, job_id: int, events: list[EventOut]) -> list[EventOut]:
    """Events with the full preemption sentences (the preemptor's id and team), for admins:
    the stored `stopping` message is the one the victim's team may read, the full one is
    in the audit log (`control.reconciler`). One query, only for a job preempted before."""
    if not any(e.kind == "stopping" and e.message.startswith("preempted") for e in events):
        return events
    rows = s.execute(
        select(AuditEntry.detail).where(
            AuditEntry.action == PREEMPTED_AUDIT, AuditEntry.target == f"job/{job_id}"
        )
    )
    full: dict[object, str] = {}
    for (d,) in rows:
        if not isinstance(d, dict) or not isinstance(d.get("message"), str):
            continue
        message, by, team = d["message"], d.get("preemptor"), d.get("preemptor_team")
        if by is not None and team and f"team {team}" not in message:
            message += f" (job {by} of team {team})"  # a priority reason names no team
        full[d.get("attempt")] = message
    out = []
    for e in events:
        message = full.get(e.attempt) if e.kind == "stopping" else None
        out.append(e.model_copy(update={"message": message}) if message else e)
    return out


@dataclass
class _Cached:
    index: QueueIndex
    rebuilding: bool = False


# per store (engine), weakly: an engine gone takes its entries along, and a new one never
# inherits entries by a reused id()
_cache: WeakKeyDictionary[Any, _Cached] = WeakKeyDictionary()
_lock = Lock()
_HEAD = text("SELECT cycle, at_s, eta_at_s FROM queue_snapshot WHERE name = 'main'")
_ASK = object()  # `queue_index`: the caller has not read the snapshot's head


def queue_index(s: Session, head: Any = _ASK) -> QueueIndex | None:
    """The last cycle's queue, indexed once per cycle (or ETA refresh), not per request.

    Each request compares the store's snapshot head (cycle, at_s, eta_at_s): read here (one
    small query, a plain text statement), or passed as `head` by a caller that read it with
    its own row (`_JOB_ROW`; all None when there is no snapshot). When a cycle wrote a new
    snapshot, the first request to see it rebuilds the index while concurrent ones keep
    answering from the previous one (a cycle older). Only the very first build makes others
    wait."""
    key = s.get_bind()
    cached = _cache.get(key)
    if cached is not None and cached.rebuilding:
        return cached.index
    if head is _ASK:
        head = s.execute(_HEAD).first()
    if head is None or head[0] is None:
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
    queue = Queue.decode(row.order, row.reasons)
    queue.cluster_pos  # noqa: B018 - built here, once, not on the first request that asks
    return QueueIndex(row.cycle, row.at_s, row.eta_at_s, queue, dict(row.etas))


# The hot path reads the job as a plain row (a Core statement, compiled once): an ORM load
# of a `Job` (identity map, instance state, attribute instrumentation) was the largest
# single cost of GET /jobs/{id} after the framework's own
# of a job, with the queue snapshot's head (`queue_index`) in the same round trip
_SNAPSHOT = QueueSnapshot.__table__
_JOB_ROW = (
    select(
        Job.__table__,
        _SNAPSHOT.c.cycle.label("snapshot_cycle"),
        _SNAPSHOT.c.at_s.label("snapshot_at_s"),
        _SNAPSHOT.c.eta_at_s.label("snapshot_eta_at_s"),
    )
    .select_from(Job.__table__.outerjoin(_SNAPSHOT, _SNAPSHOT.c.name == "main"))
    .where(Job.__table__.c.id == bindparam("id"))
)
_EVENTS = (
    select(JobEvent.at_s, JobEvent.kind, JobEvent.attempt, JobEvent.message)
    .where(JobEvent.job_id == bindparam("id"))
    .order_by(JobEvent.id)
)


class FinalJobs:
    """API bodies of finished jobs (with their events), by job id: a job in a final state
    never changes again (the lifecycle has no edge out of succeeded, failed or cancelled,
    and nothing records events for it), so its body is computed once per process. Bounded,
    least recently used first out. The team id is kept for the visibility check."""

    def __init__(self, capacity: int = 10_000) -> None:
        self.capacity = capacity
        self._stores: WeakKeyDictionary[Any, OrderedDict[int, tuple[int, JobOut]]] = (
            WeakKeyDictionary()
        )
        self._lock = Lock()

    def get(self, s: Session, job_id: int) -> tuple[int, JobOut] | None:
        with self._lock:
            bodies = self._stores.get(s.get_bind())
            if bodies is None or job_id not in bodies:
                return None
            bodies.move_to_end(job_id)
            return bodies[job_id]

    def put(self, s: Session, team_id: int, body: JobOut) -> None:
        if body.state not in FINAL or body.events is None:
            return
        with self._lock:
            bodies = self._stores.setdefault(s.get_bind(), OrderedDict())
            bodies[body.id] = (team_id, body)
            while len(bodies) > self.capacity:
                bodies.popitem(last=False)


final_jobs = FinalJobs()


def submitted_out(job: Submitted) -> JobOut:
    """POST /jobs's body, from the values just stored: a job submitted since the last cycle
    is pending with no queue position, ETA or GPU time, so nothing is read back."""
    v = job.values
    return JobOut(
        id=job.id,
        name=v["name"],
        team=job.team,
        project=v["project"],
        user=v["user_name"],
        kind=v["kind"],
        state=v["state"],
        priority_class=v["priority_class"],
        preemptible=v["preemptible"],
        request=v["request"],
        command=[str(c) for c in v["command"]],
        attempt=0,
        submitted_s=v["submitted_s"],
        queued_s=v["queued_s"],
        started_s=None,
        finished_s=None,
        exit_code=None,
        flavor=None,
        placement=[],
        reason=v["reason"],
        eta_kind="unknown",
        last_checkpoint_s=None,
        checkpoint_interval_s=v["checkpoint_interval_s"],
        runtime_estimate_s=v["runtime_estimate_s"],
    )


def visible_job_out(s: Session, who: Principal, job_id: int, now_s: float) -> JobOut:
    """GET /jobs/{id}'s body: a finished job's from `final_jobs`, else built from the store.
    Another team's job is a 404 either way. The cache holds the body a team member reads;
    an admin's (`full`) is built on top of it and never cached."""
    hit = final_jobs.get(s, job_id)
    if hit is not None:
        team_id, body = hit
        require_visible(who, job_id, team_id)
        if who.is_admin and body.events:
            return body.model_copy(update={"events": attributed(s, body.id, body.events)})
        return body
    job = s.execute(_JOB_ROW, {"id": job_id}).first()
    require_visible(who, job_id, None if job is None else job.team_id)
    assert job is not None
    index = None
    if job.state == "pending":
        head = (job.snapshot_cycle, job.snapshot_at_s, job.snapshot_eta_at_s)
        index = queue_index(s, head)
    if who.is_admin:
        return job_out(s, job, now_s, events=True, index=index, full=True)
    body = job_out(s, job, now_s, events=True, index=index)
    final_jobs.put(s, job.team_id, body)
    return body


_team_names: WeakKeyDictionary[Any, dict[int, str]] = WeakKeyDictionary()


def _team_name(s: Session, team_id: int) -> str:
    """A team's name, asked of the store once per process: teams are never renamed or
    deleted (jobs and the ledger refer to them)."""
    names = _team_names.setdefault(s.get_bind(), {})
    name = names.get(team_id)
    if name is None:
        name = s.execute(select(Team.name).where(Team.id == team_id)).scalar_one()
        names[team_id] = name
    return name


def _utilization(s: Session, job_id: int) -> JobUtilizationOut | None:
    m = s.get(JobUtilization, job_id)
    if m is None:
        return None
    return JobUtilizationOut(
        attempt=m.attempt,
        util_pct=m.last_util_pct,
        busy_share=m.busy_gpu_s / m.sampled_gpu_s if m.sampled_gpu_s > 0 else None,
        mem_used_bytes=m.mem_used_bytes,
        read_s=m.last_sample_s,
        idle_since_s=m.low_since_s,
        flagged_idle_s=m.idle_flagged_s,
    )


def job_out(
    s: Session,
    job: Job | Row[Any],
    now_s: float,
    *,
    events: bool = False,
    index: QueueIndex | None = None,
    full: bool = False,
) -> JobOut:
    """A job's API body. Reasons and events name no other team's job or team unless `full`
    (pass `who.is_admin`): the body a team member may read is the default.

    A waiting job's `eta_kind` and `eta_estimated_at_s` come from the same snapshot entry as
    its `eta_s` (`eta_refresh.eta_kind`), so a client can tell "never" and "beyond the
    horizon" from "not estimated yet", which a None `eta_s` leaves alike, and they agree
    with what the portal says of the job."""
    team = _team_name(s, job.team_id)
    position = None
    reason = job.reason
    waits: list[WaitOut] = []
    eta: float | None = None
    estimated_at: float | None = None
    kind: EtaKind | None = None  # not waiting to start: no ETA to speak of
    if job.state == "pending":
        kind = "unknown"
        index = index or queue_index(s)
        if index is not None and job.id in index.queue.cluster_pos:
            queue = index.queue
            position = QueuePosition(team=queue.team_pos[job.id], cluster=queue.cluster_pos[job.id])
            reason = queue.reason(job.id) or reason
            if not full:
                reason = public_reason(reason, team, index)
            waits = public_waits(queue.waits(job.id), team, index, full)
            eta = index.etas.get(str(job.id))
            kind = eta_kind(index.etas, job.id)
            estimated_at = None if kind == "unknown" else index.eta_at_s
        if job.not_before_s is not None and job.not_before_s > now_s:
            reason = f"restart backoff: eligible in {job.not_before_s - now_s:.0f} s"
            waits = []
    elif job.state in ("admitted", "starting") and job.started_s is None:
        eta = estimated_at = now_s  # its GPUs are chosen: it starts now, no replay needed
        kind = "at"
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
        waits=waits,
        queue_position=position,
        eta_s=eta,
        eta_kind=kind,
        eta_estimated_at_s=estimated_at,
        gpu_hours=gpu_s / 3600,
        lost_gpu_hours=job.lost_gpu_s / 3600,
        last_checkpoint_s=job.last_checkpoint_s,
        checkpoint_interval_s=job.checkpoint_interval_s,
        runtime_estimate_s=job.runtime_estimate_s,
        utilization=_utilization(s, job.id),
    )
    if events:
        history = s.execute(_EVENTS, {"id": job.id})
        out.events = [
            EventOut(at_s=at_s, kind=kind, attempt=attempt, message=message)
            for at_s, kind, attempt, message in history
        ]
        if full:
            out.events = attributed(s, job.id, out.events)
    return out
