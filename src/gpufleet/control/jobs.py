"""Submitting, reading, cancelling and reprioritising jobs, with team isolation and limits.

`JobRequest` is the API's input (and the portal's form): every field bounded, so
a request cannot make the server store or run something unbounded. A job is
checked against the cluster it would run on before it is accepted — an 80-GPU
gang on a 64-GPU cluster is refused now, not left pending forever.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, Literal, Self

from pydantic import BaseModel, ConfigDict, Field, field_validator, model_validator
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.cluster import Cluster
from gpufleet.control import lifecycle
from gpufleet.control.admin import audit, priority_class, team_by_name
from gpufleet.control.auth import ForbiddenError, NotFoundError, Principal
from gpufleet.control.eta import RunningJob
from gpufleet.control.models import Job, Team
from gpufleet.errors import UnknownNameError, UserError
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


class DataSpec(BaseModel):
    model_config = ConfigDict(extra="forbid")

    source: str = Field(min_length=1, max_length=4096)
    target: str = Field(min_length=1, max_length=4096)


class JobRequest(BaseModel):
    """`POST /api/v1/jobs`: one of `gpus`, `mig_profile`, `gpu_fraction`."""

    model_config = ConfigDict(extra="forbid")

    name: str = Field(min_length=1, max_length=63, description="Letters, digits, . _ -")
    team: str | None = Field(default=None, description="Default: the token's team.")
    project: str | None = Field(default=None, max_length=63)
    kind: Literal["training", "inference", "interactive", "batch"] = "batch"
    gpus: int | None = Field(default=None, ge=1, le=1024, description="Whole GPUs per worker.")
    mig_profile: str | None = Field(default=None, max_length=32, description="e.g. 3g.40gb")
    gpu_fraction: float | None = Field(default=None, gt=0, lt=1)
    accelerator: str | list[str] | None = Field(
        default=None, description="Acceptable accelerator(s); default: any in the cluster."
    )
    workers: int = Field(default=1, ge=1, le=MAX_WORKERS)
    priority_class: str | None = Field(default=None, max_length=63)
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
) -> Job:
    """Validate `req` against the caller's rights, the team and the cluster; store it pending."""
    team = _team_for(session, who, req.team)
    if who.role == "viewer":
        raise ForbiddenError("a viewer token can only read")
    if (
        team.projects
        and req.project is not None
        and req.project not in {p.name for p in team.projects}
    ):
        raise UnknownNameError(
            f"project of team {team.name}", req.project, [p.name for p in team.projects]
        )
    pc = priority_class(session, req.priority_class or team.default_priority)
    request = _request(req, cluster)
    _check_budget(session, team, now_s)
    job = Job(
        name=req.name,
        team_id=team.id,
        project=req.project,
        user_name=who.user,
        kind=req.kind,
        priority_class=pc.name,
        request=request,
        command=list(req.command),
        env=dict(req.env),
        data=[d.model_dump() for d in req.data],
        preemptible=req.preemptible and pc.preemptible,
        checkpoint_interval_s=req.checkpoint_interval_s,
        runtime_estimate_s=req.runtime_estimate_s,
        state="pending",
        attempt=0,
        submitted_s=now_s,
        queued_s=now_s,
        placement=[],
        reason="queued",
        version=0,
    )
    session.add(job)
    session.flush()
    lifecycle.record(session, job, "submitted", now_s, f"submitted by {who.user}")
    return job


def _team_for(session: Session, who: Principal, name: str | None) -> Team:
    if name is None:
        if who.team_id is None:
            raise UserError("say which team the job is for (`team`): an admin token has none")
        team = session.get(Team, who.team_id)
        assert team is not None
        return team
    try:
        team = team_by_name(session, name)
    except UnknownNameError:
        if who.is_admin:
            raise
        raise NotFoundError(f"no team {name!r}") from None
    if not who.sees_team(team.id):
        raise NotFoundError(f"no team {name!r}")
    return team


def _request(req: JobRequest, cluster: Cluster) -> dict[str, Any]:
    """The scheduler-facing request, checked against what the cluster has."""
    accs = req.accelerators
    have = cluster.gpus_by_accelerator
    for acc in accs:
        if acc not in have:
            raise UnknownNameError("accelerator in this cluster", acc, have)
    usable = accs or list(have)
    if req.gpus:
        per_node = max((n.gpus for n in cluster.nodes if n.accelerator in usable), default=0)
        if req.gpus > per_node:
            raise UserError(
                f"gpus: {req.gpus} per worker, but the largest node has {per_node}; "
                "use more workers with fewer GPUs each"
            )
        total = max(have[a] for a in usable)
        if req.gpus * req.workers > total:
            raise UserError(
                f"{req.gpus} x {req.workers} = {req.gpus * req.workers} GPUs, but the cluster "
                f"has at most {total} of one accelerator type"
            )
    if req.mig_profile:
        profiles = {
            p
            for n in cluster.nodes
            if n.accelerator in usable
            for layout in n.mig
            for p, _ in layout
        }
        if req.mig_profile not in profiles:
            raise UnknownNameError("MIG profile in this cluster", req.mig_profile, sorted(profiles))
    if req.gpu_fraction and not any(n.fractions for n in cluster.nodes if n.accelerator in usable):
        raise UserError("gpu_fraction: no node of this cluster shares GPUs by fraction")
    out: dict[str, Any] = {"workers": req.workers}
    for key in ("gpus", "mig_profile", "gpu_fraction"):
        value = getattr(req, key)
        if value:
            out[key] = value
    if accs:
        out["accelerators"] = accs
    return out


def _check_budget(session: Session, team: Team, now_s: float) -> None:
    """The optional admission gate: a team over its monthly GPU-hour budget cannot submit."""
    if not team.budget_gate or team.monthly_budget_gpu_h is None:
        return
    from gpufleet.control.ledger import month_gpu_hours

    used = month_gpu_hours(session, team.name, now_s)
    if used >= team.monthly_budget_gpu_h:
        raise ForbiddenError(
            f"team {team.name} has used {used:,.1f} of its {team.monthly_budget_gpu_h:,.0f} "
            "GPU-hour monthly budget; ask an admin to raise it"
        )


def visible_job(session: Session, who: Principal, job_id: int) -> Job:
    """A job the caller may see, or NotFoundError (also for another team's job)."""
    job = session.get(Job, job_id)
    if job is None or not who.sees_team(job.team_id):
        raise NotFoundError(f"no job {job_id}")
    return job


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


def cancel(session: Session, who: Principal, job_id: int, now_s: float) -> Job:
    job = visible_job(session, who, job_id)
    who.require_team_write(job.team_id)
    if job.state in lifecycle.FINAL:
        raise UserError(f"job {job_id} is already {job.state}")
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
    if job.state in lifecycle.FINAL:
        raise UserError(f"job {job_id} is {job.state}; its priority no longer matters")
    old = job.priority_class
    job.priority_class = pc.name
    job.preemptible = job.preemptible and pc.preemptible
    job.version += 1
    lifecycle.record(session, job, "priority", now_s, f"{old} -> {pc.name} by {who.user}")
    audit(session, who, "job.priority", f"job/{job_id}", now_s, old=old, new=pc.name)
    return job


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
    Job.attained_gpu_s,
    Job.last_checkpoint_s,
    Job.request,
    Job.state,
    Job.started_s,
    Job.placement,
    Job.not_before_s,
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
        "attained_gpu_s": row.attained_gpu_s,
        "last_checkpoint_s": row.last_checkpoint_s,
        **row.request,
    }
    if running:
        data["state"] = "running"
        data["started_s"] = row.started_s
        data["placement"] = [Placement.model_validate(p) for p in row.placement]
    return JobSpec.model_validate(data)


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
    from gpufleet.control.admin import teams_spec

    teams = teams_spec(session)
    names = {t.id: t.name for t in session.scalars(select(Team))}
    rows = session.execute(select(*SPEC_COLUMNS).where(Job.state.in_(LIVE_STATES))).all()
    running: list[RunningJob] = []
    pending: list[JobSpec] = []
    for row in sorted(rows, key=lambda r: (r.queued_s, r.id)):
        spec = spec_of(row, names[row.team_id])
        if row.state == "pending":
            pending.append(spec)
        elif spec.placement:
            node = cluster.node(spec.placement[0].node)
            started = spec.started_s if spec.started_s is not None else now_s
            running.append(RunningJob(spec=spec, flavor=node.accelerator, started_s=started))
    return LiveQueue(teams, tuple(running), tuple(pending))
