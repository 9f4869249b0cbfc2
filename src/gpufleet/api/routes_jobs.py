"""/api/v1/jobs: submit, list, read, cancel, reprioritise, reorder, logs, checkpoints."""

from __future__ import annotations

from typing import Annotated, Literal, Self

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response
from pydantic import BaseModel, ConfigDict, Field, Strict, model_validator

from gpufleet.api.deps import MAX_ID, Caller, Ctx, Db, JobId, NameFilter, ReadDb, UnixTime
from gpufleet.api.routing import ReleasingRoute
from gpufleet.api.schemas import AUTHED, PLAIN_TEXT, JobList, JobOut, ShortText, errors
from gpufleet.api.views import job_out, queue_index, submitted_out, visible_job_out
from gpufleet.control import jobs, lifecycle, queue_moves
from gpufleet.control.executors.base import RunKey
from gpufleet.errors import UserError

router = APIRouter(
    prefix="/api/v1", tags=["jobs"], route_class=ReleasingRoute, responses=errors(*AUTHED)
)


class JobPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    priority_class: ShortText


class JobMove(BaseModel):
    """Where a waiting job moves among its team's jobs of the same priority class."""

    model_config = ConfigDict(
        extra="forbid", json_schema_extra={"examples": [{"to": "top"}, {"before": 41}]}
    )

    to: Literal["top", "up", "down"] | None = Field(
        default=None, description="To the top of its class, or one place up or down."
    )
    before: Annotated[int, Strict(), Field(ge=1, le=MAX_ID)] | None = Field(
        default=None,
        description="Just before this job: waiting, of the same team and priority class.",
    )

    @model_validator(mode="after")
    def _one_place(self) -> Self:
        if (self.to is None) == (self.before is None):
            raise ValueError('give exactly one of "to" (top, up or down) or "before" (a job id)')
        return self

    @property
    def where(self) -> queue_moves.Where:
        if self.before is not None:
            return queue_moves.Before(self.before)
        assert self.to is not None
        return self.to


class CheckpointIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    at_s: UnixTime | None = Field(
        default=None, description="When the checkpoint was written; default and at most: now."
    )


@router.post(
    "/jobs",
    status_code=201,
    response_model=JobOut,
    responses=errors(
        400,
        403,
        404,
        409,
        422,
        e403="A viewer's token, or the team is over a gated monthly budget.",
        e404="`team` names no team the caller may see.",
        e422="Not valid; or a job that can never run on this cluster under its team's quotas "
        "(the sentence says why); nothing is stored.",
    ),
)
def submit_job(req: jobs.JobRequest, who: Caller, ctx: Ctx, s: Db) -> JobOut:
    """Queue a job for the caller's team (or `team`, which admins may name freely)."""
    now = ctx.clock()
    if not req.command and ctx.executor is not None and ctx.executor.name != "emulated":
        raise UserError(f"command: the {ctx.executor.name} executor needs a command to run")
    job = jobs.submit(s, who, req, ctx.cluster, now)
    s.commit()
    return submitted_out(job)


@router.get("/jobs", response_model=JobList)
def list_jobs(
    *,
    who: Caller,
    ctx: Ctx,
    s: Db,
    team: NameFilter = None,
    project: NameFilter = None,
    state: lifecycle.JobState | None = None,
    limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    after_id: Annotated[int | None, Query(ge=1, le=MAX_ID)] = None,
) -> JobList:
    """Newest first, within what the caller may see."""
    rows = jobs.list_jobs(
        s, who, team=team, project=project, state=state, limit=limit, after_id=after_id
    )
    now = ctx.clock()
    index = queue_index(s)
    out = [job_out(s, j, now, index=index, full=who.is_admin) for j in rows]
    return JobList(jobs=out, next_after_id=rows[-1].id if len(rows) == limit else None)


@router.get("/jobs/{job_id}", response_model=JobOut, responses=errors(404))
def get_job(job_id: JobId, who: Caller, ctx: Ctx, s: ReadDb) -> JobOut:
    """State, queue position, ETA (an estimate), reason, placement and the event history."""
    return visible_job_out(s, who, job_id, ctx.clock())


@router.post("/jobs/{job_id}/cancel", response_model=JobOut, responses=errors(403, 404, 409))
def cancel_job(job_id: JobId, who: Caller, ctx: Ctx, s: Db) -> JobOut:
    now = ctx.clock()
    job = jobs.cancel(s, who, job_id, now)
    s.commit()
    return job_out(s, job, now, full=who.is_admin)


@router.patch("/jobs/{job_id}", response_model=JobOut, responses=errors(400, 403, 404, 409))
def patch_job(job_id: JobId, patch: JobPatch, who: Caller, ctx: Ctx, s: Db) -> JobOut:
    """Change the priority class (team leads within their team, admins anywhere)."""
    now = ctx.clock()
    job = jobs.set_priority(s, who, job_id, patch.priority_class, now)
    s.commit()
    return job_out(s, job, now, full=who.is_admin)


@router.post(
    "/jobs/{job_id}/move",
    response_model=JobOut,
    responses=errors(
        400,
        403,
        404,
        409,
        422,
        e403="The token is a member's or a viewer's.",
        e404="No such job, or another team's (the job or `before`).",
        e422="Not valid; or not waiting, another priority class, or a profile whose queue "
        "order a move cannot change.",
    ),
)
def move_job(job_id: JobId, body: JobMove, who: Caller, ctx: Ctx, s: Db) -> JobOut:
    """Reorder a waiting job among its team's waiting jobs of the same priority class (team
    leads within their team, admins anywhere; audited, and an event in the job's history).

    The team's jobs keep the places in the queue their own queue times give them; the move
    decides only which of them takes which place, so the team gains nothing on other teams.
    Queue positions change at the scheduler's next cycle. A move that changes nothing (up
    from the top) is accepted and records nothing. To move a job across classes, change its
    priority class (`PATCH /jobs/{id}`)."""
    now = ctx.clock()
    job = queue_moves.move_job(s, who, job_id, body.where, now, profile=ctx.profile)
    s.commit()
    return job_out(s, job, now, full=who.is_admin)


@router.get(
    "/jobs/{job_id}/logs",
    response_class=Response,  # no media type of its own: errors stay declared as JSON
    responses={200: PLAIN_TEXT, **errors(404)},
)
def job_logs(
    job_id: JobId,
    *,
    who: Caller,
    ctx: Ctx,
    s: Db,
    tail_bytes: Annotated[int, Query(ge=1, le=4 * 1024 * 1024)] = 65536,
) -> Response:
    """The last `tail_bytes` of the current attempt's output (empty before a first start)."""
    job = jobs.visible_job(s, who, job_id)
    if ctx.executor is None or job.attempt == 0:
        return PlainTextResponse("")
    return PlainTextResponse(ctx.executor.logs(RunKey(job.id, job.attempt), tail_bytes))


@router.post(
    "/jobs/{job_id}/checkpoints", response_model=JobOut, responses=errors(400, 403, 404, 409)
)
def checkpoint(job_id: JobId, body: CheckpointIn, who: Caller, ctx: Ctx, s: Db) -> JobOut:
    """A job (with its team's token) acknowledges a checkpoint it has written."""
    job = jobs.visible_job(s, who, job_id)
    who.require_team_write(job.team_id)
    job = lifecycle.locked(s, job)  # the reconciler may be moving it: decide on the stored state
    if job.state not in ("starting", "running", "stopping"):
        raise UserError(f"job {job_id} is {job.state}: only a running job checkpoints")
    now = ctx.clock()
    at = now if body.at_s is None else min(body.at_s, now)
    with jobs.checked_writes(s, f"job {job_id}"):  # the write raises its version (`Job`)
        job.last_checkpoint_s = at
        lifecycle.record(s, job, "checkpointed", at, f"acknowledged by {who.user}")
    s.commit()
    return job_out(s, job, now, full=who.is_admin)
