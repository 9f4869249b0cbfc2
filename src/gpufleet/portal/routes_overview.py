"""Overview: GPUs allocated against the cluster, queues, quotas in use, allocation over time.

The numbers are the API's own (`/cluster`, `/teams`, `/queues` are called as functions), so
the page and a script reading the API always agree; members see their own team's rows, as
in the API, and cluster-wide totals, which the API shows everyone too.

Every figure says whose it is: "Idle but allocated" is the caller's team's (labelled so)
beside the whole cluster's for a member, the whole cluster's for an admin. It was the
cluster's alone, unlabelled, and a lead read 354.64 GPU-hours as their team's 234.57.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import func, select

from gpufleet.api import routes_cluster
from gpufleet.api.views import queue_index
from gpufleet.control.auth import Principal
from gpufleet.control.chargeback_report import UsageRecord
from gpufleet.control.ledger import usage_records
from gpufleet.control.models import Job
from gpufleet.portal import fmt
from gpufleet.portal.usage import (
    WINDOWS,
    Grid,
    Series,
    UseSummary,
    allocation_series,
    data_age_s,
    grid_for,
    use_summary,
    window_for,
)
from gpufleet.portal.utilisation import has_readings, heat_map, idle_jobs, utilisation_chart
from gpufleet.portal.web import Caller, Ctx, Db, render

router = APIRouter()


@router.get("/", name="overview", response_class=HTMLResponse)
def overview(
    request: Request, me: Caller, ctx: Ctx, s: Db, window: str | None = None
) -> HTMLResponse:
    who = me.who
    now = ctx.clock()
    if window is None or window not in WINDOWS:
        window = window_for(data_age_s(s, now))
    span_s, _ = WINDOWS[window]
    grid = grid_for(window, now)  # buckets on clock boundaries, so each label is its start
    cluster = routes_cluster.cluster(who, ctx, s)
    teams = routes_cluster.teams(who, ctx, s)
    queues = routes_cluster.queues(who, s)
    index = queue_index(s)
    start = now - span_s  # "the last 1h" of the idle figures; the chart's grid covers it
    records = usage_records(s, grid.start_s, now, now)
    by_flavor = _series(records, grid)
    # an admin sees every team's line, anyone else their own team's
    mine = records if who.is_admin else [r for r in records if r.team == who.team]
    by_team = _series(mine, grid, label="team")
    chart = _chart(by_flavor.starts_s, {**by_flavor.values, **by_team.values}, cluster.gpus)
    busy = utilisation_chart(s, who, grid.start_s, grid.end_s, grid.count)
    intervals = interval_labels(grid)
    figures = idle_figures(who, records, start_s=start, end_s=now)
    heat = heat_map(s, ctx.cluster, who, now)
    return render(
        request,
        "overview.html.j2",
        me,
        nav="overview",
        cluster=cluster,
        teams=teams,
        queues=queues,
        # from the store, as the per-team counts beside it (the scheduler's last snapshot
        # could say 19 while the teams' rows added up to 10 + 10)
        pending_total=s.scalar(select(func.count()).where(Job.state == "pending")) or 0,
        queue_at_s=index.at_s if index else None,
        window=window,
        windows=list(WINDOWS),
        chart_json=json.dumps(chart).replace("<", "\\u003c"),  # safe inside <script>
        chart_columns=[d["label"] for d in chart["datasets"]],
        chart_rows=_rows(chart, labels=intervals),
        use=figures[-1].use,  # the whole cluster's: is utilisation read at all?
        idle_figures=figures,
        heat=heat,
        heat_read=any(node.mean_util_pct is not None for node in heat),
        busy_json=json.dumps(busy).replace("<", "\\u003c"),
        busy_shown=has_readings(busy),
        busy_columns=[d["label"] for d in busy["datasets"]],
        busy_rows=_rows(busy, cell=lambda v: "—" if v is None else f"{v:.0f} %", labels=intervals),
        idle=idle_jobs(s, who),
    )


def _series(records: Sequence[UsageRecord], grid: Grid, label: str = "flavor") -> Series:
    """Average GPUs held per bucket of `grid`, the running one up to now."""
    return allocation_series(
        records,
        start_s=grid.start_s,
        end_s=grid.end_s,
        buckets=grid.count,
        label=label,
        until_s=grid.now_s,
    )


def _chart(
    starts_s: tuple[float, ...], series: dict[str, tuple[float, ...]], capacity: dict[str, int]
) -> dict[str, Any]:
    """What `static/portal.js` hands to Chart.js: one line per flavor (and the caller's
    team), plus each flavor's capacity as a dashed line."""
    return {
        "labels": [fmt.when(t).removesuffix(" UTC")[5:] for t in starts_s],  # MM-DD HH:MM
        "datasets": [
            {"key": name, "label": f"{name} allocated", "data": [round(v, 3) for v in values]}
            for name, values in series.items()
        ],
        "capacity": [
            {"key": name, "label": f"{name} capacity", "value": n} for name, n in capacity.items()
        ],
        "y_label": "GPUs (average over each interval)",
    }


def _rows(
    chart: dict[str, Any],
    cell: Callable[[Any], str] = fmt.gpus,
    labels: Sequence[str] | None = None,
) -> list[list[str]]:
    """The chart as table rows (interval, then one column per dataset): the page's no-JS
    and screen-reader view of the same data. `labels` name the rows (default: the chart's
    own, each interval's start)."""
    columns = [d["data"] for d in chart["datasets"]]
    names = chart["labels"] if labels is None else labels
    return [[label, *(cell(col[i]) for col in columns)] for i, label in enumerate(names)]


def _minute(t_s: float) -> str:
    """'MM-DD HH:MM', as the chart's axis labels."""
    return fmt.when(t_s).removesuffix(" UTC")[5:]


def interval_labels(grid: Grid) -> list[str]:
    """Each bucket's true start and end, for the table under a chart: '05-28 20:25–20:26'
    (the end's date only where it is another day), the running bucket's '05-28 20:26–now'.
    A label of its start alone read as "at 20:25" to people, not "from 20:25 for a minute"."""
    out = []
    for i in range(grid.count):
        lo, hi = grid.bounds(i)
        start = _minute(lo)
        if hi < lo + grid.step_s:
            end = "now"
        else:
            end = _minute(hi)
            end = end[6:] if end[:5] == start[:5] else end
        out.append(f"{start}–{end}")
    return out


@dataclass(frozen=True)
class IdleFigure:
    """One "Idle but allocated" line: whose GPU-hours (the label says) and the figures."""

    key: str  # "team" or "cluster": the element's id on the page
    label: str
    use: UseSummary


def idle_figures(
    who: Principal, records: Sequence[UsageRecord], *, start_s: float, end_s: float
) -> list[IdleFigure]:
    """Idle-but-allocated GPU-hours for whom the caller answers: a team member's team first
    (the chart beside it draws "your team"), then the whole cluster for comparison (the API
    shows everyone cluster-wide totals); an admin the whole cluster's."""
    out = []
    if not who.is_admin and who.team is not None:
        mine = [r for r in records if r.team == who.team]
        team = use_summary(mine, start_s=start_s, end_s=end_s)
        out.append(IdleFigure("team", f"Your team ({who.team})", team))
    whole = use_summary(records, start_s=start_s, end_s=end_s)
    out.append(IdleFigure("cluster", "Whole cluster", whole))
    return out
