"""The two experiments of docs/experiments/: fragmentation on openb, and the utilisation claims.

Each is one function returning a JSON-ready dict whose `results` are keyed by policy
(profile) name, so `gpufleet simulate experiment NAME [--profiles ...] [--format json]`
only has to call it and print:

- `fragmentation(profiles, seed, points)` — the "fill" experiment of Weng et al. (FGD,
  ATC '23) on the bundled openb cluster: pods sampled with replacement from the openb
  pod list arrive one by one and are placed at once by the policy, with no departures,
  until the requested GPUs reach `max_arrived` (1.3) × the cluster's GPUs. It reports,
  per policy, the allocated share of the cluster against the arrived share (the curve),
  and at 100 % arrived the allocated share, the GPUs left unallocated, the pods that
  found no room, and the unallocated GPUs against the best of the paper's baselines.
- `utilization_claims(profiles, seeds, days)` — the scenario in
  `sim/data/experiments/utilization-claims/` (256 A100-80GB, training and inference
  teams, two weeks) simulated with each profile on each seed; per profile the mean
  over seeds of the simulator's stable metric fields, plus the effective work done
  (`effective_gpu_hours`, see `utilization_claims`).

Both are deterministic: the same arguments give the same `results` (wall-clock times
are kept apart, under `timings_s`). The scenario, the choices behind it and the
measured numbers are in docs/experiments/fragmentation.md and utilization-claims.md.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, replace
from importlib import resources
from pathlib import Path
from typing import Any, Final, TypeVar

import numpy as np
from pydantic import BaseModel

from gpufleet.catalog.mig import mig_profiles_for, whole_gpu_slices
from gpufleet.cluster import Cluster
from gpufleet.errors import UnknownNameError, UserError
from gpufleet.sched.registry import resolve
from gpufleet.sim.engine import SimConfig, Simulation
from gpufleet.sim.fragmentation import FRAGMENTATION_POLICIES, fragmentation
from gpufleet.sim.generate import generate
from gpufleet.sim.workload import TraceJob, Workload
from gpufleet.specs.cluster import ClusterSpec
from gpufleet.specs.load import load
from gpufleet.specs.profiles import PROFILES
from gpufleet.specs.teams import OPEN_QUOTA_GPUS, Quota, TeamsSpec
from gpufleet.specs.workload import WorkloadSpec

EXPERIMENTS: Final = ("fragmentation", "utilization-claims")
DAY_S: Final = 86_400.0

# -- utilisation claims -----------------------------------------------------------------

UTILIZATION_PROFILES: Final = ("k8s-default", "default")
UTILIZATION_SCENARIO: Final = "utilization-claims"
# Profiles that model Kubernetes without Kueue: a ResourceQuota caps a namespace and
# guarantees nothing, so they run with open quotas (`_open_quotas`: none binds)
# (sched/registry.py, the k8s-default comment).
OPEN_QUOTA_PROFILES: Final = frozenset({"k8s-default"})
_M = TypeVar("_M", bound=BaseModel)


@contextmanager
def scenario_file(scenario: str, name: str) -> Iterator[Path]:
    """A path to a file of a bundled scenario (gpufleet/sim/data/experiments/<scenario>)."""
    ref = resources.files("gpufleet").joinpath("sim", "data", "experiments", scenario, name)
    with resources.as_file(ref) as path:
        yield path


def _load(model: type[_M], scenario: str, name: str) -> _M:

    with scenario_file(scenario, name) as path:
        return load(model, path)


@dataclass(frozen=True)
class Scenario:
    """The utilisation-claims scenario as read from its files."""

    cluster: ClusterSpec
    teams: TeamsSpec
    workload: WorkloadSpec


def utilization_scenario(days: float = 14.0) -> Scenario:
    """The bundled scenario, its workload's horizon set to `days`."""
    if days <= 0:
        raise UserError(f"days must be positive, got {days}")
    workload = _load(WorkloadSpec, UTILIZATION_SCENARIO, "workload.yaml")
    return Scenario(
        _load(ClusterSpec, UTILIZATION_SCENARIO, "cluster.yaml"),
        _load(TeamsSpec, UTILIZATION_SCENARIO, "teams.yaml"),
        workload.model_copy(update={"horizon": days * DAY_S}),
    )


@dataclass(frozen=True)
class ProfileSetup:
    """What one profile runs on: the cluster, teams and workload, adapted to what the
    system it models can express (see `profile_setup`)."""

    cluster: Cluster
    teams: TeamsSpec
    workload: Workload
    mig: bool
    open_quotas: bool
    busy_rescaled: bool


def profile_setup(
    profile: str, cluster: Cluster, teams: TeamsSpec, workload: Workload
) -> ProfileSetup:
    """The scenario as `profile` runs it.

    A whole-GPU-only profile (`k8s-default`: the NVIDIA device plugin without a MIG
    strategy) runs on the same nodes with no MIG layout (all GPUs whole), and each job
    asking for a slice or a fraction, which it runs on a whole GPU, has its busy fraction
    scaled by the share it asked for: the same traffic on a whole GPU keeps it busy that
    much less (a 1g.10gb service busy 50 % of the time on its slice keeps a whole A100
    busy 1/7 × 50 %), so busy utilisation counts the same work under every profile.
    A profile in OPEN_QUOTA_PROFILES runs with open quotas (none binds).
    """
    whole_only = resolve(profile).profile.whole_gpus_only
    if whole_only:
        cluster = Cluster(
            cluster.levels, tuple(replace(n, mig=()) for n in cluster.nodes), name=cluster.name
        )
        workload = _rescaled_busy(workload, cluster)
    open_quotas = profile in OPEN_QUOTA_PROFILES
    if open_quotas:
        teams = _open_quotas(teams, cluster)
    return ProfileSetup(cluster, teams, workload, not whole_only, open_quotas, whole_only)


def requested_share(job: TraceJob, accelerator: str) -> float:
    """GPUs one job asks for: whole GPUs × workers, its fraction, or its MIG slice's compute
    share (3g.40gb on an A100: 3/7) — what it needs, not what a profile makes it hold.

    The share is exact: a placed slice is weighed within a thousandth of it, and a fully
    sliced GPU's slices weigh exactly one GPU (`sched.quota.slice_milli`), so the work
    counted from it matches the GPU time held. (Until slices were weighed by position it
    was rounded up to thousandths, 1g of 7 = 0.143, as the quota then weighed them.)
    """
    if job.gpus:
        return float(job.gpus * job.workers)
    if job.gpu_fraction is not None:
        return job.gpu_fraction
    if job.mig_profile is not None:
        acc = job.accelerators[0] if job.accelerators else accelerator
        whole = whole_gpu_slices(acc)
        profiles = mig_profiles_for(acc)
        compute = next((p.compute_slices for p in profiles if p.profile == job.mig_profile), whole)
        return compute / whole
    return 0.0


def _rescaled_busy(workload: Workload, cluster: Cluster) -> Workload:
    acc = cluster.accelerators[0]
    jobs = tuple(
        replace(j, busy_fraction=j.busy_fraction * requested_share(j, acc))
        if j.busy_fraction is not None and not j.gpus
        else j
        for j in workload.jobs
    )
    return Workload(jobs, workload.report, workload.nodes)


def _open_quotas(teams: TeamsSpec, cluster: Cluster) -> TeamsSpec:
    """`teams` with quotas that never bind (`OPEN_QUOTA_GPUS` of every accelerator)."""
    quotas = [
        Quota(flavor=acc, guaranteed_gpus=OPEN_QUOTA_GPUS)
        for acc in sorted(cluster.gpus_by_accelerator)
    ]
    return teams.model_copy(
        update={"teams": [t.model_copy(update={"quotas": quotas}) for t in teams.teams]}
    )


def offered_load(workload: Workload, cluster: Cluster, horizon_s: float) -> dict[str, float]:
    """Requested GPU-hours arriving before the horizon, per kind and in all, and as a share
    of the cluster's GPU-hours: what a scheduler that wasted nothing could run."""
    acc = cluster.accelerators[0]
    by_kind: dict[str, float] = {}
    for j in workload.jobs:
        if j.submit_s >= horizon_s:
            continue
        hours = requested_share(j, acc) * min(j.duration_s, horizon_s - j.submit_s) / 3600
        by_kind[j.kind] = by_kind.get(j.kind, 0.0) + hours
    total = math.fsum(by_kind.values())
    out = {f"gpu_hours.{k}": v for k, v in sorted(by_kind.items())}
    out["gpu_hours"] = total
    out["share_of_cluster"] = total / (cluster.gpu_count * horizon_s / 3600)
    return out


def _scalars(metrics: Mapping[str, Any]) -> dict[str, float | None]:
    """Every top-level number of `SimMetrics.to_json()`, and its percentile groups
    flattened (`wait_s.p50`); per-team and per-kind breakdowns are left out."""
    out: dict[str, float | None] = {}
    for key, value in metrics.items():
        if value is None or (isinstance(value, int | float) and not isinstance(value, bool)):
            out[key] = None if value is None else float(value)
        elif key in ("wait_s", "jct_s") and isinstance(value, Mapping):
            for sub, v in value.items():
                out[f"{key}.{sub}"] = None if v is None else float(v)
    return out


def run_utilization(
    profile: str, setup: ProfileSetup, seed: int, horizon_s: float
) -> dict[str, float | None]:
    """One simulation of the scenario: the stable metric fields (flattened) and the work
    done by what jobs asked for.

    `effective_gpu_hours` counts each completed job's requested GPUs (`requested_share`) ×
    its run time (inference: × the time it served inside its window), by kind as
    `effective_gpu_hours.<kind>`. `gpu_hours_completed` (the engine's) counts work on the
    GPUs a job asked for too, so under a whole-GPU-only profile it no longer credits a
    whole GPU per slice or share, nor under any profile the eighths a fraction is rounded
    up to (those are `idle_held_gpu_hours`); it differs from `effective_gpu_hours` only
    where a profile places a MIG slice as a slice, weighed by its position on the GPU (142
    or 143 thousandths for a 1g slice of 7, against 1/7).
    """

    config = SimConfig(profile=profile, seed=seed, horizon_s=horizon_s)
    sim = Simulation(setup.cluster, setup.teams, setup.workload, config)
    result = sim.run()
    metrics = result.metrics.to_json()
    row = _scalars(metrics)
    acc = setup.cluster.accelerators[0]
    work: dict[str, float] = {}
    for job, _, _ in sim.metrics.completed_runs:
        seconds = sim.runs[job.name].served_s if job.kind == "inference" else job.duration_s
        work[job.kind] = work.get(job.kind, 0.0) + requested_share(job, acc) * seconds / 3600
    row["effective_gpu_hours"] = math.fsum(work.values())
    for kind, hours in sorted(work.items()):
        row[f"effective_gpu_hours.{kind}"] = hours
    for kind, values in sorted(result.metrics.per_kind.items()):
        row[f"jobs_completed.{kind}"] = float(values["jobs_completed"])
    return row


def utilization_claims(
    profiles: Sequence[str] = UTILIZATION_PROFILES,
    seeds: int = 3,
    days: float = 14.0,
    *,
    on_run: Callable[[str, int, float], None] | None = None,
) -> dict[str, Any]:
    """The utilisation-claims scenario with each profile on seeds 0 … `seeds` − 1 over
    `days`; see the module doc and docs/experiments/utilization-claims.md.

    Each seed draws one workload (`generate(spec, default_rng(seed))`) that every profile
    replays (common random numbers). Returns `results` (profile → metric → mean over
    seeds), `per_seed` (profile → one row per seed), `versus` (each profile against the
    first: ratios of the means of effective GPU-hours, GPU-hours completed, jobs
    completed, allocation and busy utilisation), the `scenario` (files, per-seed offered
    load, how each profile was set up) and `timings_s`. `on_run(profile, seed, seconds)`
    after each run.
    """
    if seeds < 1:
        raise UserError(f"seeds must be at least 1, got {seeds}")
    names = list(dict.fromkeys(profiles))
    if not names:
        raise UserError("give at least one profile")
    for name in names:
        if name not in PROFILES:
            raise UnknownNameError("scheduling profile", name, PROFILES)

    scenario = utilization_scenario(days)
    horizon = days * DAY_S
    cluster = Cluster.from_spec(scenario.cluster)
    per_seed: dict[str, list[dict[str, float | None]]] = {p: [] for p in names}
    timings: dict[str, float] = dict.fromkeys(names, 0.0)
    offered: list[dict[str, float]] = []
    setups: dict[str, dict[str, Any]] = {}
    for seed in range(seeds):
        workload = generate(scenario.workload, np.random.default_rng(seed))
        offered.append(
            {"seed": seed, "jobs": len(workload.jobs)} | offered_load(workload, cluster, horizon)
        )
        for profile in names:
            setup = profile_setup(profile, cluster, scenario.teams, workload)
            setups[profile] = {
                "mig_layouts": setup.mig,
                "quotas": "open (no quota binds)" if setup.open_quotas else "teams.yaml",
                "busy_fraction_scaled_by_requested_share": setup.busy_rescaled,
            }
            t0 = time.perf_counter()
            row = run_utilization(profile, setup, seed, horizon)
            seconds = time.perf_counter() - t0
            timings[profile] += seconds
            per_seed[profile].append({"seed": float(seed), **row})
            if on_run is not None:
                on_run(profile, seed, seconds)
    results = {p: _means(rows) for p, rows in per_seed.items()}
    return {
        "experiment": UTILIZATION_SCENARIO,
        "scenario": {
            "files": f"gpufleet/sim/data/experiments/{UTILIZATION_SCENARIO}/"
            "{cluster,teams,workload}.yaml",
            "cluster": scenario.cluster.name,
            "gpus": cluster.gpu_count,
            "days": days,
            "seeds": list(range(seeds)),
            "profiles": setups,
            "offered_load": offered,
        },
        "results": results,
        "per_seed": per_seed,
        "versus": _versus(names, results),
        "timings_s": timings,
    }


def _means(rows: Sequence[Mapping[str, float | None]]) -> dict[str, float | None]:
    keys = list(dict.fromkeys(k for row in rows for k in row if k != "seed"))
    out: dict[str, float | None] = {}
    for key in keys:
        values = [v for row in rows if (v := row.get(key)) is not None]
        out[key] = math.fsum(values) / len(values) if values else None
    return out


VERSUS: Final = (
    "effective_gpu_hours",
    "gpu_hours_completed",
    "jobs_completed",
    "gpu_allocation_ratio",
    "busy_utilization",
)


def _versus(
    names: Sequence[str], results: Mapping[str, Mapping[str, float | None]]
) -> dict[str, Any]:
    """Each profile's means over the first profile's (the baseline), for the claim metrics."""
    base = names[0]
    out: dict[str, Any] = {"baseline": base}
    for name in names[1:]:
        ratios: dict[str, float | None] = {}
        for key in VERSUS:
            a, b = results[name].get(key), results[base].get(key)
            ratios[key] = None if a is None or not b else a / b
        out[name] = ratios
    return out


__all__ = [
    "EXPERIMENTS",
    "FRAGMENTATION_POLICIES",
    "UTILIZATION_PROFILES",
    "ProfileSetup",
    "Scenario",
    "fragmentation",
    "offered_load",
    "profile_setup",
    "requested_share",
    "run_utilization",
    "utilization_claims",
    "utilization_scenario",
]
