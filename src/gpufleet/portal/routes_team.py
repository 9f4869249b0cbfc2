"""Team: quota per flavor (guaranteed, used, borrowed, lent, limits), fair share and why,
the month's GPU-hours against the budget, and the team's queue, which leads reorder.

Reordering is done with priority classes (`jobs.set_priority`): within a team the
scheduler orders pending jobs by priority class, then by submission time, so "raise"
moves a job one class up, ahead of every job of the team in a lower class. There is no
per-team order field: moving a job past another of the same class needs a higher class.
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import select

from gpufleet.api import routes_cluster
from gpufleet.api.views import job_out, queue_index
from gpufleet.control import jobs
from gpufleet.control.auth import NotFoundError
from gpufleet.control.models import PriorityClass
from gpufleet.portal.explain import fair_share_why
from gpufleet.portal.web import Caller, Ctx, Db, render

router = APIRouter()


@router.get("/team", name="team", response_class=HTMLResponse)
def team_page(
    request: Request, me: Caller, ctx: Ctx, s: Db, team: str | None = None
) -> HTMLResponse:
    who = me.who
    visible = routes_cluster.teams(who, ctx, s)  # what the API's /teams shows this caller
    name = team or who.team or (visible[0].name if visible else None)
    found = next((t for t in visible if t.name == name), None)
    if found is None:
        if visible or team:
            raise NotFoundError(f"no team {name!r}")  # another team's page: not found
        return render(request, "team.html.j2", me, nav="team", team=None, all_teams=[])
    now = ctx.clock()
    index = queue_index(s)
    pending = [
        job_out(s, j, now, index=index)
        for j in jobs.list_jobs(s, who, team=found.name, state="pending", limit=1000)
    ]
    pending.sort(key=lambda j: (j.queue_position.team if j.queue_position else 10**9, j.id))
    classes = s.scalars(select(PriorityClass).order_by(PriorityClass.value.desc())).all()
    names = [c.name for c in classes]
    return render(
        request,
        "team.html.j2",
        me,
        nav="team",
        team=found,
        all_teams=[t.name for t in visible],
        why=fair_share_why(found, ctx.cluster.gpus_by_accelerator, ctx.profile),
        profile=ctx.profile,
        pending=pending,
        classes=classes,
        higher={n: names[i - 1] for i, n in enumerate(names) if i > 0},
        lower={n: names[i + 1] for i, n in enumerate(names) if i + 1 < len(names)},
        can_reorder=who.is_admin or (who.role == "lead" and who.team == found.name),
    )
