"""Administration: the first admin, teams, quotas, priority classes, tokens — each audited.

One implementation serves the `gpufleet admin` commands and the admin API, so
both validate and audit alike. Every function takes the acting `Principal`;
the CLI acts as a local admin (`cli_principal`), since whoever can run it on the
server can read the database anyway.
"""

from __future__ import annotations

import getpass
import math
import re
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import ROUND_HALF_UP, Decimal
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.control.auth import ROLES, ForbiddenError, NotFoundError, Principal, Role, new_token
from gpufleet.control.chargeback_report import RateChange
from gpufleet.control.models import (
    MAX_UNIX_S,
    AuditEntry,
    FlavorRate,
    NodeRecord,
    PriorityClass,
    Project,
    Quota,
    Team,
    Token,
    User,
)
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.specs.load import validate
from gpufleet.specs.teams import DEFAULT_PRIORITY_CLASSES, TeamsSpec
from gpufleet.specs.teams import Quota as QuotaSpec

MAX_RATE_USD_PER_GPU_H = 1e6  # 1e12 micro-dollars: far inside the 64-bit column
NAME_RE = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


class AdminError(UserError):
    """An admin request that cannot be done as asked (the message says what to change)."""


def check_name(kind: str, name: str) -> str:
    if not NAME_RE.match(name):
        raise AdminError(
            f"{kind} name {name!r}: use 1-63 lower-case letters, digits and '-', "
            "starting and ending with a letter or digit (a Kubernetes DNS label)"
        )
    return name


def cli_principal() -> Principal:
    """The local operator running `gpufleet admin ...` on the server."""
    try:
        who = getpass.getuser()
    except (KeyError, OSError):  # no passwd entry (containers)
        who = "operator"
    return Principal(user=f"cli:{who}"[:63], role="admin", team_id=None, team=None, token_id=0)


def audit(
    session: Session, actor: Principal, action: str, target: str, now_s: float, **detail: Any
) -> None:
    """Append one audit record (tokens themselves are never in `detail`)."""
    session.add(
        AuditEntry(
            at_s=now_s,
            actor=actor.user,
            role=actor.role,
            action=action,
            target=target,
            detail=detail,
        )
    )


@dataclass(frozen=True)
class IssuedToken:
    token: str  # shown once
    token_id: int
    user: str
    role: Role
    team: str | None
    expires_s: float | None


def init(session: Session, now_s: float, user: str = "admin") -> IssuedToken:
    """Create the default priority classes and the first admin; refuse if an admin exists."""
    check_name("user", user)
    exists = session.scalar(select(func.count()).select_from(Token).where(Token.role == "admin"))
    if exists:
        raise AdminError(
            "the store already has an admin; create more tokens with "
            "`gpufleet admin token create --role admin`"
        )
    if not session.scalar(select(func.count()).select_from(PriorityClass)):
        for pc in DEFAULT_PRIORITY_CLASSES:
            session.add(PriorityClass(name=pc.name, value=pc.value, preemptible=pc.preemptible))
    actor = cli_principal()
    issued = _issue(session, actor, user=user, role="admin", team=None, expires_s=None, now_s=now_s)
    audit(session, actor, "admin.init", f"user/{user}", now_s)
    return issued


def team_by_name(session: Session, name: str) -> Team:
    team = session.scalar(select(Team).where(Team.name == name))
    if team is None:
        known = session.scalars(select(Team.name)).all()
        raise UnknownNameError("team", name, known)
    return team


def check_budget(budget_gpu_h: float) -> None:
    """A monthly budget is a finite, non-negative number of GPU-hours: an infinite one was
    stored, and every later team listing and portal page failed (422) comparing use with it."""
    if not math.isfinite(budget_gpu_h):
        raise AdminError(f"a monthly budget is a finite number of GPU-hours, not {budget_gpu_h}")
    if budget_gpu_h < 0:
        raise AdminError("a monthly budget cannot be negative")


def create_team(
    session: Session,
    actor: Principal,
    name: str,
    now_s: float,
    *,
    cohort: str | None = None,
    weight: float = 1.0,
    default_priority: str = "standard",
    projects: Sequence[str] = (),
    monthly_budget_gpu_h: float | None = None,
    budget_gate: bool = False,
    max_priority_class: str | None = None,
    idle_policy: str = "notify",
) -> Team:
    actor.require("admin")
    check_name("team", name)
    if cohort is not None:
        check_name("cohort", cohort)
    if not weight > 0:
        raise AdminError(f"fair-share weight must be > 0, got {weight}")
    if monthly_budget_gpu_h is not None:
        check_budget(monthly_budget_gpu_h)
    if session.scalar(select(Team).where(Team.name == name)) is not None:
        raise AdminError(f"team {name!r} exists already")
    _check_idle_policy(idle_policy)
    default_class = priority_class(session, default_priority)
    if max_priority_class is not None:
        _check_cap_order(default_class, priority_class(session, max_priority_class))
    team = Team(
        name=name,
        cohort=cohort,
        weight=weight,
        default_priority=default_priority,
        max_priority_class=max_priority_class,
        idle_policy=idle_policy,
        monthly_budget_gpu_h=monthly_budget_gpu_h,
        budget_gate=budget_gate,
        created_s=now_s,
    )
    team.projects = [Project(name=check_name("project", p)) for p in dict.fromkeys(projects)]
    session.add(team)
    audit(session, actor, "team.create", f"team/{name}", now_s, cohort=cohort, weight=weight)
    return team


def update_team(
    session: Session,
    actor: Principal,
    name: str,
    now_s: float,
    *,
    cohort: str | None = None,
    weight: float | None = None,
    default_priority: str | None = None,
    monthly_budget_gpu_h: float | None = None,
    budget_gate: bool | None = None,
    clear_budget: bool = False,
    max_priority_class: str | None = None,
    idle_policy: str | None = None,
) -> Team:
    """Change a team's settings; fields left None stay as they are (`max_priority_class`
    "" goes back to the default: the team's default class)."""
    actor.require("admin")
    team = team_by_name(session, name)
    changes: dict[str, Any] = {}
    if cohort is not None:
        team.cohort = check_name("cohort", cohort) if cohort else None
        changes["cohort"] = team.cohort
    if weight is not None:
        if not weight > 0:
            raise AdminError(f"fair-share weight must be > 0, got {weight}")
        team.weight = changes["weight"] = weight
    if default_priority is not None:
        team.default_priority = changes["default_priority"] = priority_class(
            session, default_priority
        ).name
    if max_priority_class is not None:
        cap = priority_class(session, max_priority_class).name if max_priority_class else None
        team.max_priority_class = changes["max_priority_class"] = cap
    if idle_policy is not None:
        team.idle_policy = changes["idle_policy"] = _check_idle_policy(idle_policy)
    if team.max_priority_class is not None:
        _check_cap_order(
            priority_class(session, team.default_priority),
            priority_class(session, team.max_priority_class),
        )
    if clear_budget:
        team.monthly_budget_gpu_h = changes["monthly_budget_gpu_h"] = None
    elif monthly_budget_gpu_h is not None:
        check_budget(monthly_budget_gpu_h)
        team.monthly_budget_gpu_h = changes["monthly_budget_gpu_h"] = monthly_budget_gpu_h
    if budget_gate is not None:
        team.budget_gate = changes["budget_gate"] = budget_gate
    audit(session, actor, "team.update", f"team/{name}", now_s, **changes)
    return team


def set_quota(
    session: Session,
    actor: Principal,
    team: str,
    flavor: str,
    now_s: float,
    *,
    guaranteed_gpus: int,
    limit_gpus: int | None = None,
    borrowing_limit_gpus: int | None = None,
    lending_limit_gpus: int | None = None,
    borrowing: bool = True,
    lending: bool = True,
) -> Quota:
    """Create or replace one team's quota for one flavor (validated as the teams file is)."""
    actor.require("admin")
    row = team_by_name(session, team)

    spec = validate(
        QuotaSpec,
        {
            "flavor": flavor,
            "guaranteed_gpus": guaranteed_gpus,
            "limit_gpus": limit_gpus,
            "borrowing_limit_gpus": borrowing_limit_gpus,
            "lending_limit_gpus": lending_limit_gpus,
            "borrowing": borrowing,
            "lending": lending,
        },
        "quota",
    )
    quota = next((q for q in row.quotas if q.flavor == spec.flavor), None)
    if quota is None:
        quota = Quota(flavor=spec.flavor)
        row.quotas.append(quota)
    quota.guaranteed_gpus = spec.guaranteed_gpus
    quota.limit_gpus = spec.limit_gpus
    quota.borrowing_limit_gpus = spec.borrowing_limit_gpus
    quota.lending_limit_gpus = spec.lending_limit_gpus
    quota.borrowing = spec.borrowing
    quota.lending = spec.lending
    audit(
        session,
        actor,
        "quota.set",
        f"team/{team}/quota/{spec.flavor}",
        now_s,
        guaranteed_gpus=spec.guaranteed_gpus,
        limit_gpus=spec.limit_gpus,
        borrowing_limit_gpus=spec.borrowing_limit_gpus,
        lending_limit_gpus=spec.lending_limit_gpus,
    )
    return quota


IDLE_POLICIES = ("off", "notify", "reclaim")


def _check_idle_policy(policy: str) -> str:
    if policy not in IDLE_POLICIES:
        raise AdminError(
            f"idle policy {policy!r}: use off, notify (flag idle jobs; the default) or reclaim "
            "(also stop them)"
        )
    return policy


def _check_cap_order(default: PriorityClass, cap: PriorityClass) -> None:
    if cap.value < default.value:
        raise AdminError(
            f"max priority class {cap.name!r} is below the default class {default.name!r}: "
            "the team's own jobs would be refused; raise the cap or lower the default"
        )


def class_cap(session: Session, team: Team) -> PriorityClass:
    """The highest priority class the team's leads and members may use."""
    return priority_class(session, team.max_priority_class or team.default_priority)


def check_class_allowed(
    session: Session, who: Principal, team: Team, wanted: PriorityClass
) -> None:
    """Leads and members use classes up to their team's cap; admins any (issue 30: a lead
    could make a job non-preemptible production with no policy)."""
    if who.is_admin:
        return
    cap = class_cap(session, team)
    if wanted.value > cap.value:
        raise ForbiddenError(
            f"priority class {wanted.name!r} is above what team {team.name} may use "
            f"({cap.name!r} and below); an admin can allow it: gpufleet admin team update "
            f"{team.name} --max-priority-class {wanted.name}"
        )


def priority_class(session: Session, name: str) -> PriorityClass:
    row = session.get(PriorityClass, name)
    if row is None:
        known = session.scalars(select(PriorityClass.name)).all()
        raise UnknownNameError("priority class", name, known)
    return row


RATE_RESOLUTION_USD = 0.000_001  # rates are stored as whole micro-dollars per GPU-hour


def set_rate(
    session: Session,
    actor: Principal,
    flavor: str,
    usd_per_gpu_h: float,
    now_s: float,
    *,
    effective_s: float | None = None,
    reprice: bool = False,
) -> FlavorRate:
    """Add a rate to the flavor's history, in force from `effective_s` (default: now) until
    its next rate; returns the row as stored (in whole micro-dollars).

    A rate never replaces the one GPU time was already billed at: a time in the future is
    fine (a price change announced for the 1st), a time in the past only with `reprice`,
    which re-prices GPU time already used (closed periods' reports change, and say so).
    A rate that is not 0 but rounds to 0 micro-dollars is refused: it was echoed back as
    1e-07 and stored as 0, and billed 0 without the flavor showing as unpriced."""
    actor.require("admin")
    if not 0 <= usd_per_gpu_h <= MAX_RATE_USD_PER_GPU_H:  # NaN fails too
        raise AdminError(f"a rate is between 0 and {MAX_RATE_USD_PER_GPU_H:,.0f} $/GPU-h")
    # half up to the micro-dollar, from the decimal the caller wrote (not the float's
    # binary value times 1e6, which rounds 0.0000025 to 2 or 3 by accident)
    micro = int(
        Decimal(repr(float(usd_per_gpu_h))).scaleb(6).quantize(Decimal(1), rounding=ROUND_HALF_UP)
    )
    if micro == 0 and usd_per_gpu_h != 0:
        raise UserError(
            f"rate {usd_per_gpu_h!r} USD per GPU-hour is below the resolution rates are "
            f"stored at ({RATE_RESOLUTION_USD:.6f} USD, a micro-dollar, per GPU-hour): use 0 "
            f"or at least {RATE_RESOLUTION_USD:.6f}"
        )
    flavor = get_accelerator(flavor).name  # an alias ("H100") is stored by its catalog name
    at_s = now_s if effective_s is None else effective_s
    if not 0 <= at_s <= MAX_UNIX_S:  # NaN fails too
        raise UserError("effective: a time from 1970 to 2100")
    repriced = at_s < now_s
    if repriced and not reprice:
        raise UserError(
            "effective: that time has passed, and a rate applies from now or later so that "
            "no bill already made changes; to re-price GPU time already used (closed "
            "periods' reports change, and say so), add reprice=true"
        )
    row = FlavorRate(
        flavor=flavor,
        usd_micro_per_gpu_h=micro,
        effective_s=at_s,
        set_s=now_s,
        set_by=actor.user,
        repriced=repriced,
    )
    session.add(row)
    session.flush()
    audit(
        session,
        actor,
        "rate.set",
        f"flavor/{flavor}",
        now_s,
        usd_per_gpu_h=micro / 1_000_000,
        effective_s=at_s,
        repriced=repriced,
    )
    return row


def rate_history(session: Session) -> dict[str, list[RateChange]]:
    """Every flavor's rates in the order they take effect (ties: the order they were set),
    as the chargeback prices with them."""
    out: dict[str, list[RateChange]] = {}
    rows = session.scalars(select(FlavorRate).order_by(FlavorRate.effective_s, FlavorRate.id))
    for r in rows:
        out.setdefault(r.flavor, []).append(
            RateChange(r.effective_s, r.usd_micro_per_gpu_h, r.set_s, r.repriced)
        )
    return out


def rates_in_force(session: Session, at_s: float) -> dict[str, int]:
    """Each flavor's rate in force at `at_s` (micro-dollars), of those that have one."""
    out: dict[str, int] = {}
    for flavor, changes in rate_history(session).items():
        current = [c for c in changes if c.effective_s <= at_s]
        if current:
            out[flavor] = current[-1].usd_micro_per_gpu_h
    return out


def set_node_state(
    session: Session, actor: Principal, node: str, state: str, *, reason: str, now_s: float
) -> None:
    """Mark a node up, down or drained (the reconciler acts on it at its next cycle)."""
    actor.require("admin")
    if state not in ("up", "down", "drain"):
        raise AdminError(f"node state {state!r}: use up, down or drain")
    row = session.get(NodeRecord, node)
    if row is None:
        known = session.scalars(select(NodeRecord.name)).all()
        raise UnknownNameError("node", node, known)
    old = row.state
    row.state, row.reason, row.updated_s = state, reason, now_s
    audit(session, actor, "node.state", f"node/{node}", now_s, old=old, new=state, reason=reason)


def create_token(
    session: Session,
    actor: Principal,
    now_s: float,
    *,
    role: str,
    team: str | None,
    user: str,
    expires_s: float | None,
) -> IssuedToken:
    actor.require("admin")
    if role not in ROLES:
        raise AdminError(f"role {role!r}: use one of {', '.join(ROLES)}")
    if role != "admin" and team is None:
        raise AdminError(f"a {role} token belongs to a team: add --team")
    if expires_s is not None and not now_s < expires_s <= MAX_UNIX_S:  # NaN fails too
        raise UserError("expires_s: the expiry must be in the future and before 2100")
    issued = _issue(
        session,
        actor,
        user=user,
        role=role,
        team=team,
        expires_s=expires_s,
        now_s=now_s,
    )
    audit(
        session,
        actor,
        "token.create",
        f"token/{issued.token_id}",
        now_s,
        user=user,
        role=role,
        team=team,
        expires_s=expires_s,
    )
    return issued


def _issue(
    session: Session,
    actor: Principal,
    *,
    user: str,
    role: Role,
    team: str | None,
    expires_s: float | None,
    now_s: float,
) -> IssuedToken:
    check_name("user", user)
    team_row = team_by_name(session, team) if team is not None else None
    person = session.scalar(select(User).where(User.name == user))
    if person is None:
        person = User(name=user, team_id=team_row.id if team_row else None, created_s=now_s)
        session.add(person)
        session.flush()
    elif team_row is not None and person.team_id not in (None, team_row.id):
        raise AdminError(f"user {user!r} belongs to another team")
    token, dig = new_token()
    row = Token(
        digest=dig,
        prefix=token[:12],
        user_id=person.id,
        team_id=team_row.id if team_row else None,
        role=role,
        created_s=now_s,
        expires_s=expires_s,
    )
    session.add(row)
    session.flush()
    return IssuedToken(token, row.id, user, role, team, expires_s)


def revoke_token(session: Session, actor: Principal, token_id: int, now_s: float) -> None:
    actor.require("admin")
    row = session.get(Token, token_id)
    if row is None:
        raise NotFoundError(f"no token with id {token_id} (see `gpufleet admin token list`)")
    if row.revoked_s is None:
        row.revoked_s = now_s
    audit(session, actor, "token.revoke", f"token/{token_id}", now_s)


def teams_spec(session: Session) -> TeamsSpec | None:
    """The store's teams, quotas and priority classes as the scheduler's `TeamsSpec`
    (None while there are no teams: then no job can have been submitted)."""
    teams = session.scalars(select(Team).order_by(Team.name)).all()
    classes = session.scalars(select(PriorityClass).order_by(PriorityClass.value.desc())).all()
    if not teams:
        return None
    data: dict[str, Any] = {
        "kind": "teams",
        "teams": [
            {
                "name": t.name,
                "cohort": t.cohort,
                "weight": t.weight,
                "default_priority": t.default_priority,
                "projects": [p.name for p in t.projects],
                "quotas": [
                    {
                        "flavor": q.flavor,
                        "guaranteed_gpus": q.guaranteed_gpus,
                        "limit_gpus": q.limit_gpus,
                        "borrowing": q.borrowing,
                        "lending": q.lending,
                        "borrowing_limit_gpus": q.borrowing_limit_gpus,
                        "lending_limit_gpus": q.lending_limit_gpus,
                    }
                    for q in t.quotas
                ],
            }
            for t in teams
        ],
    }
    if classes:
        data["priority_classes"] = [
            {"name": c.name, "value": c.value, "preemptible": c.preemptible} for c in classes
        ]
    return TeamsSpec.model_validate(data)


def import_teams(session: Session, actor: Principal, spec: TeamsSpec, now_s: float) -> list[str]:
    """Create the teams, quotas and priority classes of a teams file that are not in the store
    yet (existing teams are left alone); returns the names created."""
    actor.require("admin")
    for pc in spec.priority_classes:
        if session.get(PriorityClass, pc.name) is None:
            session.add(PriorityClass(name=pc.name, value=pc.value, preemptible=pc.preemptible))
            audit(session, actor, "priority_class.create", f"priority_class/{pc.name}", now_s)
    session.flush()
    created = []
    for t in spec.teams:
        if session.scalar(select(Team).where(Team.name == t.name)) is not None:
            continue
        create_team(
            session,
            actor,
            t.name,
            now_s,
            cohort=t.cohort,
            weight=t.weight,
            default_priority=t.default_priority,
            projects=t.projects,
            max_priority_class=t.max_priority_class,
            idle_policy=t.idle_policy,
        )
        session.flush()
        for q in t.quotas:
            set_quota(
                session,
                actor,
                t.name,
                q.flavor,
                now_s,
                guaranteed_gpus=q.guaranteed_gpus,
                limit_gpus=q.limit_gpus,
                borrowing_limit_gpus=q.borrowing_limit_gpus,
                lending_limit_gpus=q.lending_limit_gpus,
                borrowing=q.borrowing,
                lending=q.lending,
            )
        created.append(t.name)
    return created
