"""Overview: GPUs allocated against the cluster, queues, quotas in use, allocation over time.

The numbers are the API's own (`/cluster`, `/teams`, `/queues` are called as functions), so
the page and a script reading the API always agree; members see their own team's rows, as
in the API, and cluster-wide totals, which the API shows everyone too.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

from fastapi import APIRouter, Request
from fastapi.responses import HTMLResponse
from sqlalchemy import func, select

from gpufleet.api import routes_cluster
from gpufleet.api.views import queue_index
from gpufleet.control.ledger import usage_records
from gpufleet.control.models import Job
from gpufleet.portal import fmt
from gpufleet.portal.usage import (
    WINDOWS,
    allocation_series,
    data_age_s,
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
    span_s, buckets = WINDOWS[window]
    cluster = routes_cluster.cluster(who, ctx, s)
    teams = routes_cluster.teams(who, ctx, s)
    queues = routes_cluster.queues(who, s)
    index = queue_index(s)
    start = now - span_s
    records = usage_records(s, start, now, now)
    by_flavor = allocation_series(records, start_s=start, end_s=now, buckets=buckets)
    # an admin sees every team's line, anyone else their own team's
    mine = records if who.is_admin else [r for r in records if r.team == who.team]
    by_team = allocation_series(mine, start_s=start, end_s=now, buckets=buckets, label="team")
    chart = _chart(by_flavor.starts_s, {**by_flavor.values, **by_team.values}, cluster.gpus)
    busy = utilisation_chart(s, who, start, now, buckets)
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
        chart_rows=_rows(chart),
        use=use_summary(records, start_s=start, end_s=now),
        heat=heat,
        heat_read=any(node.mean_util_pct is not None for node in heat),
        busy_json=json.dumps(busy).replace("<", "\\u003c"),
        busy_shown=has_readings(busy),
        busy_columns=[d["label"] for d in busy["datasets"]],
        busy_rows=_rows(busy, cell=lambda v: "—" if v is None else f"{v:.0f} %"),
        idle=idle_jobs(s, who),
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


def _rows(chart: dict[str, Any], cell: Callable[[Any], str] = fmt.gpus) -> list[list[str]]:
    """The chart as table rows (time, then one column per dataset): the page's no-JS and
    screen-reader view of the same data."""
    columns = [d["data"] for d in chart["datasets"]]
    return [[label, *(cell(col[i]) for col in columns)] for i, label in enumerate(chart["labels"])]
