"""/api/v1/admin: teams, quotas, rates, tokens and the audit log (admins only)."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Path, Query
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy import select

from gpufleet.api.deps import Caller, Ctx, Db, TokenId, UnixTime
from gpufleet.api.routes_cluster import parse_time
from gpufleet.api.routing import ReleasingRoute
from gpufleet.api.schemas import (
    AUTHED,
    NAME_PATTERN,
    TEXT_PATTERN,
    Name,
    ShortText,
    errors,
)
from gpufleet.control import admin
from gpufleet.control.auth import ROLES
from gpufleet.control.models import AuditEntry, FlavorRate, Token

router = APIRouter(
    prefix="/api/v1/admin",
    tags=["admin"],
    route_class=ReleasingRoute,
    responses=errors(*AUTHED, 403, e403="The token is not an admin's."),
)
WRITE = errors(400, 409)  # a JSON body that may not be UTF-8; a conflict with the state

TeamName = Annotated[str, Path(max_length=63, pattern=NAME_PATTERN, description="A team.")]
Flavor = Annotated[str, Path(max_length=63, pattern=TEXT_PATTERN, description="An accelerator.")]
NodeName = Annotated[str, Path(max_length=255, pattern=TEXT_PATTERN, description="A node.")]
# a budget is finite: an infinite one (JSON parsers read `Infinity`) failed every team read
BudgetGpuH = Annotated[float, Field(ge=0, allow_inf_nan=False)]


class TeamIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    name: Name
    cohort: Name | None = None
    weight: float = Field(default=1.0, gt=0, le=1e6)
    default_priority: ShortText = "standard"
    projects: list[Name] = Field(default_factory=list, max_length=1000)
    monthly_budget_gpu_h: BudgetGpuH | None = None
    budget_gate: bool = False
    max_priority_class: ShortText | None = Field(
        default=None,
        description="Highest class its leads and members may use (default: default_priority).",
    )
    idle_policy: Literal["off", "notify", "reclaim"] = Field(
        default="notify", description="What happens to a job flagged idle: off, notify, reclaim."
    )


class TeamPatch(BaseModel):
    model_config = ConfigDict(extra="forbid")

    cohort: (
        Annotated[str, Field(max_length=63, json_schema_extra={"pattern": f"^$|{NAME_PATTERN}"})]
        | None
    ) = Field(default=None, description="'' leaves the cohort.")
    weight: float | None = Field(default=None, gt=0, le=1e6)
    default_priority: ShortText | None = None
    monthly_budget_gpu_h: BudgetGpuH | None = None
    budget_gate: bool | None = None
    clear_budget: bool = False
    max_priority_class: str | None = Field(
        default=None, max_length=63, description="'' goes back to the team's default class."
    )
    idle_policy: Literal["off", "notify", "reclaim"] | None = None


class QuotaIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    guaranteed_gpus: int = Field(ge=0, le=10_000_000)
    limit_gpus: int | None = Field(default=None, ge=0, le=10_000_000)
    borrowing_limit_gpus: int | None = Field(default=None, ge=0, le=10_000_000)
    lending_limit_gpus: int | None = Field(default=None, ge=0, le=10_000_000)
    borrowing: bool = True
    lending: bool = True


class NodeIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    state: Literal["up", "down", "drain"]
    reason: str = Field(default="", max_length=1000, pattern=TEXT_PATTERN)


class TokenIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    user: Name
    role: str = Field(json_schema_extra={"enum": list(ROLES)})  # else 409, from the core
    team: Name | None = Field(default=None, description="Required but for an admin's token.")
    expires_s: UnixTime | None = Field(default=None, description="Unix time; default: never.")


class TokenOut(BaseModel):
    id: int
    token: str = Field(description="Shown once; store it now.")
    user: str
    role: str
    team: str | None
    expires_s: float | None


class TokenInfo(BaseModel):
    id: int
    prefix: str
    user: str
    role: str
    team: str | None
    created_s: float
    expires_s: float | None
    last_used_s: float | None
    revoked_s: float | None


class TeamCreated(BaseModel):
    name: str


class TeamSettings(BaseModel):
    name: str
    cohort: str | None
    weight: float
    default_priority: str
    max_priority_class: str | None
    idle_policy: str
    monthly_budget_gpu_h: float | None
    budget_gate: bool


class QuotaSet(BaseModel):
    team: str
    flavor: str
    guaranteed_gpus: int


class RateSet(BaseModel):
    """A rate as stored: what reports will price with, not the number that was sent."""

    flavor: str
    usd_per_gpu_h: float = Field(description="As stored: whole micro-dollars per GPU-hour.")
    effective_s: float = Field(description="In force from this time until the next rate.")
    set_s: float
    repriced: bool = Field(description="Set for a time already past (`reprice=true`).")


class RateOut(RateSet):
    set_by: str
    in_force: bool = Field(description="The flavor's rate now.")


class RatesOut(BaseModel):
    current: dict[str, float] = Field(description="USD per GPU-hour by flavor, in force now.")
    history: list[RateOut] = Field(
        description="Every rate by flavor, in the order they take effect (future ones too)."
    )


class NodeSet(BaseModel):
    node: str
    state: Literal["up", "down", "drain"]


class AuditOut(BaseModel):
    id: int
    at_s: float
    actor: str
    role: str
    action: str
    target: str
    detail: dict[str, Any]


@router.post("/teams", status_code=201, response_model=TeamCreated, responses=WRITE)
def create_team(body: TeamIn, who: Caller, ctx: Ctx, s: Db) -> TeamCreated:
    who.require("admin")
    admin.create_team(s, who, body.name, ctx.clock(), **body.model_dump(exclude={"name"}))
    s.commit()
    return TeamCreated(name=body.name)


@router.patch("/teams/{team}", response_model=TeamSettings, responses=WRITE)
def update_team(team: TeamName, body: TeamPatch, *, who: Caller, ctx: Ctx, s: Db) -> TeamSettings:
    """Change a team's cohort, weight, default priority, budget or budget gate."""
    who.require("admin")
    row = admin.update_team(s, who, team, ctx.clock(), **body.model_dump())
    s.commit()
    return TeamSettings(
        name=row.name,
        cohort=row.cohort,
        weight=row.weight,
        default_priority=row.default_priority,
        max_priority_class=row.max_priority_class,
        idle_policy=row.idle_policy,
        monthly_budget_gpu_h=row.monthly_budget_gpu_h,
        budget_gate=row.budget_gate,
    )


@router.get("/rates", response_model=RatesOut)
def rates(who: Caller, ctx: Ctx, s: Db) -> RatesOut:
    """Chargeback rates: those in force now (USD per GPU-hour by flavor) and their history,
    each with the time it takes effect, when and by whom it was set, and whether it
    re-priced GPU time already used."""
    who.require("admin")
    now = ctx.clock()
    current = admin.rates_in_force(s, now)
    rows = s.scalars(
        select(FlavorRate).order_by(FlavorRate.flavor, FlavorRate.effective_s, FlavorRate.id)
    ).all()
    in_force: dict[str, int] = {}  # flavor -> id of its row in force now
    for r in rows:
        if r.effective_s <= now:
            in_force[r.flavor] = r.id
    return RatesOut(
        current={f: micro / 1_000_000 for f, micro in sorted(current.items())},
        history=[
            RateOut(
                flavor=r.flavor,
                usd_per_gpu_h=r.usd_micro_per_gpu_h / 1_000_000,
                effective_s=r.effective_s,
                set_s=r.set_s,
                set_by=r.set_by,
                repriced=r.repriced,
                in_force=in_force.get(r.flavor) == r.id,
            )
            for r in rows
        ],
    )


@router.put("/teams/{team}/quotas/{flavor}", response_model=QuotaSet, responses=WRITE)
def set_quota(
    team: TeamName, flavor: Flavor, *, body: QuotaIn, who: Caller, ctx: Ctx, s: Db
) -> QuotaSet:
    who.require("admin")
    q = admin.set_quota(s, who, team, flavor, ctx.clock(), **body.model_dump())
    s.commit()
    return QuotaSet(team=team, flavor=q.flavor, guaranteed_gpus=q.guaranteed_gpus)


@router.put("/rates/{flavor}", response_model=RateSet, responses=errors(409))
def set_rate(
    flavor: Flavor,
    *,
    usd_per_gpu_h: Annotated[float, Query(ge=0, le=admin.MAX_RATE_USD_PER_GPU_H)],
    effective: Annotated[
        str | None,
        Query(
            max_length=64,
            description="When it takes effect: Unix seconds or ISO 8601 (default: now). A "
            "time already past needs reprice=true.",
        ),
    ] = None,
    reprice: Annotated[
        bool,
        Query(description="Let `effective` be in the past: re-prices GPU time already used."),
    ] = False,
    who: Caller,
    ctx: Ctx,
    s: Db,
) -> RateSet:
    """Add a rate to the flavor's history (the rates before it keep pricing the time they
    were in force); the answer is the rate as stored, in whole micro-dollars."""
    who.require("admin")
    at_s = None if effective is None else parse_time(effective, 0.0, "effective")
    row = admin.set_rate(
        s, who, flavor, usd_per_gpu_h, ctx.clock(), effective_s=at_s, reprice=reprice
    )
    s.commit()
    return RateSet(
        flavor=row.flavor,
        usd_per_gpu_h=row.usd_micro_per_gpu_h / 1_000_000,
        effective_s=row.effective_s,
        set_s=row.set_s,
        repriced=row.repriced,
    )


@router.put("/nodes/{node}", response_model=NodeSet, responses=WRITE)
def set_node(node: NodeName, body: NodeIn, *, who: Caller, ctx: Ctx, s: Db) -> NodeSet:
    """Mark a node down (its jobs are stopped and requeued elsewhere), drained (running jobs
    finish, nothing new lands) or up again."""
    who.require("admin")
    admin.set_node_state(s, who, node, body.state, reason=body.reason, now_s=ctx.clock())
    s.commit()
    return NodeSet(node=node, state=body.state)


@router.post("/tokens", status_code=201, response_model=TokenOut, responses=WRITE)
def create_token(body: TokenIn, *, who: Caller, ctx: Ctx, s: Db) -> TokenOut:
    who.require("admin")
    issued = admin.create_token(
        s,
        who,
        ctx.clock(),
        role=body.role,
        team=body.team,
        user=body.user,
        expires_s=body.expires_s,
    )
    s.commit()
    return TokenOut(
        id=issued.token_id,
        token=issued.token,
        user=issued.user,
        role=issued.role,
        team=issued.team,
        expires_s=issued.expires_s,
    )


@router.get("/tokens", response_model=list[TokenInfo])
def list_tokens(who: Caller, s: Db) -> list[TokenInfo]:
    who.require("admin")
    return [
        TokenInfo(
            id=t.id,
            prefix=t.prefix,
            user=t.user.name,
            role=t.role,
            team=t.team.name if t.team else None,
            created_s=t.created_s,
            expires_s=t.expires_s,
            last_used_s=t.last_used_s,
            revoked_s=t.revoked_s,
        )
        for t in s.scalars(select(Token).order_by(Token.id))
    ]


@router.delete("/tokens/{token_id}", status_code=204, responses=errors(404, 409))
def revoke_token(token_id: TokenId, who: Caller, ctx: Ctx, s: Db) -> None:
    who.require("admin")
    admin.revoke_token(s, who, token_id, ctx.clock())
    s.commit()
    ctx.principals.forget(token_id)  # refused from the next request, not after the cache's TTL


@router.get("/audit", response_model=list[AuditOut])
def audit_log(
    who: Caller, s: Db, limit: Annotated[int, Query(ge=1, le=1000)] = 100
) -> list[AuditOut]:
    who.require("admin")
    rows = s.scalars(select(AuditEntry).order_by(AuditEntry.id.desc()).limit(limit))
    return [
        AuditOut(
            id=a.id,
            at_s=a.at_s,
            actor=a.actor,
            role=a.role,
            action=a.action,
            target=a.target,
            detail=a.detail,
        )
        for a in rows
    ]
