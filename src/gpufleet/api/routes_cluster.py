"""/api/v1: queues, teams (quota, usage, borrowing, fair share), the cluster, chargeback."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Annotated, Any, Literal, cast

from fastapi import APIRouter, Query
from fastapi.responses import PlainTextResponse, Response
from sqlalchemy import func, select

from gpufleet.api.deps import Caller, Ctx, Db
from gpufleet.api.routing import ReleasingRoute
from gpufleet.api.schemas import (
    AUTHED,
    ChargebackOut,
    ClusterOut,
    DeviceOut,
    NodeOut,
    NodeState,
    QueueOut,
    QuotaOut,
    TeamOut,
    errors,
)
from gpufleet.api.views import queue_index
from gpufleet.control import chargeback as cb
from gpufleet.control.admin import rate_history
from gpufleet.control.chargeback_budget import budget_status
from gpufleet.control.chargeback_csv import to_csv, to_focus_csv
from gpufleet.control.chargeback_report import ChargebackReport, ChargebackRow
from gpufleet.control.ledger import (
    capacity_spans,
    month_gpu_hours,
    month_start_s,
    usage_records,
)
from gpufleet.control.models import (
    MAX_UNIX_S,
    Allocation,
    Device,
    Job,
    NodeRecord,
    Team,
)
from gpufleet.control.telemetry_store import FRESH_S, GpuNow, gpu_of, latest
from gpufleet.errors import UserError

router = APIRouter(
    prefix="/api/v1", tags=["cluster"], route_class=ReleasingRoute, responses=errors(*AUTHED)
)


def _held_by_team(s: Db) -> dict[tuple[int, str], float]:
    q = (
        select(Job.team_id, Allocation.flavor, func.sum(Allocation.milli))
        .join(Job, Job.id == Allocation.job_id)
        .where(Allocation.released_s.is_(None))
        .group_by(Job.team_id, Allocation.flavor)
    )
    return {(t, f): (m or 0) / 1000 for t, f, m in s.execute(q)}


def _counts(s: Db) -> dict[tuple[int, str], int]:
    q = select(Job.team_id, Job.state, func.count()).group_by(Job.team_id, Job.state)
    return {(t, st): n for t, st, n in s.execute(q)}


@router.get("/teams", response_model=list[TeamOut])
def teams(who: Caller, ctx: Ctx, s: Db) -> list[TeamOut]:
    """Quota per flavor with what is used, borrowed beyond the guarantee and lent out.

    `borrowed_gpus` is what the team holds beyond its guarantee. `lent_gpus` is its share of
    what its cohort borrows of the flavor: the cohort's borrowing split among its members in
    proportion to what each could lend now (its lendable GPUs, lending limit applied, that
    it does not use itself: the quota book's lend pool), so per cohort and flavor the GPUs
    lent add up to the GPUs borrowed. A team without a cohort lends nothing."""
    held = _held_by_team(s)
    counts = _counts(s)
    capacity = ctx.cluster.gpus_by_accelerator
    now = ctx.clock()
    rows = s.scalars(select(Team).order_by(Team.name)).all()
    lent = _lent_by_team(held, rows)  # over every team: a cohort's borrowing is not the caller's
    out = []
    for t in rows:
        if not who.sees_team(t.id):
            continue
        quotas = []
        for q in t.quotas:
            used = held.get((t.id, q.flavor), 0.0)
            quotas.append(
                QuotaOut(
                    flavor=q.flavor,
                    guaranteed_gpus=q.guaranteed_gpus,
                    limit_gpus=q.limit_gpus,
                    borrowing_limit_gpus=q.borrowing_limit_gpus,
                    lending_limit_gpus=q.lending_limit_gpus,
                    used_gpus=used,
                    borrowed_gpus=max(0.0, used - q.guaranteed_gpus),
                    lent_gpus=lent.get((t.id, q.flavor), 0.0),
                )
            )
        share = max(
            (held.get((t.id, acc), 0.0) / cap for acc, cap in capacity.items() if cap),
            default=0.0,
        )
        month_h = month_gpu_hours(s, t.name, now)
        budget = budget_status(month_h, t.monthly_budget_gpu_h, team=t.name)
        out.append(
            TeamOut(
                name=t.name,
                cohort=t.cohort,
                weight=t.weight,
                default_priority=t.default_priority,
                max_priority_class=t.max_priority_class or t.default_priority,
                idle_policy=t.idle_policy,
                projects=[p.name for p in t.projects],
                quotas=quotas,
                pending_jobs=counts.get((t.id, "pending"), 0),
                running_jobs=sum(counts.get((t.id, st), 0) for st in ("starting", "running")),
                fair_share=share / t.weight,
                monthly_budget_gpu_h=t.monthly_budget_gpu_h,
                month_gpu_h=month_h,
                budget_alerts=list(budget.alerts),
            )
        )
    return out


def _lent_by_team(
    held: dict[tuple[int, str], float], teams: Sequence[Team]
) -> dict[tuple[int, str], float]:
    """(team id, flavor) -> GPUs of the team's guarantee that others of its cohort borrow.

    Borrowing is what `sched.quota.QuotaBook.borrowed` says: GPUs held beyond the guarantee,
    and only from the team's own cohort. The scheduler draws it from the cohort's lend pool
    without recording whose GPUs it took, so a cohort's borrowing is split among its members
    in proportion to what each could lend now: `lendable` less what it uses beyond what it
    keeps (`QuotaBook.lend_pool`), i.e. min(lendable, guaranteed - used), at least 0. When
    nobody could lend (a guarantee or lending limit lowered after the borrowing began) the
    split falls back to the unused guarantees, then to the guarantees, so lent still adds
    up to borrowed whenever the cohort has any guarantee of the flavor.
    """
    # (cohort, flavor) -> per member: (team id, could lend now, unused guarantee, guarantee)
    members: dict[tuple[str, str], list[tuple[int, float, float, float]]] = defaultdict(list)
    for t in teams:
        if t.cohort is None:
            continue  # no cohort: never borrows, never lends (`sched.quota`)
        for q in t.quotas:
            guaranteed = float(q.guaranteed_gpus)
            limit = q.guaranteed_gpus if q.lending_limit_gpus is None else q.lending_limit_gpus
            lendable = float(limit) if q.lending else 0.0  # `specs.teams.Quota.lendable_gpus`
            unused = max(0.0, guaranteed - held.get((t.id, q.flavor), 0.0))
            members[(t.cohort, q.flavor)].append((t.id, min(lendable, unused), unused, guaranteed))
    out: dict[tuple[int, str], float] = {}
    for (_, flavor), rows in members.items():
        borrowed = sum(max(0.0, held.get((tid, flavor), 0.0) - g) for tid, _, _, g in rows)
        if borrowed <= 0:
            continue
        for weight in (1, 2, 3):  # could lend now; else unused guarantee; else guarantee
            total = sum(r[weight] for r in rows)
            if total > 0:
                for r in rows:
                    out[(r[0], flavor)] = borrowed * r[weight] / total
                break
    return out


@router.get("/queues", response_model=list[QueueOut])
def queues(who: Caller, s: Db) -> list[QueueOut]:
    """Per team: pending and running jobs, and the first pending ones in queue order."""
    counts = _counts(s)
    index = queue_index(s)
    out = []
    for t in s.scalars(select(Team).order_by(Team.name)):
        if not who.sees_team(t.id):
            continue
        first = list(index.first_of_team(t.name, 10)) if index else []
        out.append(
            QueueOut(
                team=t.name,
                pending=counts.get((t.id, "pending"), 0),
                running=sum(counts.get((t.id, st), 0) for st in ("starting", "running")),
                first=first,
            )
        )
    return out


@router.get("/cluster", response_model=ClusterOut)
def cluster(who: Caller, ctx: Ctx, s: Db) -> ClusterOut:
    """Nodes, their devices and MIG layout, what is allocated, and the allocation ratio."""
    by_node: dict[str, int] = defaultdict(int)
    for node, milli in s.execute(
        select(Allocation.node, func.sum(Allocation.milli))
        .where(Allocation.released_s.is_(None))
        .group_by(Allocation.node)
    ):
        by_node[node] = int(milli or 0)
    states = {n.name: n.state for n in s.scalars(select(NodeRecord))}
    per_gpu: dict[tuple[str, int], int] = defaultdict(int)
    for alloc in s.scalars(select(Allocation).where(Allocation.released_s.is_(None))):
        on = gpu_of(alloc)  # a MIG slice's GPU too
        if on is not None:
            per_gpu[(alloc.node, on)] += alloc.milli
    uuids = {(d.node, d.index): d.uuid for d in s.scalars(select(Device))}
    now_s = ctx.clock()
    readings = {(g.node, g.gpu): g for g in latest(s) if now_s - g.time_s <= FRESH_S}
    allocated: dict[str, float] = defaultdict(float)
    nodes = []
    for n in ctx.cluster.nodes:
        allocated[n.accelerator] += by_node[n.name] / 1000
        nodes.append(
            NodeOut(
                name=n.name,
                accelerator=n.accelerator,
                gpus=n.gpus,
                state=cast(NodeState, states.get(n.name, "up")),
                allocated_milli=by_node[n.name],
                mig=[list(map(list, layout)) for layout in n.mig],
                devices=[
                    DeviceOut(
                        index=g,
                        uuid=uuids.get((n.name, g), f"{n.name}/gpu{g}"),
                        allocated_milli=per_gpu[(n.name, g)],
                        **_reading(readings.get((n.name, g))),
                    )
                    for g in range(n.gpus)
                ],
            )
        )
    gpus = dict(ctx.cluster.gpus_by_accelerator)
    total = sum(gpus.values())
    return ClusterOut(
        name=ctx.cluster.name or "cluster",
        gpus=gpus,
        allocated_gpus={k: allocated.get(k, 0.0) for k in gpus},
        allocation_ratio=sum(allocated.values()) / total if total else 0.0,
        utilization=(
            sum(g.util_pct for g in readings.values()) / len(readings) / 100 if readings else None
        ),
        nodes=nodes,
    )


def _reading(g: GpuNow | None) -> dict[str, Any]:
    if g is None:
        return {}
    return {
        "util_pct": g.util_pct,
        "mem_used_bytes": g.mem_used_bytes,
        "healthy": g.healthy,
        "read_s": g.time_s,
    }


def parse_time(value: str | None, default: float, what: str) -> float:
    """Unix seconds or an ISO 8601 date (UTC unless it says otherwise), from 1970 to 2100:
    a period reaching beyond was priced as idle capacity for millennia (1e308 s gave a
    cost of 9e311 USD) and its CSV header could not print the dates (a 500)."""
    if value is None:
        return default
    try:
        t = float(value)
    except ValueError:
        try:
            parsed = datetime.fromisoformat(value)
        except ValueError:
            msg = f"{what}: use Unix seconds or an ISO 8601 date, got {value!r}"
            raise UserError(msg) from None
        if parsed.tzinfo is None:
            parsed = parsed.replace(tzinfo=UTC)
        t = parsed.timestamp()
    if not 0 <= t <= MAX_UNIX_S:  # NaN fails too
        raise UserError(f"{what}: a time from 1970 to 2100, got {value!r}")
    return t


@router.get(
    "/reports/chargeback",
    response_model=None,
    responses={
        200: {
            "model": ChargebackOut,
            "description": "The report: JSON, or CSV for `format=csv` and `format=focus`.",
            "content": {"text/csv": {"schema": {"type": "string"}}},
        }
    },
)
def chargeback(
    *,
    who: Caller,
    ctx: Ctx,
    s: Db,
    from_: Annotated[str | None, Query(alias="from")] = None,
    to: str | None = None,
    group_by: str = "team",
    format: Literal["json", "csv", "focus"] = "json",
    basis: Literal["allocation", "usage"] = "allocation",
    idle: Literal["none", "uniform", "proportional"] = "none",
) -> Response | dict[str, object]:
    """GPU-hours and cost by team/project/user/accelerator/priority over a period.

    Default period: this calendar month (UTC) to now. Members and leads see their
    team only; idle cost is distributed only in admins' reports."""
    now = ctx.clock()
    start = parse_time(from_, month_start_s(now), "from")
    end = parse_time(to, now, "to")
    if end <= start:
        raise UserError("`to` must be after `from`")
    team = None if who.is_admin else who.team
    records = usage_records(s, start, end, min(now, end), team)
    report = cb.chargeback(
        records,
        period_start_s=start,
        period_end_s=end,
        group_by=tuple(g.strip() for g in group_by.split(",") if g.strip()),
        # each GPU-second at the rate in force when it was used: a rate set today leaves a
        # closed period's bill as it was
        rates_usd_micro_per_gpu_h=rate_history(s),
        # idle capacity is the cluster's, not a team's: only admins' reports carry it
        capacity_gpus=dict(ctx.cluster.gpus_by_accelerator) if who.is_admin else {},
        basis=basis,
        idle_method=idle if who.is_admin else "none",
        # counted from when each node joined, and never past now (issue 30)
        capacity_spans=capacity_spans(s, min(now, end)) if who.is_admin else None,
    )
    if format == "csv":
        return PlainTextResponse(to_csv(report), media_type="text/csv")
    if format == "focus":
        return PlainTextResponse(to_focus_csv(report), media_type="text/csv")
    return _report_json(report)


def _row_json(row: ChargebackRow) -> dict[str, object]:
    return {
        **dict(row.group),
        "flavors": list(row.flavors),
        "gpu_hours_allocated": row.gpu_hours_allocated,
        "gpu_hours_used": row.gpu_hours_used,
        "gpu_hours_billed": row.gpu_hours_billed,
        "gpu_hours_idle": row.gpu_hours_idle,
        "gpu_efficiency": row.gpu_efficiency,
        "rate_usd_per_gpu_h": None
        if row.rate_usd_per_gpu_h is None
        else str(row.rate_usd_per_gpu_h),
        "cost_usd": str(row.cost_usd),
        "idle_cost_usd": str(row.idle_cost_usd),
        "total_cost_usd": str(row.total_cost_usd),
    }


def _report_json(report: ChargebackReport) -> dict[str, object]:
    """The report as JSON: money as decimal strings (exact), hours as numbers."""
    return {
        "period_start_s": report.period_start_s,
        "period_end_s": report.period_end_s,
        "basis": report.basis,
        "basis_note": "GPU-hours allocated = GPUs held x hours held, clipped to the period"
        if report.basis == "allocation"
        else "cost on GPU-hours used where utilisation is reported, else allocated",
        "group_by": list(report.group_by),
        "idle_method": report.idle_method,
        "rows": [_row_json(r) for r in report.rows],
        "totals": _row_json(report.totals),
        "idle": _row_json(report.idle) if report.idle else None,
        "rounding": {
            "cost_usd": str(report.rounding.cost_usd),
            "idle_cost_usd": str(report.rounding.idle_cost_usd),
            "total_cost_usd": str(report.rounding.total_cost_usd),
        },
        "idle_gpu_hours": report.idle_gpu_hours,
        "capacity_gpu_hours": report.capacity_gpu_hours,
        "unpriced_flavors": list(report.unpriced_flavors),
        "rates": [
            {
                "flavor": r.flavor,
                "from_s": r.from_s,
                "to_s": r.to_s,
                "rate_usd_per_gpu_h": None
                if r.rate_usd_per_gpu_h is None
                else str(r.rate_usd_per_gpu_h),
                "set_s": r.set_s,
                "repriced": r.repriced,
            }
            for r in report.rates
        ],
        "repriced": bool(report.repriced),
    }
