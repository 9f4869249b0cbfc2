"""What-if: the current cluster and queue under another profile or with more GPUs.

A read (GET): it changes nothing, so a scenario is a link that can be shared. The
simulation runs only when the form is sent (`run=1`), not on every visit.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import select

from gpufleet.control.jobs import live_queue
from gpufleet.control.models import Team
from gpufleet.errors import UserError
from gpufleet.portal.web import Caller, Ctx, Db, render
from gpufleet.portal.whatif import MAX_ADDED_GPUS, Scenario, run
from gpufleet.sched.registry import PROFILES

router = APIRouter()


@router.get("/whatif", name="whatif", response_class=HTMLResponse)
def whatif(
    request: Request,
    me: Caller,
    ctx: Ctx,
    s: Db,
    *,
    profile: str | None = None,
    add_gpus: str = "0",
    accelerator: str | None = None,
    to_team: str | None = None,
    run_: Annotated[str | None, Query(alias="run")] = None,
) -> HTMLResponse:
    who = me.who
    accelerators = list(ctx.cluster.gpus_by_accelerator)
    teams = [t.name for t in s.scalars(select(Team).order_by(Team.name)) if who.sees_team(t.id)]
    if to_team is None:  # first visit: the caller's own team gets them
        to_team = who.team or next(iter(teams), "")
    error = None
    result = None
    try:
        n = int(add_gpus or "0")
    except ValueError:
        n = 0
        error = "GPUs to add: a whole number"
    chosen = Scenario(
        profile=profile or ctx.profile,
        add_gpus=n,
        accelerator=accelerator if accelerator in accelerators else next(iter(accelerators), None),
        to_team=to_team if to_team in teams else None,
    )
    if run_ is not None and error is None:
        try:
            now = ctx.clock()
            result = run(
                live_queue(s, ctx.cluster, now),
                ctx.cluster,
                chosen,
                now_s=now,
                baseline_profile=ctx.profile,
                visible=lambda team: who.is_admin or team == who.team,
            )
        except UserError as exc:
            error = str(exc)
    return render(
        request,
        "whatif.html.j2",
        me,
        422 if error else 200,
        nav="whatif",
        scenario=chosen,
        profiles=PROFILES,
        current_profile=ctx.profile,
        accelerators=accelerators,
        teams=teams,
        max_gpus=MAX_ADDED_GPUS,
        result=result,
        error=error,
    )
