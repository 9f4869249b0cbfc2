"""What-if: the current cluster and queue under another profile or with more GPUs.

A read (GET): it changes nothing, so a scenario is a link that can be shared. The
simulation runs only when the form is sent (`run=1`), not on every visit, and through
`portal.heavy` (a worker process, a few at a time, a budget per person); a refusal is
shown on this page.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Annotated

from fastapi import APIRouter, Depends, Query, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.api.context import AppContext
from gpufleet.control.eta_refresh import replay_queue
from gpufleet.control.models import Team
from gpufleet.errors import UserError
from gpufleet.portal.heavy import Heavy, HeavyError, heavy_of
from gpufleet.portal.web import Caller, Ctx, Db, Me, render
from gpufleet.portal.whatif import (
    MAX_ADDED_GPUS,
    Inputs,
    PortableCluster,
    Scenario,
    Visible,
    compute,
)
from gpufleet.specs.profiles import PROFILES

router = APIRouter()


def _heavy(request: Request) -> Heavy:
    return heavy_of(request)


@router.get("/whatif", name="whatif", response_class=HTMLResponse)
async def whatif(
    request: Request,
    me: Caller,
    ctx: Ctx,
    s: Db,
    heavy: Annotated[Heavy, Depends(_heavy)],
    *,
    profile: str | None = None,
    add_gpus: str = "0",
    accelerator: str | None = None,
    to_team: str | None = None,
    run_: Annotated[str | None, Query(alias="run")] = None,
) -> HTMLResponse:
    """On the heavy runner's own threads (`Heavy.call`): waiting for a run holds no request
    thread."""
    visit = _Visit(request, me, ctx, s, heavy, profile, add_gpus, accelerator, to_team, run_)
    return await heavy.call(_whatif, visit)


@dataclass(frozen=True)
class _Visit:
    request: Request
    me: Me
    ctx: AppContext
    s: Session
    heavy: Heavy
    profile: str | None
    add_gpus: str
    accelerator: str | None
    to_team: str | None
    run_: str | None


def _whatif(v: _Visit) -> HTMLResponse:
    request, me, ctx, s, heavy = v.request, v.me, v.ctx, v.s, v.heavy
    profile, add_gpus, accelerator, to_team = v.profile, v.add_gpus, v.accelerator, v.to_team
    who = me.who
    accelerators = list(ctx.cluster.gpus_by_accelerator)
    teams = [t.name for t in s.scalars(select(Team).order_by(Team.name)) if who.sees_team(t.id)]
    if to_team is None:  # first visit: the caller's own team gets them
        to_team = who.team or next(iter(teams), "")
    error = None
    result = None
    refused: HeavyError | None = None
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
    if v.run_ is not None and error is None:
        try:
            heavy.check(who.user)  # over budget: refused before the queue is read
            now = ctx.clock()
            # the queue as the live ETAs replay it: its baseline is what a job's page says
            replay = replay_queue(s, ctx.cluster, now)
            s.rollback()  # ends the read: no connection is held while the simulation runs
            inputs = Inputs(
                replay.queue,
                PortableCluster.of(ctx.cluster),
                chosen,
                now,
                ctx.profile,
                Visible(who.is_admin, who.team),
                replay.unavailable,
                dict(replay.done_s),
                dict(replay.not_before),
            )
            result = heavy.run(who.user, compute, inputs)
        except HeavyError as exc:
            refused = exc
        except UserError as exc:
            error = str(exc)
    s.close()  # nothing more to read: the connection goes back before the page is made
    response = render(
        request,
        "whatif.html.j2",
        me,
        refused.status_code if refused else 422 if error else 200,
        nav="whatif",
        scenario=chosen,
        profiles=PROFILES,
        current_profile=ctx.profile,
        accelerators=accelerators,
        teams=teams,
        max_gpus=MAX_ADDED_GPUS,
        result=result,
        error=error,
        refused=refused,
    )
    if refused:
        response.headers.update(refused.headers)
    return response
