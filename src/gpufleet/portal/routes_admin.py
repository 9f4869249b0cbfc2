"""Admin: teams, quotas, rates, nodes, tokens (create, revoke) and the audit log.

Every form goes through the admin API's own handler (`api.routes_admin`, called as a
function with the API's request models), so the portal validates, refuses and audits
exactly as `PUT /api/v1/admin/...` does. A new token is shown once, on the page that
created it, and never again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from pydantic import ValidationError
from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.api import routes_admin as api_admin
from gpufleet.api import routes_cluster
from gpufleet.api.context import AppContext
from gpufleet.api.deps import TokenId
from gpufleet.control.admin import AdminError
from gpufleet.control.auth import ROLES, NotFoundError
from gpufleet.control.models import NodeRecord, PriorityClass, Quota, Team
from gpufleet.errors import UserError
from gpufleet.portal.fmt import usd_rate, when
from gpufleet.portal.web import Caller, Ctx, Db, Form, Me, render, text
from gpufleet.quantities import parse_duration

router = APIRouter()
AUDIT_ROWS = 100
# the admin page's sections, each at its own URL (/portal/admin/<key>): one long page was
# 4,400 px of scrolling (issue 30)
SECTIONS: tuple[tuple[str, str], ...] = (
    ("teams", "Teams and quotas"),
    ("nodes", "Nodes"),
    ("rates", "Rates"),
    ("tokens", "Tokens"),
    ("audit", "Audit log"),
)


@dataclass(frozen=True)
class QuotaForm:
    """What the quota form is filled in with: the quota as it is (or a new one's defaults)."""

    team: str
    flavor: str
    exists: bool
    guaranteed_gpus: int = 0
    limit_gpus: int | None = None
    borrowing_limit_gpus: int | None = None
    lending_limit_gpus: int | None = None
    borrowing: bool = True
    lending: bool = True


def _quota_form(
    s: Session, teams: list[str], flavors: list[str], team: str | None, flavor: str | None
) -> QuotaForm | None:
    if not teams or not flavors:
        return None
    team = team if team in teams else teams[0]
    flavor = flavor if flavor in flavors else flavors[0]
    q = s.scalars(
        select(Quota)
        .join(Team, Team.id == Quota.team_id)
        .where(Team.name == team, Quota.flavor == flavor)
    ).first()
    if q is None:
        return QuotaForm(team, flavor, exists=False)
    return QuotaForm(
        team,
        flavor,
        exists=True,
        guaranteed_gpus=q.guaranteed_gpus,
        limit_gpus=q.limit_gpus,
        borrowing_limit_gpus=q.borrowing_limit_gpus,
        lending_limit_gpus=q.lending_limit_gpus,
        borrowing=q.borrowing,
        lending=q.lending,
    )


def _page(
    request: Request,
    me: Me,
    ctx: AppContext,
    s: Session,
    *,
    notice: str | None = None,
    error: str | None = None,
    issued: api_admin.TokenOut | None = None,
    status_code: int = 200,
    section: str = "teams",
    quota_of: tuple[str | None, str | None] = (None, None),
) -> HTMLResponse:
    who = me.who
    who.require("admin")
    tokens, now = api_admin.list_tokens(who, s), ctx.clock()
    teams = routes_cluster.teams(who, ctx, s)
    flavors = sorted(ctx.cluster.gpus_by_accelerator)
    return render(
        request,
        "admin.html.j2",
        me,
        status_code,
        nav="admin",
        teams=teams,
        section=section,
        sections=SECTIONS,
        quota=_quota_form(s, [t.name for t in teams], flavors, *quota_of),
        nodes=s.scalars(select(NodeRecord).order_by(NodeRecord.name)).all(),
        rates=api_admin.rates(who, ctx, s),
        tokens=[t for t in tokens if _live(t, now)],
        retired_tokens=sum(not _live(t, now) for t in tokens),
        audit=api_admin.audit_log(who, s, limit=AUDIT_ROWS),
        classes=s.scalars(select(PriorityClass).order_by(PriorityClass.value.desc())).all(),
        flavors=flavors,
        roles=ROLES,
        notice=notice,
        error=error,
        issued=issued,
    )


def _live(t: api_admin.TokenInfo, now_s: float) -> bool:
    """Listed on the page: neither revoked nor expired (those only grow in number; the API
    and `gpufleet admin token list` still list every token)."""
    return t.revoked_s is None and (t.expires_s is None or t.expires_s > now_s)


@router.get("/admin", name="admin", response_class=HTMLResponse)
def admin_page(request: Request, me: Caller, ctx: Ctx, s: Db) -> HTMLResponse:
    return _page(request, me, ctx, s)


@router.get("/admin/{section}", name="admin_section", response_class=HTMLResponse)
def admin_section(
    request: Request,
    section: str,
    me: Caller,
    ctx: Ctx,
    s: Db,
    *,
    team: str | None = None,
    flavor: str | None = None,
) -> HTMLResponse:
    if section not in dict(SECTIONS):
        raise NotFoundError(f"no admin section {section!r}: {', '.join(k for k, _ in SECTIONS)}")
    return _page(request, me, ctx, s, section=section, quota_of=(team, flavor))


def _act(
    request: Request,
    me: Me,
    ctx: AppContext,
    s: Session,
    action: Callable[[], Any],
    *,
    section: str,
    quota_of: tuple[str | None, str | None] = (None, None),
) -> HTMLResponse:
    """Run one admin action; its section again with what happened, or why it did not."""
    me.who.require("admin")

    def page(**kwargs: Any) -> HTMLResponse:
        return _page(request, me, ctx, s, section=section, quota_of=quota_of, **kwargs)

    try:
        done = action()
    except ValidationError as exc:
        s.rollback()
        problems = "; ".join(
            f"{'.'.join(str(p) for p in e['loc'])}: {e['msg']}" for e in exc.errors()
        )
        return page(error=problems, status_code=422)
    except UserError as exc:
        s.rollback()
        status = (
            409 if isinstance(exc, AdminError) else 404 if isinstance(exc, NotFoundError) else 422
        )
        return page(error=str(exc), status_code=status)
    if isinstance(done, api_admin.TokenOut):
        return page(issued=done, notice=f"Token {done.id} created.")
    return page(notice=str(done))


def _optional(form: Form, name: str) -> str | None:
    value = text(form, name)
    return value or None


def _checked(form: Form, name: str) -> bool:
    return text(form, name) in ("on", "true", "1")


@router.post("/admin/teams", name="admin_team_create", response_class=HTMLResponse)
def create_team(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    def action() -> str:
        body = api_admin.TeamIn.model_validate(
            {
                "name": text(form, "name"),
                "cohort": _optional(form, "cohort"),
                "weight": text(form, "weight") or 1.0,
                "default_priority": text(form, "default_priority") or "standard",
                "projects": [p.strip() for p in text(form, "projects").split(",") if p.strip()],
                "monthly_budget_gpu_h": _optional(form, "monthly_budget_gpu_h"),
                "budget_gate": _checked(form, "budget_gate"),
                "max_priority_class": _optional(form, "max_priority_class"),
                "idle_policy": text(form, "idle_policy") or "notify",
            }
        )
        api_admin.create_team(body, me.who, ctx, s)
        return f"Team {body.name} created."

    return _act(request, me, ctx, s, action, section="teams")


@router.post("/admin/teams/update", name="admin_team_update", response_class=HTMLResponse)
def update_team(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    def action() -> str:
        body = api_admin.TeamPatch.model_validate(
            {
                "cohort": _optional(form, "cohort"),
                "weight": _optional(form, "weight"),
                "default_priority": _optional(form, "default_priority"),
                "monthly_budget_gpu_h": _optional(form, "monthly_budget_gpu_h"),
                "clear_budget": _checked(form, "clear_budget"),
                # "(default)": back to the team's default class ('' in the API)
                "max_priority_class": {"(default)": ""}.get(
                    text(form, "max_priority_class"), _optional(form, "max_priority_class")
                ),
                "idle_policy": _optional(form, "idle_policy"),
            }
        )
        team = text(form, "team")
        api_admin.update_team(team, body, who=me.who, ctx=ctx, s=s)
        return f"Team {team} updated."

    return _act(request, me, ctx, s, action, section="teams")


@router.post("/admin/quotas", name="admin_quota", response_class=HTMLResponse)
def set_quota(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    def action() -> str:
        body = api_admin.QuotaIn.model_validate(
            {
                "guaranteed_gpus": text(form, "guaranteed_gpus") or 0,
                "limit_gpus": _optional(form, "limit_gpus"),
                "borrowing_limit_gpus": _optional(form, "borrowing_limit_gpus"),
                "lending_limit_gpus": _optional(form, "lending_limit_gpus"),
                "borrowing": _checked(form, "borrowing"),
                "lending": _checked(form, "lending"),
            }
        )
        team, flavor = text(form, "team"), text(form, "flavor")
        api_admin.set_quota(team, flavor, body=body, who=me.who, ctx=ctx, s=s)
        return f"Quota of {team} for {flavor} set to {body.guaranteed_gpus} guaranteed GPUs."

    return _act(
        request,
        me,
        ctx,
        s,
        action,
        section="teams",
        quota_of=(text(form, "team"), text(form, "flavor")),
    )


@router.post("/admin/rates", name="admin_rate", response_class=HTMLResponse)
def set_rate(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    """A new rate for a flavor, from now or from a later time (the time it takes effect);
    an earlier time only with the re-price box ticked, as `reprice=true` in the API."""

    def action() -> str:
        flavor = text(form, "flavor")
        try:
            usd = float(text(form, "usd_per_gpu_h"))
        except ValueError:
            raise UserError("rate: a number of US dollars per GPU-hour, such as 2.5") from None
        if not 0 <= usd <= 1e6:
            raise UserError("rate: between 0 and 1,000,000 USD per GPU-hour")
        stored = api_admin.set_rate(
            flavor,
            usd_per_gpu_h=usd,
            effective=_optional(form, "effective"),
            reprice=_checked(form, "reprice"),
            who=me.who,
            ctx=ctx,
            s=s,
        )
        # what was stored (whole micro-dollars), printed by the rates table's rule
        since = "now" if stored.effective_s == stored.set_s else when(stored.effective_s)
        note = " It re-prices GPU time already used." if stored.repriced else ""
        return (
            f"Rate of {stored.flavor} set to {usd_rate(stored.usd_per_gpu_h)} USD per "
            f"GPU-hour from {since}.{note}"
        )

    return _act(request, me, ctx, s, action, section="rates")


@router.post("/admin/nodes", name="admin_node", response_class=HTMLResponse)
def set_node(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    def action() -> str:
        body = api_admin.NodeIn.model_validate(
            {"state": text(form, "state"), "reason": text(form, "reason")}
        )
        node = text(form, "node")
        api_admin.set_node(node, body, who=me.who, ctx=ctx, s=s)
        return f"Node {node} is now {body.state}."

    return _act(request, me, ctx, s, action, section="nodes")


@router.post("/admin/tokens", name="admin_token_create", response_class=HTMLResponse)
def create_token(request: Request, me: Caller, form: Form, ctx: Ctx, s: Db) -> HTMLResponse:
    def action() -> api_admin.TokenOut:
        expires = text(form, "expires_in")
        expires_s = None
        if expires:
            try:
                expires_s = ctx.clock() + parse_duration(expires)
            except ValueError as exc:
                raise UserError(f"expires in: {exc}") from None
        if text(form, "role") != "admin" and not text(form, "team"):
            raise UserError(
                f"a {text(form, 'role') or 'member'} token belongs to a team: choose one"
            )
        body = api_admin.TokenIn.model_validate(
            {
                "user": text(form, "user"),
                "role": text(form, "role"),
                "team": _optional(form, "team"),
                "expires_s": expires_s,
            }
        )
        return api_admin.create_token(body, who=me.who, ctx=ctx, s=s)

    return _act(request, me, ctx, s, action, section="tokens")


@router.post("/admin/tokens/{token_id}/revoke", name="admin_token_revoke")
def revoke_token(
    request: Request, token_id: TokenId, *, me: Caller, form: Form, ctx: Ctx, s: Db
) -> HTMLResponse:
    def action() -> str:
        api_admin.revoke_token(token_id, me.who, ctx, s)
        return f"Token {token_id} revoked; its portal sessions end with it."

    return _act(request, me, ctx, s, action, section="tokens")
