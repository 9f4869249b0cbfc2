"""Prometheus metrics, computed from the store at scrape time.

A fresh registry per scrape with custom collectors: any server (leader or standby)
reports the same numbers, because they come from the store, not from process memory.
Names follow the Kueue conventions where the meaning matches (`gpufleet_pending_jobs`,
`gpufleet_queue_nominal_quota`), ratios in 0–1, times in seconds; user ids never appear
in labels.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterator

from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, InfoMetricFamily
from prometheus_client.registry import Collector
from sqlalchemy import func, select
from sqlalchemy.orm import Session

from gpufleet import __version__
from gpufleet.api.context import AppContext
from gpufleet.control.models import Allocation, Job, JobUtilization, Quota, Team, UsageEntry
from gpufleet.control.telemetry_store import FRESH_S, latest


class StoreCollector(Collector):
    def __init__(self, ctx: AppContext) -> None:
        self.ctx = ctx

    def collect(self) -> Iterator[GaugeMetricFamily | CounterMetricFamily | InfoMetricFamily]:
        ctx = self.ctx
        now = ctx.clock()
        info = InfoMetricFamily("gpufleet_build", "gpufleet version")
        info.add_metric([], {"version": __version__})
        yield info
        leader = GaugeMetricFamily("gpufleet_leader", "1 if this server runs the reconciler")
        leader.add_metric([], 1.0 if ctx.leader() else 0.0)
        yield leader
        with ctx.sessions() as s:
            teams = {t.id: t.name for t in s.scalars(select(Team))}
            jobs = GaugeMetricFamily(
                "gpufleet_jobs", "Jobs by team and state", labels=["team", "state"]
            )
            for team_id, state, n in s.execute(
                select(Job.team_id, Job.state, func.count()).group_by(Job.team_id, Job.state)
            ):
                jobs.add_metric([teams.get(team_id, "?"), state], n)
            yield jobs
            capacity = GaugeMetricFamily(
                "gpufleet_cluster_gpus", "GPUs in the cluster", labels=["flavor"]
            )
            for flavor, n in ctx.cluster.gpus_by_accelerator.items():
                capacity.add_metric([flavor], n)
            yield capacity
            held = GaugeMetricFamily(
                "gpufleet_allocated_gpus",
                "GPUs allocated now (MIG slices and fractions as GPU shares)",
                labels=["team", "flavor"],
            )
            for team_id, flavor, milli in s.execute(
                select(Job.team_id, Allocation.flavor, func.sum(Allocation.milli))
                .join(Job, Job.id == Allocation.job_id)
                .where(Allocation.released_s.is_(None))
                .group_by(Job.team_id, Allocation.flavor)
            ):
                held.add_metric([teams.get(team_id, "?"), flavor], (milli or 0) / 1000)
            yield held
            quota = GaugeMetricFamily(
                "gpufleet_queue_nominal_quota",
                "Guaranteed GPUs per team and flavor",
                labels=["team", "flavor"],
            )
            for q in s.scalars(select(Quota)):
                quota.add_metric([teams.get(q.team_id, "?"), q.flavor], q.guaranteed_gpus)
            yield quota
            hours = CounterMetricFamily(
                "gpufleet_gpu_seconds_allocated",
                "GPU-seconds of closed allocations in the ledger",
                labels=["team", "flavor"],
            )
            for team, flavor, gpu_s in s.execute(
                select(
                    UsageEntry.team,
                    UsageEntry.flavor,
                    func.sum(UsageEntry.gpu_milli * (UsageEntry.end_s - UsageEntry.start_s)),
                ).group_by(UsageEntry.team, UsageEntry.flavor)
            ):
                hours.add_metric([team, flavor], float(gpu_s or 0) / 1000)
            yield hours
            yield from _utilisation(s, teams, now)
            oldest = GaugeMetricFamily(
                "gpufleet_oldest_pending_wait_seconds", "Wait of the oldest pending job"
            )
            first = s.scalar(select(func.min(Job.queued_s)).where(Job.state == "pending"))
            oldest.add_metric([], max(0.0, now - first) if first is not None else 0.0)
            yield oldest


def _utilisation(
    s: Session, teams: dict[int, str], now_s: float
) -> Iterator[GaugeMetricFamily | CounterMetricFamily]:
    """GPU, team and job utilisation from the latest readings (issue 30); ratios in 0-1.
    Per-GPU series carry node and GPU index as dcgm-exporter's do, plus the holding team."""
    fresh = [g for g in latest(s) if now_s - g.time_s <= FRESH_S]
    gpu = GaugeMetricFamily(
        "gpufleet_gpu_utilization_ratio",
        "Share of the last interval a kernel ran on the GPU (NVML/DCGM GPU utilisation)",
        labels=["node", "gpu", "team"],
    )
    for g in fresh:
        gpu.add_metric([g.node, str(g.gpu), g.team or ""], g.util_pct / 100)
    yield gpu
    by_team: dict[str, list[float]] = defaultdict(list)
    for g in fresh:
        by_team[g.team or ""].append(g.util_pct)
    team = GaugeMetricFamily(
        "gpufleet_team_gpu_utilization_ratio",
        'Mean utilisation of the GPUs a team holds (team "": GPUs no one holds)',
        labels=["team"],
    )
    for name, values in sorted(by_team.items()):
        team.add_metric([name], sum(values) / len(values) / 100)
    yield team
    job = GaugeMetricFamily(
        "gpufleet_job_gpu_utilization_ratio",
        "Mean utilisation of a running job's GPUs at its latest reading",
        labels=["team", "job"],
    )
    idle = GaugeMetricFamily(
        "gpufleet_idle_jobs", "Running jobs flagged idle by the idle-GPU detector", labels=["team"]
    )
    flagged: dict[str, int] = defaultdict(int)
    for m, team_id in s.execute(
        select(JobUtilization, Job.team_id)
        .join(Job, Job.id == JobUtilization.job_id)
        .where(Job.state == "running")
    ):
        name = teams.get(team_id, "?")
        seen = m.last_sample_s is not None and now_s - m.last_sample_s <= FRESH_S
        if m.last_util_pct is not None and seen:
            job.add_metric([name, str(m.job_id)], m.last_util_pct / 100)
        if m.idle_flagged_s is not None:
            flagged[name] += 1
    yield job
    for name, n in sorted(flagged.items()):
        idle.add_metric([name], n)
    yield idle
    used = CounterMetricFamily(
        "gpufleet_gpu_seconds_used",
        "Busy GPU-seconds of closed allocations in the ledger (where utilisation was read)",
        labels=["team", "flavor"],
    )
    for team_name, flavor, gpu_s in s.execute(
        select(UsageEntry.team, UsageEntry.flavor, func.sum(UsageEntry.used_gpu_s))
        .where(UsageEntry.used_gpu_s.is_not(None))
        .group_by(UsageEntry.team, UsageEntry.flavor)
    ):
        used.add_metric([team_name, flavor], float(gpu_s or 0))
    yield used


def render_metrics(ctx: AppContext) -> tuple[bytes, str]:
    registry = CollectorRegistry()
    registry.register(StoreCollector(ctx))
    return generate_latest(registry), CONTENT_TYPE_LATEST
