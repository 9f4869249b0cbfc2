"""Submitting, reading, cancelling, reprioritising and reordering jobs, with team isolation
and limits.

`JobRequest` is the API's input (and the portal's form): every field bounded, so
a request cannot make the server store or run something unbounded. A job is
checked against the cluster it would run on and its team's quotas before it is
accepted — an 80-GPU gang on a 64-GPU cluster, or a job on an accelerator its team
has no quota for, is refused now, not left pending forever.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    ValidationError,
    field_validator,
    model_validator,
)
from sqlalchemy import bindparam, exists, func, insert, select
from sqlalchemy.orm import Session
from sqlalchemy.orm.exc import StaleDataError

from gpufleet.cluster import Cluster
from gpufleet.control import lifecycle
from gpufleet.control.admin import (
    NAME_RE,
    AdminError,
    audit,
    check_class_allowed,
    priority_class,
    teams_spec,
)
from gpufleet.control.auth import ForbiddenError, NotFoundError, Principal
from gpufleet.control.chargeback_budget import gpu_hours_pair
from gpufleet.control.eta import RunningJob
from gpufleet.control.ledger import month_gpu_hours
from gpufleet.control.lifecycle import locked
from gpufleet.control.models import Job, JobEvent, PriorityClass, Project, Team
from gpufleet.control.quota_room import (
    QuotaRoom,
    fitting,
    quota_refusal,
    quota_room,
)
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched.orders import fifo_key
from gpufleet.specs.jobs import JobSpec, Placement
from gpufleet.specs.teams import TeamsSpec

JOB_NAME_RE = re.compile(r"^[A-Za-z0-9]([A-Za-z0-9._-]{0,61}[A-Za-z0-9])?$")
ENV_KEY_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]{0,127}$")
MAX_COMMAND_BYTES = 64 * 1024
MAX_ENV_BYTES = 64 * 1024
MAX_ENV_VARS = 256
MAX_DATA = 64
MAX_WORKERS = 4096
RESERVED_ENV = ("CUDA_VISIBLE_DEVICES", "NVIDIA_VISIBLE_DEVICES", "GPUFLEET_")
EMULATION_ENV = "GPUFLEET_EMULATE_"  # the emulated executor's failure knobs (demos, tests)


# Text a client sends that names something in the store: no NUL (PostgreSQL refuses it in
# text and answered 500) and no other control character
PRINTABLE = r"^[^\x00-\x1f\x7f]*$"
DNS_LABEL = NAME_RE.pattern  # team and project names


class DataSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=4096, pattern=PRINTABLE)
    target: str = Field(min_length=1, max_length=4096, pattern=PRINTABLE)


class JobRequest(BaseModel):
    """`POST /api/v1/jobs`: one of `gpus`, `mig_profile`, `gpu_fraction`. Numbers are
    finite: a NaN runtime was refused as "less than or equal to 31536000"."""

    model_config = ConfigDict(extra="forbid", allow_inf_nan=False)

    name: str = Field(min_length=1, max_length=63, description="Letters, digits, . _ -")
    team: str | None = Field(
        default=None, max_length=63, pattern=DNS_LABEL, description="Default: the token's team."
    )
    project: str | None = Field(default=None, max_length=63, pattern=DNS_LABEL)
    kind: Literal["training", "inference", "interactive", "batch"] = "batch"
    # counts are strict: JSON `true` was taken as 1 GPU and "2" as 2 (the portal's form turns
    # its text into numbers itself, `portal.forms`; spec files are `specs.jobs.JobSpec`)
    gpus: int | None = Field(
        default=None, ge=1, le=1024, strict=True, description="Whole GPUs per worker."
    )
    mig_profile: str | None = Field(
        default=None, max_length=32, pattern=PRINTABLE, description="e.g. 3g.40gb"
    )
    gpu_fraction: float | None = Field(default=None, gt=0, lt=1, strict=True)
    accelerator: str | list[str] | None = Field(
        default=None, description="Acceptable accelerator(s); default: any in the cluster."
    )
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS, strict=True)
    priority_class: str | None = Field(default=None, max_length=63, pattern=PRINTABLE)
    preemptible: bool = True
    checkpoint_interval_s: float | None = Field(default=None, gt=0, le=30 * 86400)
    runtime_estimate_s: float | None = Field(default=None, gt=0, le=365 * 86400)
    command: list[str] = Field(default_factory=list, max_length=4096)
    env: dict[str, str] = Field(default_factory=dict)
    data: list[DataSpec] = Field(default_factory=list, max_length=MAX_DATA)

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        if not JOB_NAME_RE.match(value):
            raise ValueError(
                "use letters, digits, '.', '_' and '-', starting and ending alphanumeric"
            )
        return value

    @field_validator("command")
    @classmethod
    def _command(cls, value: list[str]) -> list[str]:
        if sum(len(a.encode()) for a in value) > MAX_COMMAND_BYTES:
            raise ValueError(f"the command is longer than {MAX_COMMAND_BYTES // 1024} KiB")
        if any("\x00" in a for a in value):
            raise ValueError("the command contains a NUL byte")
        return value

    @field_validator("env")
    @classmethod
    def _env(cls, value: dict[str, str]) -> dict[str, str]:
        if len(value) > MAX_ENV_VARS:
            raise ValueError(f"at most {MAX_ENV_VARS} environment variables")
        size = 0
        for key, v in value.items():
            if not ENV_KEY_RE.match(key):
                raise ValueError(f"environment variable name {key!r} is not valid")
            if key.startswith(RESERVED_ENV) and not key.startswith(EMULATION_ENV):
                raise ValueError(f"{key} is set by gpufleet; remove it")
            if "\x00" in v:
                raise ValueError(f"{key} contains a NUL byte")
            size += len(key) + len(v.encode())
        if size > MAX_ENV_BYTES:
            raise ValueError(f"the environment is larger than {MAX_ENV_BYTES // 1024} KiB")
        return value

    @model_validator(mode="after")
    def _one_request(self) -> Self:
        forms = [k for k in ("gpus", "mig_profile", "gpu_fraction") if getattr(self, k)]
        if len(forms) != 1:
            got = " and ".join(forms) if forms else "none"
            raise ValueError(f"give exactly one of gpus, mig_profile or gpu_fraction (got {got})")
        if self.workers > 1 and not self.gpus:
            raise ValueError("workers > 1 needs gpus per worker (slices and fractions are single)")
        return self

    @property
    def accelerators(self) -> list[str]:
        if self.accelerator is None:
            return []
        return [self.accelerator] if isinstance(self.accelerator, str) else list(self.accelerator)


def submit(
    session: Session, who: Principal, req: JobRequest, cluster: Cluster, now_s: float
) -> Submitted:
    """Validate `req` against the caller's rights, the team and the cluster; store it pending
    (the job and its `submitted` event, in the caller's transaction).

    The hot path of a busy API: Core statements, each compiled once, and no ORM objects to
    flush or reload. One read (the team, the priority class and the project check), then
    two inserts."""
    team = _team_for(session, who, req.team, {"wanted": req.priority_class, "project": req.project})
    if who.role == "viewer":
        raise ForbiddenError("a viewer token can only read")
    if req.project is not None and team.has_projects and not team.project_listed:
        projects = session.scalars(_PROJECTS, {"team": team.id}).all()
        raise UnknownNameError(f"project of team {team.name}", req.project, projects)
    if team.class_name is None:
        known = session.scalars(select(PriorityClass.name)).all()
        wanted = req.priority_class or team.default_priority
        raise UnknownNameError("priority class", wanted, known)
    if not who.is_admin and team.cap_value is not None and team.class_value > team.cap_value:
        row, asked = session.get(Team, team.id), session.get(PriorityClass, team.class_name)
        assert row is not None
        assert asked is not None
        check_class_allowed(session, who, row, asked)  # refuses, and says who can allow it
    request = _request(req, cluster, quota_room(session, team))
    _check_budget(session, team, now_s)
    values: dict[str, Any] = {
        "name": req.name,
        "team_id": team.id,
        "project": req.project,
        "user_name": who.user,
        "kind": req.kind,
        "priority_class": team.class_name,
        "request": request,
        "command": list(req.command),
        "env": dict(req.env),
        "data": [d.model_dump() for d in req.data],
        "preemptible": req.preemptible and team.class_preemptible,
        "checkpoint_interval_s": req.checkpoint_interval_s,
        "runtime_estimate_s": req.runtime_estimate_s,
        "state": "pending",
        "attempt": 0,
        "submitted_s": now_s,
        "queued_s": now_s,
        "queue_order_s": None,
        "started_s": None,
        "finished_s": None,
        "attained_gpu_s": 0.0,
        "lost_gpu_s": 0.0,
        "last_checkpoint_s": None,
        "flavor": None,
        "placement": [],
        "reason": "queued",
        "exit_code": None,
        "crashes": 0,
        "not_before_s": None,
        "stop_deadline_s": None,
        "stop_for": None,
        "version": 0,
    }
    conn = session.connection()
    job_id = conn.execute(_INSERT_JOB, values).scalar_one()
    event = {"job_id": job_id, "at_s": now_s, "kind": "submitted", "attempt": 0}
    conn.execute(_INSERT_EVENT, {**event, "message": f"submitted by {who.user}"})
    return Submitted(job_id, team.name, values)


@dataclass(frozen=True, slots=True)
class Submitted:
    """A job just stored by `submit`: its id, its team's name and the values of its row (a
    pending job with no queue position yet, which the next cycle gives it)."""

    id: int
    team: str
    values: dict[str, Any]


# A submit's one read (one round trip, not three): the team, the priority class the job gets
# (the one asked for, else the team's default; NULL when there is none of that name), and
# whether the team lists projects and the one asked for among them
_CLASS = PriorityClass.__table__
_CAP = PriorityClass.__table__.alias("cap")
# the value of the highest class the team's leads and members may use (`admin.class_cap`)
_CAP_VALUE = (
    select(_CAP.c.value)
    .where(_CAP.c.name == func.coalesce(Team.max_priority_class, Team.default_priority))
    .correlate(Team.__table__)
    .scalar_subquery()
    .label("cap_value")
)
_TEAM = (
    select(Team.id, Team.name, Team.cohort, Team.default_priority, Team.budget_gate)
    .add_columns(
        Team.monthly_budget_gpu_h,
        _CLASS.c.name.label("class_name"),
        _CLASS.c.preemptible.label("class_preemptible"),
        _CLASS.c.value.label("class_value"),
        _CAP_VALUE,
        exists().where(Project.team_id == Team.id).label("has_projects"),
        exists()
        .where(Project.team_id == Team.id, Project.name == bindparam("project"))
        .label("project_listed"),
    )
    .select_from(
        Team.__table__.outerjoin(
            _CLASS, _CLASS.c.name == func.coalesce(bindparam("wanted"), Team.default_priority)
        )
    )
)
_TEAM_BY_ID = _TEAM.where(Team.id == bindparam("id"))
_TEAM_BY_NAME = _TEAM.where(Team.name == bindparam("name"))
_PROJECTS = select(Project.name).where(Project.team_id == bindparam("team"))
_INSERT_JOB = insert(Job).returning(Job.id)
_INSERT_EVENT = insert(JobEvent)


def _team_for(session: Session, who: Principal, name: str | None, asked: dict[str, Any]) -> Any:
    """The team a job is submitted to (a row of `_TEAM`, for the priority class and project
    `asked`): the caller's own, or one an admin names; another team's is 'not found' for
    everyone else."""
    if name is None:
        if who.team_id is None:
            raise UserError("say which team the job is for (`team`): an admin token has none")
        return session.execute(_TEAM_BY_ID, {"id": who.team_id, **asked}).one()
    team = session.execute(_TEAM_BY_NAME, {"name": name, **asked}).first()
    if team is None:
        if who.is_admin:
            raise UnknownNameError("team", name, session.scalars(select(Team.name)).all())
        raise NotFoundError(f"no team {name!r}")
    if not who.sees_team(team.id):
        raise NotFoundError(f"no team {name!r}")
    return team


def _request(req: JobRequest, cluster: Cluster, room: QuotaRoom) -> dict[str, Any]:
    """The scheduler-facing request, refused now if it can never run: no node it may use can
    hold it, or its team's quotas never let it start where one can. Anything that only
    waits (for free GPUs, for quota in use or lent) is accepted."""
    accs = req.accelerators
    have = cluster.gpus_by_accelerator
    for acc in accs:
        if acc not in have:
            raise UnknownNameError("accelerator in this cluster", acc, have)
    usable = accs or list(have)
    # the job as the scheduler sees it: its requests per accelerator, and whether spot
    # nodes take it (`framework.spot_rule`)
    job = JobSpec.model_construct(
        name=req.name,
        team=room.team,
        kind=req.kind,
        gpus=req.gpus,
        workers=req.workers,
        accelerators=accs,
        mig_profile=req.mig_profile,
        gpu_fraction=req.gpu_fraction,
        checkpoint_interval_s=req.checkpoint_interval_s,
    )
    nodes = [n for n in cluster.nodes if n.accelerator in usable]
    allowed = nodes if job.spot_ok else [n for n in nodes if n.capacity != "spot"]
    try:
        fit = fitting(req, allowed)
    except UserError:
        if len(allowed) == len(nodes):
            raise
        fit = fitting(req, nodes)  # where spot would not help either, that refusal
        why = f"cannot run: only spot nodes ({', '.join(fit)}) can hold it, and {_no_spot(req)}"
        short = quota_refusal(job, fit, room)
        raise UserError(why if short is None else f"{why}; {short}") from None
    short = quota_refusal(job, fit, room)
    if short is not None:
        raise UserError(f"cannot run: {short}")
    out: dict[str, Any] = {"workers": req.workers}
    for key in ("gpus", "mig_profile", "gpu_fraction"):
        value = getattr(req, key)
        if value:
            out[key] = value
    if accs:
        out["accelerators"] = accs
    return out


def _no_spot(req: JobRequest) -> str:
    """Why spot capacity does not take this job (`JobSpec.spot_ok`), as a clause."""
    if req.kind in ("training", "batch"):
        return f"a {req.kind} job runs on spot capacity only with checkpoint_interval_s set"
    return f"an {req.kind} job never runs on spot capacity"


def _check_budget(session: Session, team: Any, now_s: float) -> None:
    """The optional admission gate: a team over its monthly GPU-hour budget cannot submit."""
    if not team.budget_gate or team.monthly_budget_gpu_h is None:
        return

    used = month_gpu_hours(session, team.name, now_s)
    if used >= team.monthly_budget_gpu_h:
        # significant figures, as the budget alerts: a 0.04 GPU-hour budget read "used 0.4
        # of its 0"
        used_text, budget_text = gpu_hours_pair(used, team.monthly_budget_gpu_h)
        raise ForbiddenError(
            f"team {team.name} has used {used_text} of its {budget_text} GPU-hour monthly "
            "budget; ask an admin to raise it"
        )


def visible_job(session: Session, who: Principal, job_id: int) -> Job:
    """A job the caller may see, or NotFoundError (also for another team's job)."""
    job = session.get(Job, job_id)
    require_visible(who, job_id, None if job is None else job.team_id)
    assert job is not None
    return job


def require_visible(who: Principal, job_id: int, team_id: int | None) -> None:
    """NotFoundError unless job `job_id` exists (`team_id` not None) and `who` sees its team:
    another team's job answers exactly as a missing one, so existence does not leak."""
    if team_id is None or not who.sees_team(team_id):
        raise NotFoundError(f"no job {job_id}")


def list_jobs(
    session: Session,
    who: Principal,
    *,
    team: str | None = None,
    project: str | None = None,
    state: str | None = None,
    limit: int = 100,
    after_id: int | None = None,
) -> Sequence[Job]:
    q = select(Job).order_by(Job.id.desc()).limit(limit)
    if not who.is_admin:
        q = q.where(Job.team_id == who.team_id)
    if team is not None:
        q = q.join(Team).where(Team.name == team)
    if project is not None:
        q = q.where(Job.project == project)
    if state is not None:
        if state not in lifecycle.TRANSITIONS:
            raise UserError(f"state {state!r}: use one of {', '.join(lifecycle.TRANSITIONS)}")
        q = q.where(Job.state == state)
    if after_id is not None:
        q = q.where(Job.id < after_id)
    return session.scalars(q).all()


class JobChangedError(AdminError):
    """A job changed between a request's read and its write (the scheduler placed it, another
    request cancelled it): the write is refused rather than made over the change (409 from the
    API, a message from the portal), and the caller reloads and decides again."""


@contextmanager
def checked_writes(session: Session, what: str) -> Iterator[None]:
    """Write a request's changes at the end of the block, so that one over a job changed since
    it was read (`Job.version` no longer the one read: StaleDataError), at that flush or at an
    autoflush inside the block, fails here, as a message for the caller, and not at the
    route's commit, as a server error. `what`: the job(s) written, for the message."""
    try:
        yield
        session.flush()
    except StaleDataError:
        raise JobChangedError(f"{what} changed while you acted; reload and retry") from None


def cancel(session: Session, who: Principal, job_id: int, now_s: float) -> Job:
    job = visible_job(session, who, job_id)
    who.require_team_write(job.team_id)
    job = locked(session, job)  # the state decides what a cancel does: read it fresh
    if job.state in lifecycle.FINAL:
        raise UserError(f"job {job_id} is already {job.state}")
    with checked_writes(session, f"job {job_id}"):
        if job.state in ("pending", "admitted"):
            lifecycle.move(session, job, "cancelled", now_s, f"cancelled by {who.user}")
            job.finished_s = now_s
            job.placement = []
        elif job.state == "stopping":
            job.stop_for = "cancel"  # whatever stopped it, it does not come back
            lifecycle.record(session, job, "cancel", now_s, f"cancel requested by {who.user}")
        else:
            job.stop_for = "cancel"
            lifecycle.move(session, job, "stopping", now_s, f"cancel requested by {who.user}")
        if who.role in ("admin", "lead"):
            audit(session, who, "job.cancel", f"job/{job_id}", now_s)
    return job


def set_priority(session: Session, who: Principal, job_id: int, priority: str, now_s: float) -> Job:
    """Change a job's priority class: leads within their team, admins anywhere."""
    job = visible_job(session, who, job_id)
    if who.role not in ("admin", "lead"):
        raise ForbiddenError("only a team lead or an admin changes priorities")
    pc = priority_class(session, priority)
    check_class_allowed(session, who, job.team, pc)
    # read fresh and held: written over a version the scheduler has already moved past, the
    # change would reuse a version it cached its view of the job under, and never reach it
    job = locked(session, job)
    if job.state in lifecycle.FINAL:
        raise UserError(f"job {job_id} is {job.state}; its priority no longer matters")
    old = job.priority_class
    with checked_writes(session, f"job {job_id}"):
        job.priority_class = pc.name
        job.preemptible = job.preemptible and pc.preemptible
        job.queue_order_s = None  # joins its new class by queue time: a move stays in it
        lifecycle.record(session, job, "priority", now_s, f"{old} -> {pc.name} by {who.user}")
        audit(session, who, "job.priority", f"job/{job_id}", now_s, old=old, new=pc.name)
    return job


def ordered_places(
    names: Sequence[str], places: Sequence[tuple[float, str]], *, never_ahead: bool = True
) -> list[float]:
    """Ordering times for the jobs `names`, in the order wanted, that take the queue places
    `places` ((time, name) pairs, sorted, one per job): the i-th job gets the i-th place's
    time, moved later by the least float step where it would not sort behind the job before
    it, or (`never_ahead`) where its name would sort it ahead of the place (same time,
    smaller name). So the jobs come out in the order wanted and none sorts earlier than the
    place it took: against any other job the places (the team's own queue times) decide, as
    if nobody had moved. Without `never_ahead` the times are the places' own wherever they
    differ, which keeps a lead's stored order close to the queue times."""
    out: list[float] = []
    prev: tuple[float, str] | None = None
    for name, (at, held_by) in zip(names, places, strict=True):
        ahead = never_ahead and name < held_by
        key = math.nextafter(at, math.inf) if ahead else at
        if prev is not None:
            prev_at, prev_name = prev
            key = max(key, prev_at if name > prev_name else math.nextafter(prev_at, math.inf))
        out.append(key)
        prev = (key, name)
    return out


def in_lead_order(pending: Sequence[JobSpec]) -> list[JobSpec]:
    """The pending jobs as the scheduler should order them: where a lead moved a job of a
    team's class, that class's jobs take the places their own queue times give (sorted) in
    the lead's order (`order_key_s` as the store has it), with the places' times as their
    new `order_key_s`. Recomputed every cycle from the jobs still waiting, so a team never
    holds a place earlier than one of its waiting jobs' queue times: not ahead of other teams
    in any order, whoever has left the queue since. Jobs of classes nobody moved are
    returned as they are."""
    moved = {(j.team, j.priority_class) for j in pending if j.order_key_s is not None}
    if not moved:
        return list(pending)
    out = list(pending)
    groups: dict[tuple[str, str | None], list[int]] = {}
    for i, j in enumerate(pending):
        if (j.team, j.priority_class) in moved:
            groups.setdefault((j.team, j.priority_class), []).append(i)
    for members in groups.values():
        wanted = sorted(members, key=lambda i: fifo_key(pending[i]))
        places = sorted((pending[i].submitted_s, pending[i].name) for i in members)
        keys = ordered_places([pending[i].name for i in wanted], places)
        for i, key in zip(wanted, keys, strict=True):
            out[i] = pending[i].model_copy(update={"order_key_s": key})
    return out


SPEC_COLUMNS = (
    Job.id,
    Job.version,
    Job.team_id,
    Job.project,
    Job.user_name,
    Job.kind,
    Job.priority_class,
    Job.preemptible,
    Job.checkpoint_interval_s,
    Job.runtime_estimate_s,
    Job.queued_s,
    Job.queue_order_s,
    Job.attained_gpu_s,
    Job.last_checkpoint_s,
    Job.request,
    Job.state,
    Job.started_s,
    Job.placement,
    Job.not_before_s,
    Job.stop_deadline_s,  # the reconciler's view of a stopping job ends there (`_fresh_spec`)
)


def spec_of(row: Any, team: str) -> JobSpec:
    """The job as the scheduler sees it (running jobs with their placement); `row` has
    the `SPEC_COLUMNS` (an ORM `Job` has them too). Its name is the job id."""
    running = row.state in ("starting", "running", "stopping")
    data: dict[str, Any] = {
        "name": str(row.id),
        "team": team,
        "project": row.project,
        "user": row.user_name,
        "kind": row.kind,
        "priority_class": row.priority_class,
        "preemptible": row.preemptible,
        "checkpoint_interval_s": row.checkpoint_interval_s,
        "runtime_estimate_s": row.runtime_estimate_s,
        "submitted_s": row.queued_s,
        "order_key_s": row.queue_order_s,  # the lead's order; `in_lead_order` places it
        "attained_gpu_s": row.attained_gpu_s,
        "last_checkpoint_s": row.last_checkpoint_s,
        **row.request,
    }
    if running:
        data["state"] = "running"
        data["started_s"] = row.started_s
        data["placement"] = [Placement.model_validate(p) for p in row.placement]
    return JobSpec.model_validate(data)


def spec_error(exc: ValueError) -> str:
    """The first thing wrong with a row that `spec_of` refused, in one line."""
    if isinstance(exc, ValidationError) and exc.errors():
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"])
        return f"{where}: {first['msg']}" if where else str(first["msg"])
    return str(exc).splitlines()[0] if str(exc) else type(exc).__name__


LIVE_STATES = ("pending", "starting", "running", "stopping")


@dataclass(frozen=True, slots=True)
class LiveQueue:
    """The queue as the store has it now, in the forms the ETA engine takes (control/eta.py):
    running jobs with their placements, pending ones in queue order."""

    teams: TeamsSpec | None
    running: tuple[RunningJob, ...]
    pending: tuple[JobSpec, ...]


def live_queue(session: Session, cluster: Cluster, now_s: float) -> LiveQueue:
    """Read the running and pending jobs once, for a forward simulation of the queue (the
    leader's ETAs and the portal's what-if read it alike)."""

    teams = teams_spec(session)
    names = {t.id: t.name for t in session.scalars(select(Team))}
    rows = session.execute(select(*SPEC_COLUMNS).where(Job.state.in_(LIVE_STATES))).all()
    running: list[RunningJob] = []
    pending: list[JobSpec] = []
    for row in sorted(rows, key=lambda r: (r.queued_s, r.id)):
        try:
            spec = spec_of(row, names[row.team_id])
        except ValueError:
            continue  # quarantined by the reconciler (`reconciler._quarantine`)
        if row.state == "pending":
            pending.append(spec)
        elif spec.placement:
            node = cluster.node(spec.placement[0].node)
            started = spec.started_s if spec.started_s is not None else now_s
            running.append(RunningJob(spec=spec, flavor=node.accelerator, started_s=started))
    return LiveQueue(teams, tuple(running), tuple(in_lead_order(pending)))
