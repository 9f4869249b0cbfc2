"""My jobs / queue, a job's page, and the actions on a job (cancel, change priority).

Jobs are read and changed through `control.jobs` and presented by `api.views.job_out`,
exactly as the API does: another team's job is "not found" here too, positions and
reasons come from the scheduler's last cycle, and ETAs are the forward simulation's. As
in the API, reasons and events name no other team's job or team except to an admin.
"""

from __future__ import annotations

import json
from collections import defaultdict
from dataclasses import dataclass, field

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.api.deps import JobId
from gpufleet.api.schemas import JobOut
from gpufleet.api.views import QueueIndex, job_out, queue_index
from gpufleet.control import jobs, lifecycle
from gpufleet.control.eta import HORIZON_S
from gpufleet.control.eta_refresh import EtaKind, eta_kind
from gpufleet.control.executors.base import RunKey
from gpufleet.control.models import Allocation, PriorityClass
from gpufleet.portal.holders import holdings, quota_rooms
from gpufleet.portal.queue import ahead_of
from gpufleet.portal.utilisation import job_chart
from gpufleet.portal.wait_rows import wait_rows
from gpufleet.portal.web import PREFIX, Caller, Ctx, Db, Form, local_next, render, text

router = APIRouter()
LOG_TAIL_BYTES = 16 * 1024
ACTIVE_STATES = ("admitted", "starting", "running", "stopping")
HORIZON_DAYS = round(HORIZON_S / 86_400)  # how far the ETA simulation looks


@router.get("/jobs", name="my_jobs", response_class=HTMLResponse)
def my_jobs(request: Request, me: Caller, ctx: Ctx, s: Db, mine: bool = False) -> HTMLResponse:
    """Pending jobs in queue order with position, wait, ETA, reason and who is ahead; then
    running and recently finished jobs."""
    who = me.who
    now = ctx.clock()
    index = queue_index(s)

    def keep(rows: list[JobOut]) -> list[JobOut]:
        return [j for j in rows if j.user == who.user] if mine else rows

    pending = keep(
        [
            job_out(s, j, now, index=index, full=who.is_admin)
            for j in jobs.list_jobs(s, who, state="pending", limit=1000)
        ]
    )
    pending.sort(key=lambda j: (j.queue_position.cluster if j.queue_position else 10**9, j.id))
    active = keep(
        [
            job_out(s, j, now, index=index, full=who.is_admin)
            for state in ACTIVE_STATES
            for j in jobs.list_jobs(s, who, state=state, limit=500)
        ]
    )
    recent = keep(
        [
            job_out(s, j, now, index=index, full=who.is_admin)
            for j in jobs.list_jobs(s, who, limit=200)
            if j.state in lifecycle.FINAL
        ]
    )[:30]
    return render(
        request,
        "my_jobs.html.j2",
        me,
        nav="my_jobs",
        pending=pending,
        active=active,
        recent=recent,
        ahead=ahead_of(s, index, who, [j.id for j in pending]),
        mine=mine,
        eta_at_s=index.eta_at_s if index else None,
        eta_kinds=eta_kinds(index, [j.id for j in pending]),
        horizon_days=HORIZON_DAYS,
    )


def eta_kinds(index: QueueIndex | None, job_ids: list[int]) -> dict[int, EtaKind]:
    """What the last ETA refresh said of each pending job (`eta_refresh.eta_kind`): the
    API's `eta_s` is None alike for a job that can never start, one beyond the horizon and
    one newer than the refresh, and a page must not call the first two "no estimate yet"."""
    if index is None:
        return {}
    return {j: eta_kind(index.etas, j) for j in job_ids}


@dataclass
class Held:
    """One attempt's devices, node by node, and when it held them."""

    attempt: int
    nodes: dict[str, list[str]] = field(default_factory=lambda: defaultdict(list))
    since_s: float = 0.0
    until_s: float | None = None


def _placements(s: Session, job_id: int) -> list[Held]:
    """Every attempt's placement, from the allocation rows (node -> GPUs or MIG slices)."""
    rows = s.scalars(
        select(Allocation)
        .where(Allocation.job_id == job_id)
        .order_by(Allocation.attempt, Allocation.node, Allocation.gpu, Allocation.slice_id)
    ).all()
    out: dict[int, Held] = {}
    for a in rows:
        held = out.setdefault(a.attempt, Held(a.attempt, since_s=a.allocated_s))
        if a.kind == "slice" and a.slice_id:
            what = a.slice_id.split("/", 1)[-1]  # gpuN/mig:profile#k
        elif a.kind == "share":
            what = f"GPU {a.gpu} ({a.milli / 1000:g} share)"
        else:
            what = f"GPU {a.gpu}"
        held.nodes[a.node].append(what)
        held.until_s = a.released_s
    return [out[k] for k in sorted(out, reverse=True)]


@router.get("/jobs/{job_id}", name="job_detail", response_class=HTMLResponse)
def job_detail(request: Request, job_id: JobId, me: Caller, ctx: Ctx, s: Db) -> HTMLResponse:
    """Timeline, placement per attempt, GPU-hours, logs tail, and the actions allowed."""
    who = me.who
    now = ctx.clock()
    job = jobs.visible_job(s, who, job_id)  # another team's job: NotFoundError, a 404
    index = queue_index(s)
    # a member reads no other team's job or team in reasons and events; an admin all of it
    out = job_out(s, job, now, events=True, index=index, full=who.is_admin)
    logs = ""
    if ctx.executor is not None and job.attempt > 0:
        logs = ctx.executor.logs(RunKey(job.id, job.attempt), LOG_TAIL_BYTES)
    ahead = ahead_of(s, index, who, [job.id]).get(job.id) if job.state == "pending" else None
    classes = s.scalars(select(PriorityClass).order_by(PriorityClass.value.desc())).all()
    chart = job_chart(s, job.id, job.started_s, job.finished_s or now) if job.started_s else None
    flavors = out.request.get("accelerators") or sorted(ctx.cluster.gpus_by_accelerator)
    holders = holdings(s, who, list(flavors)) if job.state == "pending" else []
    rooms = quota_rooms(s, job, out.team, ctx.cluster) if job.state == "pending" else []
    return render(
        request,
        "job_detail.html.j2",
        me,
        nav="my_jobs",
        job=out,
        held=_placements(s, job.id),
        logs=logs,
        ahead=ahead,
        classes=classes,
        staged=[(str(d.get("source", "")), str(d.get("target", ""))) for d in job.data or []],
        env_names=sorted(job.env or {}),  # names only: values may be credentials
        final=job.state in lifecycle.FINAL,
        can_cancel=me.can_write and job.state not in lifecycle.FINAL,
        busy_json=json.dumps(chart[0]).replace("<", "\\u003c") if chart else None,
        busy_rows=chart[1] if chart else [],
        holders=holders,
        rooms=rooms,
        wait_rows=wait_rows(out.waits),
        eta_at_s=index.eta_at_s if index else None,
        eta_kinds=eta_kinds(index, [job.id] if job.state == "pending" else []),
        horizon_days=HORIZON_DAYS,
    )


@router.post("/jobs/{job_id}/cancel", name="job_cancel")
def cancel(job_id: JobId, me: Caller, form: Form, ctx: Ctx, s: Db) -> Response:
    jobs.cancel(s, me.who, job_id, ctx.clock())
    s.commit()
    default = f"{PREFIX}/jobs/{job_id}"
    return RedirectResponse(local_next(text(form, "next"), default), status_code=303)


@router.post("/jobs/{job_id}/priority", name="job_priority")
def set_priority(job_id: JobId, me: Caller, form: Form, ctx: Ctx, s: Db) -> Response:
    """Change the priority class (leads in their team, admins anywhere): within a team the
    queue is ordered by priority, then submission, so this is also how a lead reorders."""
    jobs.set_priority(s, me.who, job_id, text(form, "priority_class"), ctx.clock())
    s.commit()
    default = f"{PREFIX}/jobs/{job_id}"
    return RedirectResponse(local_next(text(form, "next"), default), status_code=303)
