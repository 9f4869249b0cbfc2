"""What the portal shows of GPU telemetry: the heat map, utilisation over time, idle jobs.

All of it reads `control.telemetry_store`, as `/metrics` and the API do, so the portal,
a Prometheus scrape and a script agree. A member sees which GPUs their own team holds
and that others are held ("another team"), never another team's name or jobs: the
same rule as the API's job reasons.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from gpufleet.cluster import Cluster
from gpufleet.control.auth import Principal
from gpufleet.control.models import Job, JobUtilization, Team
from gpufleet.control.telemetry_series import series
from gpufleet.control.telemetry_store import FRESH_S, latest
from gpufleet.control.telemetry_store import SEVERAL_TEAMS as SHARED_READING
from gpufleet.portal import fmt

OTHER_TEAM = "another team"
SEVERAL_TEAMS = "several teams"  # a GPU whose slices or fractions teams share


@dataclass(frozen=True)
class Cell:
    """One GPU of the heat map."""

    gpu: int
    util_pct: float | None  # None: no recent reading
    holder: str  # team name, OTHER_TEAM, SEVERAL_TEAMS, or "" (free)
    job_id: int | None  # only for the viewer's own team (or an admin)
    healthy: bool | None
    mem_used_bytes: int | None
    mem_total_bytes: int | None

    @property
    def shade(self) -> int:
        """The cell's colour step, 0-10 by busy % (the CSS classes `u0`..`u10`)."""
        return -1 if self.util_pct is None else min(10, int(self.util_pct // 10))

    @property
    def label(self) -> str:
        """The cell's text for a screen reader and a hover: who holds it and how busy."""
        busy = "no reading" if self.util_pct is None else f"{self.util_pct:.0f} % busy"
        who = f"held by {self.holder}" if self.holder else "free"
        health = "" if self.healthy in (True, None) else ", unhealthy"
        return f"GPU {self.gpu}: {who}, {busy}{health}"


@dataclass(frozen=True)
class NodeRow:
    name: str
    accelerator: str
    cells: tuple[Cell, ...]

    @property
    def mean_util_pct(self) -> float | None:
        read = [c.util_pct for c in self.cells if c.util_pct is not None]
        return sum(read) / len(read) if read else None


def heat_map(s: Session, cluster: Cluster, who: Principal, now_s: float) -> list[NodeRow]:
    """Every GPU of the cluster with its latest reading (within `FRESH_S`) and holder."""
    readings = {(g.node, g.gpu): g for g in latest(s) if now_s - g.time_s <= FRESH_S}
    rows = []
    for node in cluster.nodes:
        cells = []
        for index in range(node.gpus):
            g = readings.get((node.name, index))
            team = g.team if g is not None else None
            mine = who.is_admin or (team is not None and team == who.team)
            cells.append(
                Cell(
                    gpu=index,
                    util_pct=g.util_pct if g is not None else None,
                    holder=_holder(team, mine=mine),
                    job_id=g.job_id if (g is not None and mine) else None,
                    healthy=g.healthy if g is not None else None,
                    mem_used_bytes=g.mem_used_bytes if g is not None else None,
                    mem_total_bytes=g.mem_total_bytes if g is not None else None,
                )
            )
        rows.append(NodeRow(node.name, node.accelerator, tuple(cells)))
    return rows


def _holder(team: str | None, *, mine: bool) -> str:
    """Who a cell says holds the GPU. A shared GPU (teams' MIG slices or fractions) is held
    by several teams, named to nobody: it showed as free, its reading filed under no one
    team (`telemetry_store.SEVERAL_TEAMS`, the reading's team now)."""
    if team is None:
        return ""
    if team == SHARED_READING:
        return SEVERAL_TEAMS
    return team if mine else OTHER_TEAM


def utilisation_chart(
    s: Session, who: Principal, start_s: float, end_s: float, buckets: int
) -> dict[str, Any]:
    """Busy % per team over the window (the admin: every team; others: their own) and the
    whole cluster's, in `static/portal.js`'s chart form. Intervals without readings are
    gaps (null), not zeros: no reading is not an idle GPU."""
    step_s = (end_s - start_s) / buckets
    whole = series(s, start_s, end_s, step_s).get("all", [])
    teams = series(s, start_s, end_s, step_s, by_team=True)
    shown = {k: v for k, v in teams.items() if k != "unattributed"}
    if not who.is_admin:
        shown = {k: v for k, v in shown.items() if k == who.team}

    def column(points: list[Any]) -> list[float | None]:
        at = {round((p.start_s - start_s) / step_s): p.util_pct for p in points}
        return [None if at.get(i) is None else round(at[i], 1) for i in range(buckets)]

    labels = [fmt.when(start_s + i * step_s).removesuffix(" UTC")[5:] for i in range(buckets)]
    datasets = [{"key": "cluster", "label": "whole cluster", "data": column(whole)}]
    datasets += [
        {
            "key": name,
            "label": SEVERAL_TEAMS if name == SHARED_READING else name,
            "data": column(points),
        }
        for name, points in sorted(shown.items())
    ]
    return {
        "labels": labels,
        "datasets": datasets,
        "capacity": [],
        "y_label": "busy % (mean)",
        "points": True,
    }


def has_readings(chart: dict[str, Any]) -> bool:
    return any(v is not None for d in chart["datasets"] for v in d["data"])


@dataclass(frozen=True)
class IdleJob:
    job_id: int
    name: str
    team: str
    util_pct: float | None
    idle_since_s: float
    flagged_s: float | None


def idle_jobs(s: Session, who: Principal) -> list[IdleJob]:
    """Running jobs whose GPUs read under the idle threshold now, the flagged first."""
    q = (
        select(JobUtilization, Job.name, Team.name)
        .join(Job, Job.id == JobUtilization.job_id)
        .join(Team, Team.id == Job.team_id)
        .where(Job.state == "running", JobUtilization.low_since_s.is_not(None))
    )
    out = [
        IdleJob(m.job_id, name, team, m.last_util_pct, m.low_since_s or math.inf, m.idle_flagged_s)
        for m, name, team in s.execute(q)
        if who.is_admin or team == who.team
    ]
    return sorted(out, key=lambda j: (j.flagged_s is None, j.idle_since_s, j.job_id))


def job_chart(
    s: Session, job_id: int, start_s: float, end_s: float
) -> tuple[dict[str, Any], list[list[str]]] | None:
    """A job's busy % and memory per GPU over [start_s, end_s), about 60 points, and the
    same as table rows; None when it has no readings there."""
    if not end_s > start_s:
        return None
    buckets = max(1, min(60, int((end_s - start_s) // 15)))
    step_s = (end_s - start_s) / buckets
    points = series(s, start_s, end_s, step_s, job_id=job_id).get("all", [])
    if not points:
        return None
    at = {round((p.start_s - start_s) / step_s): p for p in points}
    labels = [fmt.when(start_s + i * step_s).removesuffix(" UTC")[5:] for i in range(buckets)]
    busy = [None if i not in at else round(at[i].util_pct, 1) for i in range(buckets)]
    mem = [_gib(at[i].mem_used_bytes) if i in at else None for i in range(buckets)]
    chart = {
        "labels": labels,
        "datasets": [
            {"key": "busy", "label": "busy %", "data": busy},
            {"key": "mem", "label": "memory per GPU (GiB)", "data": mem},
        ],
        "capacity": [],
        "y_label": "busy % / GiB",
        "points": True,
    }
    rows = [
        [label, "—" if b is None else f"{b:.0f}", "—" if m is None else f"{m:.1f}"]
        for label, b, m in zip(labels, busy, mem, strict=True)
    ]
    return chart, rows


def _gib(value: float | None) -> float | None:
    return None if value is None else round(value / 2**30, 1)
