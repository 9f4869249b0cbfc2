"""What a multi-team plan simulates on one candidate accelerator, built once before any run.

From the spec to `Variant`s, the picklable descriptions a worker process turns into a
cluster, teams and a workload for one (size, seed):

- **Services** (inference entries) are sized by the inference estimator on the
  accelerator (`size_service`): the cheapest whole-GPU configuration for the peak
  request rate within the SLOs (`plan.inference_search`), and, when a replica fits one
  GPU, the smallest total of MIG slices whose throughput carries the rate
  (`estimate.inference_estimate.mig_fit`), if that takes fewer GPUs. Replicas become
  long-running simulated jobs (the generator's inference entry, with the diurnal curve
  when the spec gives one) that hold their GPUs or slices for the whole horizon.
- **Slices** live on MIG-cut GPUs at the front of the cluster (homogeneous layouts per
  profile, as many GPUs as the peak slices need); every other GPU stays whole.
- **Traces** are read once with the simulator's readers; their jobs are renamed into
  the team, lose the old cluster's accelerator hints (the plan chooses the
  accelerator), take the team's priority class, and are repeated back to back when the
  trace is shorter than the horizon.
- **Teams** run with open quotas (each guaranteed the whole cluster) while sizing, so
  fair share by weight decides who goes first; the recommended quotas are then checked
  in a run of their own (`Variant.quotas`).
- **Mixes** (`mix_candidate`): services on one accelerator, training and batch on
  another. The service pool is fixed at the services' peak (the MIG GPUs plus the
  whole-GPU replicas, in whole nodes, as the profile runs them); the training pool is
  what the search sizes. Jobs are pinned to their pool: training never borrows an idle
  service GPU, so a diurnal service's off-peak GPUs stay idle (the price of a mix).
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from gpufleet.catalog.accelerators import get_accelerator
from gpufleet.cluster import Cluster
from gpufleet.errors import UserError
from gpufleet.estimate.assumptions import Assumptions
from gpufleet.plan.design.cluster import design_cluster
from gpufleet.plan.fleet_services import ServiceSizing, service_label, size_service
from gpufleet.sched.registry import resolve
from gpufleet.sim.generate import generate
from gpufleet.sim.traces import read_trace
from gpufleet.sim.workload import CleaningReport, TraceJob, Workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.fleet import FleetPlanSpec, PlanInferenceEntry, PlanTeam, PlanTrainingEntry
from gpufleet.specs.plan import OnPremPreferences
from gpufleet.specs.teams import Quota, Team, TeamsSpec
from gpufleet.specs.workload import (
    DurationDist,
    InferenceEntry,
    TeamWorkloads,
    TrainingEntry,
    WorkloadSpec,
)

GpuLayout = tuple[tuple[str, int], ...]
DAY_S = 86_400.0


@dataclass(frozen=True)
class ServicePool:
    """A mix's nodes for the services: another accelerator, sized at the services' peak."""

    accelerator: str
    gpus_per_node: int
    nodes: int  # as the plan's profile runs the services
    whole_only_nodes: int  # as a whole-GPU-only profile (k8s-default) runs them

    def nodes_for(self, whole_only: bool) -> int:
        return self.whole_only_nodes if whole_only else self.nodes


@dataclass(frozen=True)
class Candidate:
    """One accelerator (or a mix) prepared for the search: node size, services, MIG cut,
    problems. A mix's `accelerator` is the searched training pool's; its services, MIG
    cut and service problems are those of `service_pool`'s accelerator."""

    accelerator: str
    gpus_per_node: int
    services: tuple[ServiceSizing, ...]
    mig: tuple[tuple[str, int, GpuLayout], ...]  # (profile, GPUs cut, layout per GPU)
    service_problems: tuple[str, ...]
    job_problems: tuple[str, ...]  # training, batch and trace jobs
    min_nodes: int
    largest_gang_nodes: int
    service_pool: ServicePool | None = None

    @property
    def problems(self) -> tuple[str, ...]:
        return self.service_problems + self.job_problems

    @property
    def feasible(self) -> bool:
        return not self.problems

    @property
    def mig_gpus(self) -> int:
        return sum(n for _, n, _ in self.mig)

    @property
    def label(self) -> str:
        """The accelerator, or "training + services" accelerators for a mix."""
        if self.service_pool is None:
            return self.accelerator
        return f"{self.accelerator} + {self.service_pool.accelerator}"

    @property
    def pool_gpus(self) -> int:
        """GPUs of the service pool (0 unless a mix), as the plan's profile runs it."""
        p = self.service_pool
        return 0 if p is None else p.nodes * p.gpus_per_node


@dataclass(frozen=True)
class Variant:
    """Everything one simulation needs except the cluster size and the seed (picklable)."""

    key: str
    accelerator: str
    gpus_per_node: int
    profile: str
    workload: WorkloadSpec  # the synthetic part, with sized services and scaled arrivals
    trace_jobs: tuple[TraceJob, ...]
    mig: tuple[tuple[str, int, GpuLayout], ...]
    teams: tuple[tuple[str, float, str], ...]  # (name, fair-share weight, priority class)
    # team -> (guaranteed, limit) of `accelerator`; None: open
    quotas: Mapping[str, tuple[int, int]] | None
    horizon_s: float
    warmup_s: float
    end_s: float  # the run stops here: horizon + drain
    arrival_scale: float = 1.0
    fractions: bool = False  # a trace asks for GPU fractions: nodes share GPUs
    # a mix: (accelerator, GPUs per node, nodes) of the services' pool, cut with `mig`
    service_pool: tuple[str, int, int] | None = None
    # a mix with quotas: team -> guaranteed GPUs of the service pool
    service_quotas: Mapping[str, int] | None = None

    @property
    def pool_gpus(self) -> int:
        """GPUs of a mix's service pool (0 without one)."""
        return 0 if self.service_pool is None else self.service_pool[1] * self.service_pool[2]


@dataclass(frozen=True)
class TraceInput:
    """A team's trace as read once: its jobs (renamed, retimed) and what the reader said."""

    team: str
    source: str
    jobs: tuple[TraceJob, ...]  # at scale 1, not yet repeated over the horizon
    report_lines: tuple[str, ...]
    span_s: float


# -- traces ----------------------------------------------------------------------------


def read_team_trace(team: PlanTeam, base_dir: Path) -> TraceInput:
    """The team's trace, read with the simulator's reader (a `UserError` if unreadable)."""

    assert team.trace is not None
    path = team.trace.path if team.trace.path.is_absolute() else base_dir / team.trace.path
    try:
        workload = read_trace(path, team.trace.format)
    except UserError as exc:
        raise UserError(f"teams.{team.name}.trace: {exc}") from None
    if not workload.jobs:
        raise UserError(f"teams.{team.name}.trace: {path} has no jobs the reader kept")
    jobs = tuple(
        replace(
            j,
            name=f"{team.name}-trace-{j.name}",
            team=team.name,
            accelerators=(),
            priority_class=team.priority if j.kind != "inference" else j.priority_class,
        )
        for j in workload.jobs
    )
    first = min(j.submit_s for j in jobs)
    jobs = tuple(replace(j, submit_s=j.submit_s - first) for j in jobs)
    last = max(j.submit_s for j in jobs)
    gap = last / max(1, len(jobs) - 1)
    return TraceInput(team.name, str(path), jobs, tuple(workload.report.lines()), last + gap)


def trace_over_horizon(
    trace: TraceInput, horizon_s: float, scale: float
) -> tuple[tuple[TraceJob, ...], int]:
    """The trace's jobs arriving in [0, horizon): arrival times ÷ `scale` (1.2: 20 % more
    often), repeated back to back while shorter than the horizon; and the copies used."""
    span = trace.span_s / scale
    copies = max(1, math.ceil(horizon_s / span)) if span > 0 else 1
    out: list[TraceJob] = []
    for k in range(copies):
        for j in trace.jobs:
            t = j.submit_s / scale + k * span
            if t < horizon_s:
                name = j.name if copies == 1 else f"{j.name}.r{k}"
                out.append(replace(j, name=name, submit_s=t))
    return tuple(out), copies


# -- candidates ------------------------------------------------------------------------


def gpus_per_node(accelerator: str) -> int:
    """GPUs per compute node of the accelerator's default system (8 for HGX/DGX boards)."""

    design = design_cluster(accelerator, 1, OnPremPreferences(), None, Assumptions())
    return max(1, design.gpus // max(1, design.nodes))


def prepare_candidate(
    spec: FleetPlanSpec, accelerator: str, traces: Sequence[TraceInput], log: Assumptions
) -> Candidate:
    """Size the services on `accelerator`, cut MIG GPUs for their slices, and list every
    reason the accelerator cannot run the teams' jobs at all."""
    gpn = gpus_per_node(accelerator)
    problems: list[str] = []  # of the services
    job_problems: list[str] = []
    services: list[ServiceSizing] = []
    gang_nodes = 1
    for team in spec.teams:
        for entry in team.workloads:
            if isinstance(entry, PlanInferenceEntry):
                sized = size_service(team.name, entry, accelerator, log)
                if isinstance(sized, str):
                    problems.append(sized)
                    continue
                if sized.mig_profile is None and sized.tp > gpn:
                    problems.append(
                        f"{team.name}/{sized.service}: TP {sized.tp} needs more GPUs than a "
                        f"{accelerator} node has ({gpn})"
                    )
                services.append(sized)
            elif isinstance(entry, PlanTrainingEntry):
                per_worker = entry.gpus_per_worker
                if per_worker > gpn and any(g >= per_worker for g in entry.gpus.choices):
                    job_problems.append(
                        f"{team.name}/{entry.name or entry.kind}: gpus_per_worker {per_worker} "
                        f"is more than a {accelerator} node has ({gpn})"
                    )
                for g in entry.gpus.choices:
                    gang_nodes = max(gang_nodes, max(1, g // per_worker) if g >= per_worker else 1)
    for trace in traces:
        too_big = [j for j in trace.jobs if (j.gpus or 0) > gpn]
        if too_big:
            job_problems.append(
                f"{trace.team}: {len(too_big):,} trace job{'s' * (len(too_big) != 1)} ask for "
                f"more GPUs per node than a {accelerator} node has ({gpn}), e.g. "
                f"{too_big[0].name} ({too_big[0].gpus} per node)"
            )
        for j in trace.jobs:
            gang_nodes = max(gang_nodes, j.workers)
    mig = _mig_cut(accelerator, services)
    mig_gpus = sum(n for _, n, _ in mig)
    whole_peak = sum(s.replicas * s.tp for s in services if s.mig_profile is None)
    min_nodes = max(
        gang_nodes + math.ceil(mig_gpus / gpn), math.ceil((mig_gpus + whole_peak) / gpn), 1
    )
    return Candidate(
        accelerator,
        gpn,
        tuple(services),
        mig,
        tuple(problems),
        tuple(job_problems),
        min_nodes,
        gang_nodes,
    )


def mix_candidate(training: Candidate, services: Candidate) -> Candidate | None:
    """Services on `services`' accelerator (their pool fixed at the peak), training and
    batch on `training`'s (searched); None when there are no services or they are the same
    accelerator. Its problems are the services' there and the jobs' here."""
    if training.accelerator == services.accelerator or not services.services:
        return None
    gpn = services.gpus_per_node
    whole = sum(s.replicas * s.tp for s in services.services if s.mig_profile is None)
    slices = sum(s.replicas for s in services.services if s.mig_profile is not None)
    pool = ServicePool(
        services.accelerator,
        gpn,
        nodes=max(1, math.ceil((services.mig_gpus + whole) / gpn)),
        whole_only_nodes=max(1, math.ceil((slices + whole) / gpn)),
    )
    return Candidate(
        accelerator=training.accelerator,
        gpus_per_node=training.gpus_per_node,
        services=services.services,
        mig=services.mig,
        service_problems=services.service_problems,
        job_problems=training.job_problems,
        min_nodes=training.largest_gang_nodes,
        largest_gang_nodes=training.largest_gang_nodes,
        service_pool=pool,
    )


def _mig_cut(
    accelerator: str, services: Sequence[ServiceSizing]
) -> tuple[tuple[str, int, GpuLayout], ...]:
    slices: dict[str, int] = {}
    per_gpu: dict[str, int] = {}
    for s in services:
        if s.mig_profile is not None:
            slices[s.mig_profile] = slices.get(s.mig_profile, 0) + s.replicas
            per_gpu[s.mig_profile] = s.slices_per_gpu
    return tuple(
        (p, math.ceil(n / per_gpu[p]), ((p, per_gpu[p]),)) for p, n in sorted(slices.items())
    )


def make_variant(
    spec: FleetPlanSpec,
    candidate: Candidate,
    traces: Sequence[TraceInput],
    *,
    profile: str,
    arrival_scale: float = 1.0,
    quotas: Mapping[str, tuple[int, int]] | None = None,
    service_quotas: Mapping[str, int] | None = None,
    tag: str = "",
) -> Variant:
    """The variant of `candidate` under `profile`, training arrivals × `arrival_scale`.

    In a mix every job is pinned to its pool: services to the service accelerator,
    training, batch and trace jobs to the searched one (trace services to the services')."""

    pool = candidate.service_pool
    pinned = pool is not None
    speed = duration_factor(spec.durations_on, candidate.accelerator)
    by_team: dict[str, list[ServiceSizing]] = {}
    for s in candidate.services:
        by_team.setdefault(s.team, []).append(s)
    teams: list[TeamWorkloads] = []
    for team in spec.teams:
        entries: list[TrainingEntry | InferenceEntry] = []
        for entry in team.workloads:
            if isinstance(entry, PlanTrainingEntry):
                rate = entry.arrivals_per_day * arrival_scale
                update: dict[str, object] = {"arrivals_per_day": rate}
                if speed != 1.0:
                    update["duration"] = scaled_duration(entry.duration, speed)
                if pinned:
                    update["accelerators"] = [candidate.accelerator]
                entries.append(entry.model_copy(update=update))
        services = {s.service: s for s in by_team.get(team.name, [])}
        for entry in team.workloads:
            if isinstance(entry, PlanInferenceEntry):
                entries.append(_service_entry(entry, services[service_label(entry)], pinned))
        if entries:
            teams.append(
                TeamWorkloads(name=team.name, priority_class=team.priority, workloads=entries)
            )
    workload = WorkloadSpec.model_construct(kind="workload", horizon=spec.horizon, teams=teams)
    trace_jobs: list[TraceJob] = []
    for trace in traces:
        jobs = trace_over_horizon(trace, spec.horizon, arrival_scale)[0]
        if speed != 1.0:
            jobs = tuple(j if j.kind == "inference" else _faster(j, speed) for j in jobs)
        if pool is not None:
            jobs = tuple(
                replace(
                    j,
                    accelerators=(
                        pool.accelerator if j.kind == "inference" else candidate.accelerator,
                    ),
                )
                for j in jobs
            )
        trace_jobs.extend(jobs)
    limits = [t.targets.long_run_limit_s or 0.0 for t in spec.teams]
    waits = [t.targets.wait_p95 or 0.0 for t in spec.teams]
    drain = max(2.0 * max([*limits, *waits]), DAY_S / 4)
    key = f"{candidate.label}|{profile}|x{arrival_scale:g}{tag}"
    pool_nodes = (
        None
        if pool is None
        else (
            pool.accelerator,
            pool.gpus_per_node,
            pool.nodes_for(resolve(profile).profile.whole_gpus_only),
        )
    )
    return Variant(
        key=key,
        accelerator=candidate.accelerator,
        gpus_per_node=candidate.gpus_per_node,
        profile=profile,
        workload=workload,
        trace_jobs=tuple(trace_jobs),
        mig=candidate.mig,
        teams=tuple((t.name, t.fair_share_weight, t.priority) for t in spec.teams),
        quotas=dict(quotas) if quotas is not None else None,
        horizon_s=spec.horizon,
        warmup_s=spec.warmup_s,
        end_s=spec.horizon + drain,
        arrival_scale=arrival_scale,
        fractions=any(j.gpu_fraction is not None for j in trace_jobs),
        service_pool=pool_nodes,
        service_quotas=dict(service_quotas) if service_quotas is not None else None,
    )


def duration_factor(measured_on: str | None, accelerator: str) -> float:
    """Run time on `accelerator` ÷ run time on `measured_on`: the ratio of dense BF16
    throughput (1 when no reference is given or either lacks a BF16 figure)."""
    if measured_on is None or measured_on == accelerator:
        return 1.0
    ref = get_accelerator(measured_on).dense_flops("bf16")
    here = get_accelerator(accelerator).dense_flops("bf16")
    if not ref or not here:
        return 1.0
    return ref / here


def scaled_duration(dist: DurationDist, factor: float) -> DurationDist:
    """The same distribution with every time (centre, bounds) × `factor`."""
    update: dict[str, float] = {}
    for key in ("fixed", "lognormal_median", "exponential_mean", "min", "max"):
        value = getattr(dist, key)
        if value is not None:
            update[key] = value * factor
    return dist.model_copy(update=update)


def _faster(job: TraceJob, factor: float) -> TraceJob:
    estimate = None if job.runtime_estimate_s is None else job.runtime_estimate_s * factor
    return replace(job, duration_s=job.duration_s * factor, runtime_estimate_s=estimate)


def _service_entry(entry: PlanInferenceEntry, sized: ServiceSizing, pinned: bool) -> InferenceEntry:
    """The service as the generator's inference entry; a slice or a `pinned` service (a
    mix's) asks for its own accelerator."""
    request: dict[str, object] = (
        {"gpus": sized.tp}
        if sized.mig_profile is None
        else {"mig_profile": sized.mig_profile, "accelerators": [sized.accelerator]}
    )
    if pinned:
        request["accelerators"] = [sized.accelerator]
    return InferenceEntry.model_validate(
        {
            "kind": "inference",
            "name": sized.service,
            "services": sized.replicas,
            "diurnal": entry.diurnal.model_dump() if entry.diurnal else None,
            "slo": {"ttft_p99_ms": entry.slo.ttft_p99_ms},
            "priority_class": entry.priority_class,
            "preemptible": False,
            **request,
        }
    )


# -- what one run simulates ------------------------------------------------------------


def build_cluster(variant: Variant, nodes: int) -> Cluster:
    """`nodes` nodes of the accelerator, flat (no leaf or spine limits), the variant's MIG
    GPUs cut at the front of the cluster; a mix's service pool first, where its cut is."""
    groups: list[dict[str, object]] = []
    if variant.service_pool is not None:
        acc, gpn_pool, pool_nodes = variant.service_pool
        groups.append(
            {"name": "svc", "count": pool_nodes, "accelerator": acc, "gpus_per_node": gpn_pool}
        )
    groups.append(
        {
            "name": "n",
            "count": nodes,
            "accelerator": variant.accelerator,
            "gpus_per_node": variant.gpus_per_node,
            "fractions": variant.fractions,
        }
    )
    name = f"{variant.accelerator}-{nodes}"
    if variant.service_pool is not None:
        name += f"+{variant.service_pool[0]}-{variant.service_pool[2]}"
    spec = ClusterSpec.model_validate(
        {"kind": "cluster", "name": name, "topology_levels": ["node"], "node_groups": groups}
    )
    cluster = Cluster.from_spec(spec)
    layouts = [layout for _, count, layout in variant.mig for _ in range(count)]
    if not layouts:
        return cluster
    out = []
    start = 0
    for node in cluster.nodes:
        mine = layouts[start : start + node.gpus]
        start += node.gpus
        out.append(
            replace(node, mig=tuple(mine) + ((),) * (node.gpus - len(mine))) if mine else node
        )
    return Cluster(cluster.levels, tuple(out), name=cluster.name)


def build_teams(variant: Variant, cluster: Cluster) -> TeamsSpec:
    """Open quotas (each team guaranteed the whole cluster) or the variant's quotas (a mix:
    also each team's guarantee of the service pool, which it may use up to)."""
    gpus = cluster.gpu_count
    by_acc = cluster.gpus_by_accelerator
    teams = []
    for name, weight, priority in variant.teams:
        quotas = []
        if variant.quotas is None:
            quotas = [
                Quota(flavor=acc, guaranteed_gpus=gpus, limit_gpus=None) for acc in sorted(by_acc)
            ]
        else:
            guaranteed, limit = variant.quotas[name]
            quotas.append(
                Quota(
                    flavor=variant.accelerator,
                    guaranteed_gpus=guaranteed,
                    limit_gpus=max(limit, guaranteed),
                )
            )
            if variant.service_pool is not None:
                own = (variant.service_quotas or {}).get(name, 0)
                quotas.append(
                    Quota(flavor=variant.service_pool[0], guaranteed_gpus=own, limit_gpus=None)
                )
        teams.append(
            Team(
                name=name,
                cohort=None if variant.quotas is None else "plan",
                weight=weight,
                default_priority=priority,
                quotas=quotas,
            )
        )
    return TeamsSpec(teams=teams)


def draw_workload(variant: Variant, seed: int) -> Workload:
    """The synthetic jobs of one seed (the generator, `default_rng(seed)`) plus the traces."""

    drawn = (
        generate(variant.workload, np.random.default_rng(seed)) if variant.workload.teams else None
    )
    jobs = (drawn.jobs if drawn is not None else ()) + variant.trace_jobs
    return Workload(jobs, CleaningReport("plan", len(jobs), len(jobs)))


@dataclass(frozen=True)
class OfferedLoad:
    """GPUs the jobs of one draw ask for on average over the horizon (a search start)."""

    mean_gpus: float
    by_team: Mapping[str, float] = field(default_factory=dict)


def offered_load(variant: Variant, seed: int = 0, *, training_only: bool = False) -> OfferedLoad:
    horizon = variant.horizon_s
    by_team: dict[str, float] = {}
    per_gpu = {p: layout[0][1] for p, _, layout in variant.mig}
    for j in draw_workload(variant, seed).jobs:
        if j.submit_s >= horizon or (training_only and j.kind == "inference"):
            continue
        share = j.total_gpus
        if j.mig_profile is not None:
            share = 1.0 / per_gpu.get(j.mig_profile, 7)
        hours = share * min(j.duration_s, horizon - j.submit_s)
        by_team[j.team] = by_team.get(j.team, 0.0) + hours / horizon
    return OfferedLoad(math.fsum(by_team.values()), dict(sorted(by_team.items())))


def candidate_labelled(cands: Sequence[Candidate], label: str) -> Candidate:
    return next(c for c in cands if c.label == label)


def mixes(
    spec: FleetPlanSpec, candidates: Sequence[Candidate], traces: Sequence[TraceInput]
) -> list[Candidate]:
    """Every feasible mix: services on one candidate, training and batch on another (only
    when the spec has both kinds of work and does not turn mixes off)."""
    jobs = any(isinstance(e, PlanTrainingEntry) for t in spec.teams for e in t.workloads) or any(
        j.kind != "inference" for t in traces for j in t.jobs
    )
    if not spec.mixes or not jobs:
        return []
    out = []
    for training in candidates:
        for services in candidates:
            mix = mix_candidate(training, services)
            if mix is not None and mix.feasible:
                out.append(mix)
    return out
