"""Team: quota per flavor (guaranteed, used, borrowed, lent, limits), fair share and why,
the month's GPU-hours against the budget, and the team's queue, which leads reorder.

Leads reorder two ways. *Raise* and *Lower* change a job's priority class
(`jobs.set_priority`): within a team the scheduler orders waiting jobs by class first.
*Top*, *Up* and *Down* move a job among the team's jobs of its own class
(`queue_moves.move_job`, docs/design/0013): the team's jobs keep their places in the queue, the
lead decides which job takes which. Both take effect at the scheduler's next cycle, so the
page says so after a move; the positions it shows are always the API's (the last cycle's),
since only the scheduler knows the order it will use (guarantee-first puts a team's jobs
within its guarantee ahead of those that would borrow, whatever the lead's order).
"""

from __future__ import annotations

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse, RedirectResponse, Response
from sqlalchemy import select

from gpufleet.api import routes_cluster
from gpufleet.api.deps import MAX_ID, JobId
from gpufleet.api.views import job_out, queue_index
from gpufleet.control import jobs, queue_moves
from gpufleet.control.auth import NotFoundError
from gpufleet.control.chargeback_budget import gpu_hours_pair
from gpufleet.control.models import PriorityClass
from gpufleet.errors import UserError
from gpufleet.portal import fmt
from gpufleet.portal.explain import fair_share_why
from gpufleet.portal.web import PREFIX, Caller, Ctx, Db, Form, local_next, render, text

router = APIRouter()
MOVES: dict[str, queue_moves.MoveTo] = {"top": "top", "up": "up", "down": "down"}


@router.get("/team", name="team", response_class=HTMLResponse)
def team_page(
    request: Request,
    me: Caller,
    ctx: Ctx,
    s: Db,
    *,
    team: str | None = None,
    moved: int | None = None,
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
    rows = jobs.list_jobs(s, who, team=found.name, state="pending", limit=1000)
    # the positions are the API's (`job_out`, the last cycle's snapshot), never recomputed
    # here: the scheduler's order is not the lead's order (jobs within the team's guarantee go
    # first), so a page that guessed it showed a job first with "4 jobs ahead of you"
    pending = [job_out(s, j, now, index=index, full=who.is_admin) for j in rows]
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
        can_move=queue_moves.moves_apply(ctx.profile),
        places=queue_moves.class_places(rows),
        moved=next((j for j in pending if j.id == moved), None),
        month=_month_text(found.month_gpu_h, found.monthly_budget_gpu_h),
    )


def _month_text(used_gpu_h: float, budget_gpu_h: float | None) -> tuple[str, str | None]:
    """This month's GPU-hours and the budget as the budget alert beside them writes them
    (`gpu_hours_pair`): to two decimals the page read "0.04 GPU-hours of a 0.04 GPU-hour
    budget" above "used 87% (0.035 GPU-hours)", and 999.996 of 1,000 read "1,000.00"."""
    if budget_gpu_h is None:
        return fmt.hours(used_gpu_h), None
    return gpu_hours_pair(used_gpu_h, budget_gpu_h)


@router.post("/jobs/{job_id}/move", name="job_move")
def move(job_id: JobId, me: Caller, form: Form, ctx: Ctx, s: Db) -> Response:
    """Top, Up, Down (`to`) or before another job (`before`), within the job's class; back to
    `next` (the team page) with `moved` set, so the page says the move waits for a cycle.
    An htmx request gets the same redirect and swaps the queue from the page it leads to."""
    to, before = text(form, "to"), text(form, "before")
    where: queue_moves.Where
    if to in MOVES and not before:
        where = MOVES[to]
    elif before.isdigit() and not to and 1 <= int(before) <= MAX_ID:
        where = queue_moves.Before(int(before))
    else:
        raise UserError("say where the job moves: to the top, up, down, or before a job")
    queue_moves.move_job(s, me.who, job_id, where, ctx.clock(), profile=ctx.profile)
    s.commit()
    back = local_next(text(form, "next"), f"{PREFIX}/team")
    sep = "&" if "?" in back else "?"
    return RedirectResponse(f"{back}{sep}moved={job_id}", status_code=303)
